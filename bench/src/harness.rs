//! How every figure is taken: contestants run in interleaved rounds, A B C
//! A B C …, the order rotating each round, so that drift in the machine
//! (other load, frequency, caches) lands on every contestant alike. A
//! warm-up round runs first and is not counted.
//!
//! The rotation's stride changes from round to round too (see [`order`]):
//! with a plain rotation each contestant would always run right after
//! the same one, and what that one leaves behind (memory to reclaim,
//! threads still settling, a cold cache) would always fall on it.

use crate::machine::Clock;
use crate::model::Samples;
use crate::peers::Peers;
use std::collections::BTreeMap;

/// What every table's code gets.
pub struct Ctx {
    pub quick: bool,
    /// Counted rounds per figure.
    pub rounds: usize,
    pub peers: Peers,
    pub clock: Clock,
    /// Whether `perf stat` counts cycles on this machine.
    pub perf: bool,
}

impl Ctx {
    /// `full` in a full run, `quick` in a quick one.
    pub fn pick<T>(&self, full: T, quick: T) -> T {
        if self.quick {
            quick
        } else {
            full
        }
    }
}

/// One contestant: a name and a closure that takes one sample of each of
/// its figures, pushing them into the samples it is given.
pub type Contestant<'a> = (
    String,
    Box<dyn FnMut(&mut Samples) -> Result<(), String> + 'a>,
);

pub fn contestant<'a>(
    name: &str,
    f: impl FnMut(&mut Samples) -> Result<(), String> + 'a,
) -> Contestant<'a> {
    (name.to_string(), Box::new(f))
}

/// Runs one warm-up round and `rounds` counted rounds of `contestants`,
/// rotating their order each round. A contestant that fails is dropped
/// from later rounds; its first error is returned under its name.
pub fn interleave(
    rounds: usize,
    mut contestants: Vec<Contestant<'_>>,
) -> (Samples, BTreeMap<String, String>) {
    let mut samples = Samples::default();
    let mut errors = BTreeMap::new();
    let n = contestants.len();
    for round in 0..=rounds {
        let mut scratch = Samples::default();
        let into = if round == 0 {
            &mut scratch
        } else {
            samples.1.current = round;
            samples.1.c2c.push(crate::machine::core_to_core_ns());
            &mut samples
        };
        for i in order(n, round) {
            let (name, f) = &mut contestants[i];
            if errors.contains_key(name) {
                continue;
            }
            if let Err(e) = f(into) {
                eprintln!("  {name}: {e}");
                errors.insert(name.clone(), e);
            }
        }
    }
    (samples, errors)
}

/// The order of `n` contestants in round `round`: starting at `round`
/// (mod `n`), then every `stride`-th, the stride taking in turn each
/// value below `n` that shares no factor with it (so that the round is a
/// permutation). Contestant `x` then follows `x - stride`, a different
/// one for each stride; the warm-up round (0) is `0, 1, … n-1`.
fn order(n: usize, round: usize) -> impl Iterator<Item = usize> {
    let strides: Vec<usize> = (1..n.max(2)).filter(|&s| gcd(s, n) == 1).collect();
    let stride = strides[round % strides.len()];
    (0..n).map(move |i| (round + i * stride) % n)
}

fn gcd(a: usize, b: usize) -> usize {
    match b {
        0 => a,
        _ => gcd(b, a % b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    #[test]
    fn rounds_interleave_and_rotate() {
        let order = RefCell::new(vec![]);
        let c = |name: &'static str| {
            let order = &order;
            contestant(name, move |s: &mut Samples| {
                order.borrow_mut().push(name);
                s.push(name, 1.0);
                Ok(())
            })
        };
        let (s, e) = interleave(2, vec![c("a"), c("b")]);
        assert!(e.is_empty());
        assert_eq!(*order.borrow(), ["a", "b", "b", "a", "a", "b"]);
        // The warm-up round is not counted.
        assert_eq!(s.0["a"].len(), 2);
    }

    /// Every round runs each contestant once, and over the rounds each
    /// runs after several different ones, not always the same.
    #[test]
    fn the_stride_changes_so_that_no_contestant_always_follows_the_same_one() {
        for n in 1..10 {
            let mut before: Vec<std::collections::BTreeSet<usize>> = vec![Default::default(); n];
            for round in 0..=20 {
                let o: Vec<usize> = order(n, round).collect();
                let mut sorted = o.clone();
                sorted.sort();
                assert_eq!(
                    sorted,
                    (0..n).collect::<Vec<_>>(),
                    "n {n} round {round}: {o:?}"
                );
                for w in o.windows(2) {
                    before[w[1]].insert(w[0]);
                }
            }
            let units = (1..n).filter(|&s| gcd(s, n) == 1).count();
            for (x, b) in before.iter().enumerate() {
                assert!(b.len() >= units.min(n - 1), "n {n}: {x} only after {b:?}");
            }
        }
        assert_eq!(order(8, 0).collect::<Vec<_>>(), (0..8).collect::<Vec<_>>());
    }

    #[test]
    fn a_failing_contestant_is_dropped_and_reported() {
        let mut calls = 0;
        let (s, e) = interleave(
            3,
            vec![
                contestant("bad", |_| {
                    calls += 1;
                    Err("broken".into())
                }),
                contestant("good", |s| {
                    s.push("good", 2.0);
                    Ok(())
                }),
            ],
        );
        assert_eq!(e["bad"], "broken");
        assert_eq!(s.0["good"].len(), 3);
        assert_eq!(calls, 1);
    }
}

/// Runs `f` with the idle spin of the runtimes `rts` off (every waiting
/// thread blocking at once, as the peers' do), then gives each back the
/// spin it was configured with.
pub fn without_idle_spin<R>(rts: &[&warden::Runtime], f: impl FnOnce() -> R) -> R {
    for rt in rts {
        rt.set_idle_spin(std::time::Duration::ZERO);
    }
    let r = f();
    for rt in rts {
        rt.set_idle_spin(rt.config().idle_spin);
    }
    r
}
