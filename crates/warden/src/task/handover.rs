//! A live upgrade's hand-over of state from the old task to the new one
//! that replaces it (JX hands a replaced component's state to its
//! successor; Erlang's `code_change`).
//!
//! The old task is asked; at its next `recv` it calls its
//! `warden_upgrade_save` export between calls and the bytes it returns
//! come here, after which its `recv` takes no more calls (they queue, and
//! go on to the new task when it takes the names over). The upgrade takes
//! the bytes and starts the new task with them (`Handed`), which its
//! `warden_upgrade_restore` export receives before `main`. An upgrade
//! that fails after that cancels: the old task's `recv` serves again, its
//! state as it was.
//!
//! ```text
//! Idle --ask--> Asked --recv--> Saving --saved--> Saved --take--> Taken
//!                 |                                  |              |
//!                 +---------------cancel-------------+--------------+--> Idle
//! ```

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// What the old task saved: its bytes (`None`: it exports no save), or
/// why it could not.
pub type Saved = Result<Option<Vec<u8>>, String>;

#[derive(Debug, Default)]
enum Stage {
    #[default]
    Idle,
    /// Asked to save at most this many bytes.
    Asked(u64),
    Saving,
    Saved(Saved),
    Taken,
}

/// One task's side of a hand-over.
#[derive(Debug, Default)]
pub struct HandOver {
    /// The stage, and the old task's `recv` waiting for it to change:
    /// under one lock, so that an ask cannot fall between a `recv`'s
    /// look at the stage and its waker's filing.
    stage: Mutex<(Stage, Option<Waker>)>,
    changed: Condvar,
    /// Whether the stage is other than `Idle`: a `recv` looks at this
    /// alone (no lock) unless a hand-over is under way.
    active: AtomicBool,
}

/// State handed to a new task (shown by its size).
#[derive(Clone)]
pub struct Handed(pub Arc<Vec<u8>>);

impl std::fmt::Debug for Handed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Handed({} bytes)", self.0.len())
    }
}

impl HandOver {
    fn stage(&self) -> std::sync::MutexGuard<'_, (Stage, Option<Waker>)> {
        self.stage.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Sets the stage to `to` and wakes the task's `recv`.
    fn set_and_wake(&self, mut st: std::sync::MutexGuard<'_, (Stage, Option<Waker>)>, to: Stage) {
        self.active
            .store(!matches!(to, Stage::Idle), Ordering::Release);
        st.0 = to;
        let waker = st.1.take();
        drop(st);
        self.changed.notify_all();
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Asks the task to save at most `max` bytes; `false` if a hand-over
    /// is under way already. A `recv` that has not looked at the stage
    /// since it went idle is not woken from here: the asker wakes the
    /// task's services' receivers too.
    pub fn ask(&self, max: u64) -> bool {
        let st = self.stage();
        if !matches!(st.0, Stage::Idle) {
            return false;
        }
        self.set_and_wake(st, Stage::Asked(max));
        true
    }

    /// For the task's `recv`: `Ready(max)` once it is asked to save (it
    /// is then saving); otherwise its waker is kept.
    pub fn poll_asked(&self, cx: &mut Context<'_>) -> Poll<u64> {
        if !self.active.load(Ordering::Acquire) {
            return Poll::Pending;
        }
        let mut st = self.stage();
        if let Stage::Asked(max) = st.0 {
            st.0 = Stage::Saving;
            return Poll::Ready(max);
        }
        match &st.1 {
            Some(w) if w.will_wake(cx.waker()) => {}
            _ => st.1 = Some(cx.waker().clone()),
        }
        Poll::Pending
    }

    /// Forgets the task's `recv` (the task has ended): a waker kept here
    /// would hold the task's executor entry from its own shared state.
    pub fn unwatch(&self) {
        self.stage().1 = None;
    }

    /// Whether the task has handed its state over and so takes no calls.
    pub fn holding(&self) -> bool {
        self.active.load(Ordering::Acquire)
            && matches!(self.stage().0, Stage::Saved(Ok(_)) | Stage::Taken)
    }

    /// The task's save is done; a failed one leaves it serving.
    pub fn saved(&self, saved: Saved) {
        let mut st = self.stage();
        if matches!(st.0, Stage::Saving) {
            st.0 = Stage::Saved(saved);
        }
        drop(st);
        self.changed.notify_all();
    }

    /// For the upgrade: what the task saved, once it has (at most
    /// `limit`); `None` if it did not save in time (the hand-over is then
    /// cancelled). A failed save leaves the task serving.
    pub fn take(&self, limit: Duration) -> Option<Saved> {
        let until = Instant::now() + limit;
        let mut st = self.stage();
        loop {
            if let Stage::Saved(_) = st.0 {
                let Stage::Saved(saved) = std::mem::replace(&mut st.0, Stage::Taken) else {
                    unreachable!()
                };
                if saved.is_err() {
                    st.0 = Stage::Idle;
                    self.active.store(false, Ordering::Release);
                }
                return Some(saved);
            }
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                drop(st);
                self.cancel();
                return None;
            }
            st = (self.changed.wait_timeout(st, left))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Ends the hand-over: the task serves again. A save under way when
    /// it is cancelled is dropped when it ends.
    pub fn cancel(&self) {
        self.set_and_wake(self.stage(), Stage::Idle);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cx_poll(h: &HandOver) -> Poll<u64> {
        let (_, waker) = crate::test_waker::counting_waker();
        h.poll_asked(&mut Context::from_waker(&waker))
    }

    #[test]
    fn a_hand_over_goes_ask_save_take_and_a_cancel_lets_the_task_serve() {
        let h = HandOver::default();
        assert_eq!(cx_poll(&h), Poll::Pending);
        assert!(h.ask(10) && !h.ask(10));
        assert_eq!(cx_poll(&h), Poll::Ready(10));
        assert!(!h.holding());
        h.saved(Ok(Some(b"abc".to_vec())));
        assert!(h.holding());
        assert_eq!(h.take(Duration::ZERO), Some(Ok(Some(b"abc".to_vec()))));
        assert!(h.holding());
        h.cancel();
        assert!(!h.holding() && h.ask(1));
    }

    #[test]
    fn a_task_that_does_not_save_in_time_is_not_held() {
        let h = HandOver::default();
        h.ask(10);
        assert_eq!(h.take(Duration::from_millis(1)), None);
        assert_eq!(cx_poll(&h), Poll::Pending);
        // A save that ends after the cancel is dropped.
        h.saved(Ok(None));
        assert!(!h.holding());
    }

    #[test]
    fn a_failed_save_leaves_the_task_serving() {
        let h = HandOver::default();
        h.ask(10);
        let _ = cx_poll(&h);
        h.saved(Err("too big".into()));
        assert!(!h.holding());
        assert_eq!(h.take(Duration::ZERO), Some(Err("too big".into())));
        assert!(h.ask(10));
    }

    /// An upgrade thread asking (and waking the task, as the runtime wakes
    /// its services' receivers), taking and cancelling against a task
    /// thread that sleeps until woken: no ask is missed (a lost wake-up
    /// leaves the task asleep and the take times out) and every take gets
    /// the round's bytes.
    #[test]
    fn asks_and_saves_on_two_threads_lose_no_wake_up() {
        struct Unpark(std::thread::Thread);
        impl std::task::Wake for Unpark {
            fn wake(self: Arc<Self>) {
                self.0.unpark();
            }
        }
        let h = Arc::new(HandOver::default());
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (task_h, task_done) = (h.clone(), done.clone());
        let task = std::thread::spawn(move || {
            let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
            let mut round = 0u32;
            while !task_done.load(std::sync::atomic::Ordering::SeqCst) {
                match task_h.poll_asked(&mut Context::from_waker(&waker)) {
                    Poll::Ready(_) => {
                        task_h.saved(Ok(Some(round.to_le_bytes().to_vec())));
                        round += 1;
                    }
                    Poll::Pending => std::thread::park(),
                }
            }
        });
        for round in 0..2000u32 {
            assert!(h.ask(4));
            task.thread().unpark();
            let got = h.take(Duration::from_secs(10));
            assert_eq!(got, Some(Ok(Some(round.to_le_bytes().to_vec()))));
            h.cancel();
        }
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        task.thread().unpark();
        task.join().unwrap();
    }
}
