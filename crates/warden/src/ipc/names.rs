//! The name service: portals registered under names, found by lookup.
//!
//! Which names a task may register and look up is decided by its manifest
//! (`provides`, `uses`); the checks are made by the host functions. A
//! registration holds a portal (so it counts as a client of the service)
//! until its task dies or the service closes, and is charged to that
//! task's memory budget ([`ENTRY_BYTES`] plus the name) meanwhile. A lookup
//! of a name not yet registered may wait; registering wakes the waiters.

use super::service::PortalRef;
use super::Errno;
use crate::task::{TaskId, TaskShared};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

/// Bytes charged per registered name, besides the name itself.
pub const ENTRY_BYTES: u64 = 128;

struct Entry {
    portal: PortalRef,
    owner: Arc<TaskShared>,
    charge: u64,
}

impl Drop for Entry {
    fn drop(&mut self) {
        self.owner.refund(self.charge);
    }
}

#[derive(Default)]
struct State {
    entries: HashMap<String, Entry>,
    waiters: Vec<(String, Waker)>,
}

/// The runtime's name service.
#[derive(Default)]
pub struct Names {
    state: Mutex<State>,
}

impl Names {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers `portal` under `name` for `owner`, charging it. A name
    /// whose service has closed may be taken over.
    pub fn register(
        &self,
        name: &str,
        portal: PortalRef,
        owner: &Arc<TaskShared>,
    ) -> Result<(), Errno> {
        let mut st = self.lock();
        if let Some(e) = st.entries.get(name) {
            if !e.portal.service().is_closed() {
                return Err(Errno::Exists);
            }
        }
        let charge = ENTRY_BYTES + name.len() as u64;
        if !owner.try_charge(charge) {
            return Err(Errno::NoMem);
        }
        let entry = Entry {
            portal,
            owner: owner.clone(),
            charge,
        };
        let replaced = st.entries.insert(name.to_string(), entry);
        let (wake, keep): (Vec<_>, Vec<_>) = std::mem::take(&mut st.waiters)
            .into_iter()
            .partition(|(n, _)| n == name);
        st.waiters = keep;
        drop(st);
        drop(replaced);
        for (_, w) in wake {
            w.wake();
        }
        Ok(())
    }

    /// A new portal to the service registered under `name`, or pending
    /// (with the waker kept) until it is registered.
    pub fn poll_lookup(&self, name: &str, cx: &mut Context<'_>) -> Poll<PortalRef> {
        let mut st = self.lock();
        if let Some(e) = st.entries.get(name) {
            if !e.portal.service().is_closed() {
                return Poll::Ready(e.portal.clone());
            }
        }
        if !st
            .waiters
            .iter()
            .any(|(n, w)| n == name && w.will_wake(cx.waker()))
        {
            st.waiters.push((name.to_string(), cx.waker().clone()));
        }
        Poll::Pending
    }

    /// A new portal to the live service registered under `name`, if any
    /// (without waiting).
    pub fn lookup(&self, name: &str) -> Option<PortalRef> {
        let st = self.lock();
        let e = st.entries.get(name)?;
        (!e.portal.service().is_closed()).then(|| e.portal.clone())
    }

    /// Forgets a waiter that gave up (timed out or died).
    pub fn cancel_wait(&self, name: &str, waker: &Waker) {
        self.lock()
            .waiters
            .retain(|(n, w)| !(n == name && w.will_wake(waker)));
    }

    /// Removes every name `owner` registered (it died).
    pub fn remove_owner(&self, owner: TaskId) {
        let mut st = self.lock();
        let gone: Vec<String> = st
            .entries
            .iter()
            .filter(|(_, e)| e.owner.id == owner)
            .map(|(n, _)| n.clone())
            .collect();
        let removed: Vec<Entry> = gone.iter().filter_map(|n| st.entries.remove(n)).collect();
        drop(st);
        drop(removed); // portals released outside the lock
    }

    #[cfg(test)]
    /// Registered names, sorted (for operators and tests).
    pub fn list(&self) -> Vec<String> {
        let mut v: Vec<String> = self.lock().entries.keys().cloned().collect();
        v.sort();
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipc::service::{Service, ServiceRef};
    use std::sync::Arc;
    use std::task::Wake;

    struct Flag(std::sync::atomic::AtomicBool);
    impl Wake for Flag {
        fn wake(self: Arc<Self>) {
            self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    fn task(id: u64, limit: Option<u64>) -> Arc<TaskShared> {
        Arc::new(TaskShared::new(TaskId(id), format!("t{id}"), None, limit))
    }

    #[test]
    fn register_lookup_wait_and_owner_death() {
        let names = Names::default();
        let (t1, t2, t3) = (task(1, None), task(2, None), task(3, None));
        let s = Service::new(TaskId(1));
        let holder = ServiceRef::new(&s);
        let flag = Arc::new(Flag(Default::default()));
        let w = Waker::from(flag.clone());
        let mut cx = Context::from_waker(&w);
        assert!(names.poll_lookup("kv", &mut cx).is_pending());
        names.register("kv", PortalRef::new(&s), &t1).unwrap();
        assert!(
            flag.0.load(std::sync::atomic::Ordering::SeqCst),
            "waiter woken"
        );
        assert!(names.poll_lookup("kv", &mut cx).is_ready());
        assert_eq!(
            names.register("kv", PortalRef::new(&s), &t2).err(),
            Some(Errno::Exists)
        );
        assert_eq!(names.list(), ["kv"]);
        assert_eq!(t1.memory.current(), ENTRY_BYTES + 2);
        assert_eq!(t2.memory.current(), 0);
        names.remove_owner(TaskId(1));
        assert!(names.list().is_empty());
        assert_eq!(s.portals(), 0);
        assert_eq!(t1.memory.current(), 0, "refunded");
        // A closed service's name can be taken over.
        names.register("kv", PortalRef::new(&s), &t1).unwrap();
        drop(holder);
        let s2 = Service::new(TaskId(3));
        let _h2 = ServiceRef::new(&s2);
        names.register("kv", PortalRef::new(&s2), &t3).unwrap();
        assert_eq!(t1.memory.current(), 0, "the old entry's charge returned");
        assert_eq!(t3.memory.current(), ENTRY_BYTES + 2);
    }

    /// Registrations are charged: a flood ends at the task's budget.
    #[test]
    fn registrations_are_charged_to_the_registering_task() {
        let names = Names::default();
        let t = task(1, Some(10 * (ENTRY_BYTES + 8)));
        let s = Service::new(TaskId(1));
        let _holder = ServiceRef::new(&s);
        let mut registered = 0;
        for i in 0..1000 {
            match names.register(&format!("flood{i:03}"), PortalRef::new(&s), &t) {
                Ok(()) => registered += 1,
                Err(e) => {
                    assert_eq!(e, Errno::NoMem);
                    break;
                }
            }
        }
        assert_eq!(registered, 10);
        names.remove_owner(TaskId(1));
        assert_eq!(t.memory.current(), 0);
    }
}
