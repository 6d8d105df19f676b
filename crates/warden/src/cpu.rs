//! CPU accounting: each worker thread's CPU clock, split among the tasks
//! it ran.
//!
//! Reading a thread's CPU clock is a system call (about half a microsecond
//! on a virtual machine), too slow to make twice around every poll when a
//! portal round trip is a handful of polls. So each worker keeps a
//! [`Meter`]: it times every poll with a cheap clock ([`crate::clock::ticks`])
//! and, once the polls since the last reading add up to [`WINDOW`] (or a
//! task ends, or the worker goes idle, or a deadline callback asks), reads
//! the thread CPU clock once and divides the CPU time consumed since the
//! last reading among those polls in proportion to their wall time. Every
//! nanosecond of the worker's CPU time is charged to some task, and a task
//! that runs for a whole slice is charged exactly its slice's CPU time.
//!
//! The same figures feed the scheduling policy: every share charged to a
//! task is also queued as a policy charge (under the account's key), which
//! the worker hands to the run queue after the poll. Stride passes, lottery
//! compensation and caps thus count CPU time, not wall time, and a busy
//! machine (which stretches a poll's wall time but not its CPU time) does
//! not skew them.
//!
//! A poll has an *account* (whose CPU it is) and a *runner* (the task
//! polled). They differ when a server runs on a client's lent context
//! (CPU inheritance): the client's account is charged, and the server
//! records the same CPU as served, so that its own limit still bounds
//! everything it runs.
//!
//! A thread that is no worker can run a task's slice too (a host thread's
//! call to a server waiting in `recv`, see `executor::host_hand_off`).
//! Its CPU clock also counts the thread's own work between such slices,
//! which is no task's; its meter is put in *wall mode* ([`wall_mode`]),
//! which charges each poll its wall time as CPU. That is never less than
//! the poll used (more if the system descheduled the thread during it),
//! and needs no CPU clock reading.

use crate::clock::thread_cpu_ns;
use crate::task::TaskShared;
use std::cell::RefCell;
use std::sync::Arc;

/// Wall time of polls after which the meter reads the CPU clock.
pub const WINDOW: u64 = 1_000_000;

/// Most polls remembered between readings.
const MAX_POLLS: usize = 256;

/// A poll is merged into an entry among this many of the latest.
const MERGE: usize = 4;

/// Most policy charges kept until the worker takes them.
const MAX_CHARGES: usize = 1024;

/// A worker thread's CPU meter. Its wall times are in the cheap clock's
/// counts ([`crate::clock::ticks`]), converted to nanoseconds only where they
/// are added up.
pub struct Meter {
    last_cpu: u64,
    polls: Vec<(Poll, u64)>,
    polls_wall: u64,
    /// The poll in progress and the clock (counts) when it (re)started.
    current: Option<(PollRef, u64)>,
    /// CPU charged since the policy last took its charges: (key, ns).
    charges: Vec<(u64, u64)>,
    /// The clock when the last poll ended, and when the next begins if
    /// already read (see [`nest`]): one reading serves both sides.
    last_end: u64,
    next_start: Option<u64>,
    /// Charges wall time as CPU (a thread that is no worker; see the
    /// module docs).
    wall: bool,
}

/// Whose CPU a poll is: the account charged, and the runner if another
/// task ran on that account.
#[derive(Clone)]
struct Poll {
    account: Arc<TaskShared>,
    runner: Option<Arc<TaskShared>>,
}

/// A poll in progress, by address: its caller holds both tasks for the
/// whole poll, so the meter takes no reference of its own until it keeps
/// the poll past its end ([`PollRef::to_owned`]). A round trip is two
/// polls; counting references on both tasks for each cost a tenth of it.
#[derive(Clone, Copy)]
struct PollRef {
    account: *const TaskShared,
    /// Null when the account's own task runs.
    runner: *const TaskShared,
}

impl PollRef {
    fn is(&self, poll: &Poll) -> bool {
        let runner = poll.runner.as_ref().map_or(std::ptr::null(), Arc::as_ptr);
        std::ptr::eq(self.account, Arc::as_ptr(&poll.account)) && std::ptr::eq(self.runner, runner)
    }

    /// An owned copy.
    ///
    /// # Safety
    ///
    /// The poll is still in progress: its caller's references keep both
    /// tasks alive.
    unsafe fn to_owned(self) -> Poll {
        // SAFETY: both pointers come from `Arc::as_ptr` of tasks the
        // caller still holds (see above).
        let own = |p: *const TaskShared| unsafe {
            Arc::increment_strong_count(p);
            Arc::from_raw(p)
        };
        Poll {
            account: own(self.account),
            runner: (!self.runner.is_null()).then(|| own(self.runner)),
        }
    }
}

impl Poll {
    fn charge(&self, ns: u64) {
        self.account.charge_cpu(ns);
        if let Some(runner) = &self.runner {
            runner.charge_served(ns);
        }
    }
}

thread_local! {
    static METER: RefCell<Option<Meter>> = const { RefCell::new(None) };
}

impl Meter {
    fn new() -> Self {
        Meter {
            last_cpu: thread_cpu_ns(),
            polls: Vec::with_capacity(MAX_POLLS),
            polls_wall: 0,
            current: None,
            charges: Vec::with_capacity(MAX_CHARGES),
            last_end: 0,
            next_start: None,
            wall: false,
        }
    }

    /// Queues a policy charge, merged with the last one if it is the same
    /// key's (a client and its server on one account, back to back).
    fn queue_charge(charges: &mut Vec<(u64, u64)>, key: u64, ns: u64) {
        if let Some((k, total)) = charges.last_mut() {
            if *k == key {
                *total += ns;
                return;
            }
        }
        if charges.len() >= MAX_CHARGES {
            // Not taken for a long while: dropped rather than kept without
            // bound (the worker takes them after every poll).
            charges.clear();
        }
        charges.push((key, ns));
    }

    /// Adds a finished poll (or part of one) of `wall` counts to those
    /// since the last reading. Shares are proportional to wall time, so a
    /// poll on the same account by the same runner as one of the last few
    /// is added to its entry: a client and its server taking turns (a
    /// round trip is two polls) keep two entries however many turns they
    /// take, and the reading waits for its window instead of for a full
    /// list.
    ///
    /// # Safety
    ///
    /// `poll` is in progress (see [`PollRef::to_owned`]).
    unsafe fn record(&mut self, poll: PollRef, wall: u64) {
        let wall = crate::clock::ticks::to_ns(wall);
        self.polls_wall += wall;
        let mut recent = self.polls.iter_mut().rev().take(MERGE);
        match recent.find(|(p, _)| poll.is(p)) {
            Some((_, w)) => *w += wall,
            // SAFETY: as the caller promises.
            None => self.polls.push((unsafe { poll.to_owned() }, wall)),
        }
    }

    /// Reads the CPU clock and charges what was used since the last
    /// reading to the polls since then (and the one in progress).
    fn reconcile(&mut self) {
        if self.wall {
            self.charge_wall(crate::clock::ticks::now());
            return;
        }
        let cpu = thread_cpu_ns();
        let delta = cpu.saturating_sub(self.last_cpu);
        self.last_cpu = cpu;
        let now = crate::clock::ticks::now();
        let current = self.current.as_mut().map(|(t, start)| {
            let wall = crate::clock::ticks::to_ns(now.saturating_sub(*start));
            *start = now;
            // SAFETY: `current` is a poll in progress: its caller (the
            // worker, or a deadline callback inside the poll) holds it.
            (unsafe { t.to_owned() }, wall)
        });
        let total = self.polls_wall + current.as_ref().map_or(0, |c| c.1);
        let mut left = delta;
        let n = self.polls.len() + current.is_some() as usize;
        for (i, (task, wall)) in self.polls.drain(..).chain(current).enumerate() {
            let share = if i + 1 == n {
                left
            } else if total == 0 {
                0
            } else {
                (delta as u128 * wall as u128 / total as u128) as u64
            };
            left -= share.min(left);
            task.charge(share);
            Self::queue_charge(&mut self.charges, task.account.id.0, share);
        }
        self.polls_wall = 0;
    }

    /// Wall mode: charges the poll in progress its wall time until `now`,
    /// and times it on from there. Returns that time, in counts.
    fn charge_wall(&mut self, now: u64) -> u64 {
        let Some((poll, start)) = self.current.as_mut() else {
            return 0;
        };
        let wall = now.saturating_sub(*start);
        *start = now;
        let ns = crate::clock::ticks::to_ns(wall);
        // SAFETY: `current` is a poll in progress (as in `reconcile`).
        let poll = unsafe { poll.to_owned() };
        poll.charge(ns);
        Self::queue_charge(&mut self.charges, poll.account.id.0, ns);
        wall
    }
}

/// Puts this thread's meter in wall mode (or back): see the module docs.
/// Only between polls.
pub fn wall_mode(on: bool) {
    with(|m| m.wall = on);
}

fn with<R>(f: impl FnOnce(&mut Meter) -> R) -> R {
    METER.with(|m| f(m.borrow_mut().get_or_insert_with(Meter::new)))
}

/// A poll of `runner` starts on this thread, charged to `account`.
/// Returns the meter's clock at its start, in [`crate::clock::ticks`] counts.
///
/// # Safety
///
/// Both tasks stay alive until the poll's [`end`]: the meter keeps their
/// addresses, not references, until then.
pub unsafe fn begin(account: &Arc<TaskShared>, runner: &Arc<TaskShared>) -> u64 {
    let poll = PollRef {
        account: Arc::as_ptr(account),
        runner: if Arc::ptr_eq(account, runner) {
            std::ptr::null()
        } else {
            Arc::as_ptr(runner)
        },
    };
    with(|m| {
        let now = m.next_start.take().unwrap_or_else(crate::clock::ticks::now);
        m.current = Some((poll, now));
        now
    })
}

/// Runs `f`, which polls another task on this thread, inside the poll in
/// progress: the outer poll's time so far is set aside as one poll, `f`'s
/// own polls are metered as theirs, and the outer poll goes on timing
/// from when `f`'s last poll ended. (The clock read that ends the outer
/// part also starts `f`'s first poll.)
pub fn nest<R>(f: impl FnOnce() -> R) -> R {
    let outer = with(|m| {
        let (poll, start) = m.current.take()?;
        let now = crate::clock::ticks::now();
        // SAFETY: the outer poll is in progress (its worker is in it).
        unsafe { m.record(poll, now.saturating_sub(start)) };
        if m.polls.len() >= MAX_POLLS {
            m.reconcile();
        }
        m.next_start = Some(now);
        m.last_end = now;
        Some(poll)
    });
    let result = f();
    with(|m| {
        m.next_start = None;
        if let Some(poll) = outer {
            m.current = Some((poll, m.last_end));
        }
    });
    result
}

/// The poll in progress ended; with `exact`, the task's CPU figure is
/// brought up to date now (the task ended, or a limit must be checked).
/// Returns the poll's wall time in nanoseconds and the meter's clock at
/// its end, in [`crate::clock::ticks`] counts.
pub fn end(exact: bool) -> (u64, u64) {
    with(|m| {
        let now = crate::clock::ticks::now();
        if m.wall {
            let wall = m.charge_wall(now);
            m.current = None;
            m.last_end = now;
            return (crate::clock::ticks::to_ns(wall), now);
        }
        let mut wall = 0;
        if let Some((poll, start)) = m.current.take() {
            wall = now.saturating_sub(start);
            // SAFETY: the poll ends only now: its caller still holds it.
            unsafe { m.record(poll, wall) };
        }
        if exact || m.polls_wall >= WINDOW || m.polls.len() >= MAX_POLLS {
            m.reconcile();
        }
        m.last_end = now;
        (crate::clock::ticks::to_ns(wall), now)
    })
}

/// Hands the CPU charged since the last call to `charge` (the account's
/// key and ns), for the scheduling policy.
pub fn take_charges(mut charge: impl FnMut(u64, u64)) {
    with(|m| {
        for (key, ns) in m.charges.drain(..) {
            charge(key, ns);
        }
    });
}

/// Whether any CPU was charged since the policy last took its charges.
pub fn has_charges() -> bool {
    with(|m| !m.charges.is_empty())
}

/// Brings every figure up to date, including the poll in progress (for
/// deadline callbacks, which run inside a poll).
pub fn reconcile() {
    with(Meter::reconcile);
}

/// Charges the polls not yet charged, reading the CPU clock only if there
/// are any (a worker about to look for work: after a task's end, which
/// read it, there are none). The CPU the thread uses until its next
/// reading goes to the polls before that reading: a worker that finds
/// work while it spins charges the spin to that work, one that goes to
/// sleep reads the clock first ([`reconcile`]) and charges it to nobody.
pub fn settle() {
    with(|m| {
        if !m.polls.is_empty() || m.current.is_some() {
            m.reconcile();
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::TaskId;

    fn spin(ms: u64) {
        let t = std::time::Instant::now();
        let mut x = 0u64;
        while t.elapsed().as_millis() < ms as u128 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
        }
    }

    /// A task with no limits, parent or groups. (Also calibrates the
    /// meter's clock, as a runtime does before its first poll: a thread
    /// whose poll waited for another's calibration would be timed a longer
    /// poll than it ran.)
    fn task(id: u64, name: &str) -> Arc<TaskShared> {
        crate::clock::ticks::calibrate();
        Arc::new(TaskShared::new(TaskId(id), name.into(), None, None))
    }

    fn burn(ns: u64) {
        let t = thread_cpu_ns();
        while thread_cpu_ns() - t < ns {
            std::hint::black_box(t);
        }
    }

    /// A poll nested in another (a direct hand-off) is metered as its
    /// own: the server records only what ran inside it as served, the
    /// client's account is charged for both, and the outer poll goes on
    /// timing afterwards. The split follows wall time, which a busy
    /// machine stretches unevenly (a preempted outer part takes share from
    /// the inner one), so the split is asked of the best of a few tries;
    /// with nesting broken, none comes near (the server is given nothing,
    /// or everything).
    #[test]
    fn a_nested_poll_is_metered_apart_from_the_one_around_it() {
        std::thread::spawn(|| {
            let mut splits = Vec::new();
            for id in 0..5 {
                let (client, server) = (task(2 * id + 1, "c"), task(2 * id + 2, "s"));
                reconcile();
                // SAFETY: both tasks outlive the poll.
                unsafe { begin(&client, &client) };
                burn(2_000_000);
                nest(|| {
                    // SAFETY: both tasks outlive the poll.
                    unsafe { begin(&client, &server) };
                    burn(2_000_000);
                    end(false);
                });
                burn(2_000_000);
                end(true);
                let (charged, served) = (client.cpu.charged_ns(), server.cpu.served_ns());
                assert!(charged >= 5_000_000, "client charged {charged}");
                assert_eq!(server.cpu.charged_ns(), 0);
                if (1_000_000..=4_000_000).contains(&served) {
                    return;
                }
                splits.push((served, charged));
            }
            panic!("server served (ns, of ns): {splits:?}");
        })
        .join()
        .unwrap();
    }

    /// A client and its server taking turns on the client's account keep
    /// one entry each until the meter reads the clock, and the reading
    /// still charges both.
    #[test]
    fn turns_of_a_client_and_its_server_keep_two_entries() {
        std::thread::spawn(|| {
            let (client, server) = (task(1, "c"), task(2, "s"));
            reconcile();
            // SAFETY: both tasks outlive the poll.
            unsafe { begin(&client, &client) };
            for _ in 0..20 {
                burn(20_000);
                nest(|| {
                    // SAFETY: both tasks outlive the poll.
                    unsafe { begin(&client, &server) };
                    burn(20_000);
                    end(false);
                });
                // Fewer after a reading (once a window, whatever the load).
                assert!(with(|m| m.polls.len()) <= 2);
            }
            end(true);
            // Both had a share (how much follows wall time, which load
            // stretches unevenly: the exact split is the test above's).
            let (charged, served) = (client.cpu.charged_ns(), server.cpu.served_ns());
            assert!(charged >= 800_000, "client charged {charged}");
            assert!(
                served > 0 && served < charged,
                "server served {served} of {charged}"
            );
        })
        .join()
        .unwrap();
    }

    /// A server's poll on a client's lent context is charged to the
    /// client and recorded as served by the server, which a limit on the
    /// server then sees.
    #[test]
    fn lent_cpu_is_charged_to_the_account_and_served_by_the_runner() {
        std::thread::spawn(|| {
            let client = task(1, "c");
            let server = Arc::new(TaskShared::new(
                TaskId(2),
                "s".into(),
                Some(std::time::Duration::from_millis(1)),
                None,
            ));
            reconcile();
            // SAFETY: both tasks outlive the poll.
            unsafe { begin(&client, &server) };
            burn(3_000_000);
            end(true);
            let (charged, served) = (client.cpu.charged_ns(), server.cpu.served_ns());
            assert!(charged >= 2_000_000, "client charged {charged}");
            assert_eq!(served, charged);
            assert_eq!(server.cpu.charged_ns(), 0);
            let (who, why) = server.cpu_breach().expect("server over its limit");
            assert_eq!(who.id, server.id);
            assert!(why.contains("cpu limit exceeded"), "{why}");
            assert!(client.cpu_breach().is_none());
        })
        .join()
        .unwrap();
    }

    #[test]
    fn thread_clock_advances_with_work() {
        let a = thread_cpu_ns();
        spin(5);
        assert!(thread_cpu_ns() > a);
    }

    /// Each task is charged the CPU its polls were given, and the charges
    /// add up to the thread's CPU time. A poll of at least a window ends
    /// its window, so each one here is charged on its own; the test
    /// measures what the thread actually got during each poll, so a busy
    /// machine (which stretches wall time, not CPU time) changes nothing.
    #[test]
    fn charges_follow_the_cpu_each_poll_was_given() {
        std::thread::spawn(|| {
            let (a, b) = (task(1, "a"), task(2, "b"));
            reconcile();
            let start = thread_cpu_ns();
            let mut given = [0u64; 2];
            for _ in 0..20 {
                for (i, task, ms) in [(0, &a, 1), (1, &b, 3)] {
                    // SAFETY: both tasks outlive the poll.
                    unsafe { begin(task, task) };
                    let before = thread_cpu_ns();
                    spin(ms);
                    given[i] += thread_cpu_ns() - before;
                    end(false);
                }
            }
            reconcile();
            let used = thread_cpu_ns() - start;
            let charged = [a.cpu.charged_ns(), b.cpu.charged_ns()];
            let sum = charged[0] + charged[1];
            assert!(sum.abs_diff(used) < 200_000, "charged {sum} of {used}");
            for i in 0..2 {
                let err = charged[i].abs_diff(given[i]) as f64 / given[i] as f64;
                assert!(err < 0.1, "task {i}: charged {charged:?}, given {given:?}");
            }
        })
        .join()
        .unwrap();
    }
}
