//! The policy against a simulated link: every test drives `dequeue` with
//! a clock that advances by each packet's transmission time.

use super::*;

const PACKET: u32 = 16 * 1024;
const LINK: f64 = 200e6; // bytes per second

/// Sends for `seconds` of simulated time on a link of `LINK` bytes/s;
/// `busy(leaf, now)` says whether a leaf has more to send. Returns bytes
/// sent per leaf, in `leaves` order.
fn run(
    t: &mut FairTree,
    leaves: &[NodeId],
    seconds: f64,
    mut busy: impl FnMut(NodeId, u64) -> bool,
) -> Vec<u64> {
    let mut sent = vec![0u64; leaves.len()];
    let mut now = 0u64;
    let end = (seconds * 1e9) as u64;
    while now < end {
        for &l in leaves {
            if !t.waiting(l) && busy(l, now) {
                t.enqueue(l, PACKET);
            }
        }
        match t.dequeue(now) {
            Some((leaf, len)) => {
                let i = leaves.iter().position(|&l| l == leaf).unwrap();
                sent[i] += len as u64;
                now += (len as f64 / LINK * 1e9) as u64;
            }
            None => now = t.next_release(now).unwrap_or(now + 1_000_000).max(now + 1),
        }
    }
    sent
}

fn fractions(sent: &[u64]) -> Vec<f64> {
    let total: u64 = sent.iter().sum();
    sent.iter().map(|&s| s as f64 / total as f64).collect()
}

#[test]
fn backlogged_senders_share_by_weight() {
    let mut t = FairTree::new();
    let leaves: Vec<_> = (1..=4).map(|w| t.add(ROOT, w, None, 0)).collect();
    let f = fractions(&run(&mut t, &leaves, 2.0, |_, _| true));
    for (i, f) in f.iter().enumerate() {
        let want = (i + 1) as f64 / 10.0;
        assert!((f - want).abs() < 0.002, "leaf {i}: {f} vs {want}");
    }
}

#[test]
fn an_idle_senders_share_goes_to_the_others_at_once() {
    let mut t = FairTree::new();
    let leaves: Vec<_> = (1..=4).map(|w| t.add(ROOT, w, None, 0)).collect();
    let quiet = leaves[3];
    // The heaviest sender stops after 1 s; measure the next 10 ms only.
    let stop = 1_000_000_000u64;
    let mut window = vec![0u64; 3];
    let mut now = 0u64;
    while now < stop + 10_000_000 {
        for &l in &leaves {
            if !t.waiting(l) && (l != quiet || now < stop) {
                t.enqueue(l, PACKET);
            }
        }
        if now >= stop {
            t.cancel(quiet); // it has nothing more to send
        }
        let (leaf, len) = t.dequeue(now).expect("someone is busy");
        if now >= stop {
            assert_ne!(leaf, quiet, "it stopped sending");
            window[leaves.iter().position(|&l| l == leaf).unwrap()] += len as u64;
        }
        now += (len as f64 / LINK * 1e9) as u64;
    }
    let f = fractions(&window);
    for (i, f) in f.iter().enumerate() {
        let want = (i + 1) as f64 / 6.0;
        assert!(
            (f - want).abs() < 0.03,
            "leaf {i}: {f} vs {want} within 10 ms"
        );
    }
}

#[test]
fn groups_divide_first_and_members_share_inside() {
    let mut t = FairTree::new();
    let a = t.add(ROOT, 1, None, 0);
    let b = t.add(ROOT, 1, None, 0);
    let a1 = t.add(a, 1, None, 0);
    let a2 = t.add(a, 1, None, 0);
    let a3 = t.add(a, 2, None, 0);
    let b1 = t.add(b, 1, None, 0);
    let f = fractions(&run(&mut t, &[a1, a2, a3, b1], 1.0, |_, _| true));
    let want = [0.125, 0.125, 0.25, 0.5];
    for i in 0..4 {
        assert!((f[i] - want[i]).abs() < 0.003, "{i}: {f:?}");
    }
}

#[test]
fn a_cap_holds_on_an_idle_link_and_a_busy_one() {
    let cap = 20_000_000u64; // 10% of the link
    let mut t = FairTree::new();
    let capped = t.add(ROOT, 10, Some(cap), 0);
    let sent = run(&mut t, &[capped], 2.0, |_, _| true);
    let rate = sent[0] as f64 / 2.0;
    assert!((rate / cap as f64 - 1.0).abs() < 0.02, "alone: {rate}");

    let mut t = FairTree::new();
    let capped = t.add(ROOT, 10, Some(cap), 0);
    let other = t.add(ROOT, 1, None, 0);
    let sent = run(&mut t, &[capped, other], 2.0, |_, _| true);
    let rate = sent[0] as f64 / 2.0;
    assert!((rate / cap as f64 - 1.0).abs() < 0.02, "shared: {rate}");
    let rest = sent[1] as f64 / 2.0;
    assert!(rest > 0.85 * (LINK - cap as f64), "work-conserving: {rest}");
}

#[test]
fn a_group_cap_covers_its_members() {
    let mut t = FairTree::new();
    let g = t.add(ROOT, 1, Some(10_000_000), 0);
    let m1 = t.add(g, 1, None, 0);
    let m2 = t.add(g, 3, None, 0);
    assert!(t.capped(m1) && t.capped(g));
    let sent = run(&mut t, &[m1, m2], 2.0, |_, _| true);
    let total = (sent[0] + sent[1]) as f64 / 2.0;
    assert!((total / 10e6 - 1.0).abs() < 0.02, "{total}");
    let f = fractions(&sent);
    assert!((f[0] - 0.25).abs() < 0.02, "{f:?}");
}

#[test]
fn cancel_and_remove_leave_the_others_running() {
    let mut t = FairTree::new();
    let a = t.add(ROOT, 1, None, 0);
    let b = t.add(ROOT, 1, None, 0);
    t.enqueue(a, 100);
    t.enqueue(b, 100);
    t.cancel(a);
    assert_eq!(t.backlog(), 1);
    t.remove(a);
    assert_eq!(t.dequeue(0), Some((b, 100)));
    assert_eq!(t.dequeue(0), None);
    // The freed node is reused and starts clean.
    let c = t.add(ROOT, 1, None, 0);
    assert_eq!(c, a);
    assert!(!t.waiting(c));
    t.enqueue(c, 7);
    assert_eq!(t.dequeue(0), Some((c, 7)));
}

#[test]
fn nothing_but_held_packets_means_a_release_time() {
    let mut t = FairTree::new();
    let a = t.add(ROOT, 1, Some(1_000_000), 0);
    // Drain the bucket: its burst, then one packet into debt.
    let mut now = 0;
    let mut sent = 0u64;
    loop {
        t.enqueue(a, PACKET);
        match t.dequeue(now) {
            Some((_, len)) => sent += len as u64,
            None => break,
        }
    }
    assert!(sent as f64 >= burst(1_000_000));
    let at = t.next_release(now).expect("held by its cap");
    assert!(at > now);
    now = at;
    assert_eq!(t.dequeue(now), Some((a, PACKET)));
}

#[test]
fn a_retired_parent_goes_with_its_last_child() {
    let mut t = FairTree::new();
    let parent = t.add(ROOT, 1, None, 0);
    let own = t.add(parent, 1, None, 0);
    let child = t.add(parent, 1, None, 0);
    assert_eq!(t.nodes(), 4);
    t.retire(own);
    t.retire(parent);
    assert_eq!(t.nodes(), 3, "the parent waits for its child");
    t.enqueue(child, 10);
    assert_eq!(t.dequeue(0), Some((child, 10)));
    t.retire(child);
    assert_eq!(t.nodes(), 1, "only the link is left");
}

#[test]
fn a_receive_bucket_averages_its_rate() {
    let mut b = Bucket::new(1_000_000, 0);
    let mut now = 0u64;
    let mut got = 0u64;
    while now < 2_000_000_000 {
        match b.wait_ns(now) {
            0 => {
                let n = b.available(now).clamp(1, 4096);
                b.take(n);
                got += n;
            }
            w => now += w,
        }
    }
    let rate = got as f64 / 2.0;
    assert!((rate / 1e6 - 1.0).abs() < 0.04, "{rate}");
}
