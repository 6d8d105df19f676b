//! Each model starts the word in one position, races two or three
//! transitions from separate threads, and checks the invariants every
//! executor relies on: a runnable task is queued exactly once (no lost and
//! no doubled wake-up), and exactly one party finishes a task.

use crate::state::{AfterPoll, Kill, Start, State};
use loom::sync::atomic::{AtomicUsize, Ordering};
use loom::sync::Arc;
use loom::thread;

/// How often a task was put in the run queue, and finished.
#[derive(Default)]
struct Effects {
    queued: AtomicUsize,
    finished: AtomicUsize,
}

impl Effects {
    fn queue(&self, yes: bool) {
        if yes {
            self.queued.fetch_add(1, Ordering::SeqCst);
        }
    }
    fn finish(&self, yes: bool) {
        if yes {
            self.finished.fetch_add(1, Ordering::SeqCst);
        }
    }
    fn counts(&self) -> (usize, usize) {
        (
            self.queued.load(Ordering::SeqCst),
            self.finished.load(Ordering::SeqCst),
        )
    }
}

/// Runs `f` under every schedule with at most `preemptions` forced
/// switches: for a three-thread model whose every schedule takes minutes
/// to visit (`claim_races_wake_suspend_and_resume`: over five minutes
/// unbounded, 15 s within seven preemptions, under a second within
/// four; a race needs far fewer switches than seven to show).
fn bounded(preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(preemptions);
    builder.check(f);
}

/// A task a worker took from the queue and is polling.
fn running() -> State {
    let s = State::new();
    assert_eq!(s.start(), Start::Run);
    s
}

/// The lost wake-up of the old executor: a worker parks a suspended task
/// while an operator resumes it. Whoever comes second must make sure it
/// runs: it is either polled by the worker or queued by the resumer.
#[test]
fn park_races_resume() {
    loom::model(|| {
        let s = Arc::new(State::new());
        assert!(s.suspend());
        let fx = Arc::new(Effects::default());
        let (s2, fx2) = (s.clone(), fx.clone());
        let worker = thread::spawn(move || {
            let start = s2.start();
            fx2.queue(start == Start::Run); // polled now: counts as its run
        });
        fx.queue(s.resume());
        worker.join().unwrap();
        assert_eq!(fx.counts().0, 1, "the task must run exactly once");
    });
}

/// A task that ran and is now blocked: idle, waiting for a wake.
fn blocked() -> Arc<State> {
    let s = running();
    assert_eq!(s.end_poll(), AfterPoll::Idle);
    Arc::new(s)
}

/// An operator suspending the task and then resuming it, on a thread of
/// its own; the resume's queueing is counted.
fn suspend_and_resume(s: &Arc<State>, fx: &Arc<Effects>) -> thread::JoinHandle<()> {
    let (s, fx) = (s.clone(), fx.clone());
    thread::spawn(move || {
        s.suspend();
        fx.queue(s.resume());
    })
}

/// A running task is suspended, woken by its wait ending, and resumed,
/// while its worker ends the poll: it must end up queued exactly once.
#[test]
fn end_of_poll_races_wake_suspend_and_resume() {
    loom::model(|| {
        let s = Arc::new(running());
        let fx = Arc::new(Effects::default());
        let (s1, fx1) = (s.clone(), fx.clone());
        let worker = thread::spawn(move || {
            fx1.queue(s1.end_poll() == AfterPoll::Requeue);
        });
        let operator = suspend_and_resume(&s, &fx);
        fx.queue(s.wake());
        worker.join().unwrap();
        operator.join().unwrap();
        assert_eq!(fx.counts().0, 1, "one wake must queue the task once");
        assert!(s.load().is_queued());
    });
}

/// A wake racing the end of a poll: queued once, by one of the two.
#[test]
fn wake_races_end_of_poll() {
    loom::model(|| {
        let s = Arc::new(running());
        let fx = Arc::new(Effects::default());
        let (s1, fx1) = (s.clone(), fx.clone());
        let waker = thread::spawn(move || fx1.queue(s1.wake()));
        fx.queue(s.end_poll() == AfterPoll::Requeue);
        waker.join().unwrap();
        assert_eq!(fx.counts().0, 1);
    });
}

/// A kill racing a worker that takes the task from the queue and polls
/// it: exactly one of them finishes it, and a killed task is never left
/// idle or queued.
#[test]
fn kill_races_start_and_poll() {
    loom::model(|| {
        let s = Arc::new(State::new());
        let fx = Arc::new(Effects::default());
        let (s1, fx1) = (s.clone(), fx.clone());
        let worker = thread::spawn(move || {
            if s1.start() == Start::Run {
                fx1.finish(s1.end_poll() == AfterPoll::Finish);
            }
        });
        fx.finish(matches!(s.kill(), Kill::Finish { .. }));
        worker.join().unwrap();
        assert_eq!(fx.counts().1, 1, "finished by exactly one party");
        assert!(s.load().is_done());
    });
}

/// A kill racing suspension and a wake of a blocked task: finished once,
/// never queued afterwards.
#[test]
fn kill_races_suspend_and_wake() {
    loom::model(|| {
        let s = blocked();
        let fx = Arc::new(Effects::default());
        let (s1, fx1) = (s.clone(), fx.clone());
        let a = thread::spawn(move || {
            s1.suspend();
            fx1.queue(s1.wake());
        });
        let (s2, fx2) = (s.clone(), fx.clone());
        let b = thread::spawn(move || fx2.queue(s2.resume()));
        let killed = s.kill();
        fx.finish(matches!(killed, Kill::Finish { .. }));
        if let Kill::Finish { queued: true } = killed {
            // The killer takes it out of the queue: it never runs.
            fx.queued.fetch_sub(1, Ordering::SeqCst);
        }
        a.join().unwrap();
        b.join().unwrap();
        assert_eq!(fx.counts(), (0, 1), "killed: not run, finished once");
        assert!(s.load().is_done());
    });
}

/// A blocked task claimed by a worker for a direct hand-off while another
/// party wakes it and an operator suspends and resumes it: it runs once
/// (polled by the claimer, or queued by whoever queues it), never twice.
#[test]
fn claim_races_wake_suspend_and_resume() {
    bounded(7, || {
        let s = blocked();
        let fx = Arc::new(Effects::default());
        let (s1, fx1) = (s.clone(), fx.clone());
        let claimer = thread::spawn(move || {
            if s1.claim() {
                fx1.queue(true); // polled now: counts as its run
                fx1.queue(s1.end_poll() == AfterPoll::Requeue);
            }
        });
        let operator = suspend_and_resume(&s, &fx);
        fx.queue(s.wake());
        claimer.join().unwrap();
        operator.join().unwrap();
        let runs = fx.counts().0;
        assert!((1..=2).contains(&runs), "ran {runs} times");
        // Once more only if the second wake came while it ran: then it is
        // queued now, never left idle while woken.
        assert!(runs == 1 || s.load().is_queued());
    });
}

/// A kill racing a claim: exactly one party finishes the task.
#[test]
fn kill_races_claim() {
    loom::model(|| {
        let s = blocked();
        let fx = Arc::new(Effects::default());
        let (s1, fx1) = (s.clone(), fx.clone());
        let claimer = thread::spawn(move || {
            if s1.claim() {
                fx1.finish(s1.end_poll() == AfterPoll::Finish);
            }
        });
        fx.finish(matches!(s.kill(), Kill::Finish { .. }));
        claimer.join().unwrap();
        assert_eq!(fx.counts().1, 1, "finished by exactly one party");
        assert!(s.load().is_done());
    });
}
