//! The name service: portals registered under names, found by lookup.
//!
//! Which names a task may register and look up is decided by its manifest
//! (`provides`, `uses`); the checks are made by the host functions. A
//! registration holds a portal (so it counts as a client of the service)
//! until its task dies or the service closes, and is charged to that
//! task's memory budget ([`ENTRY_BYTES`] plus the name) meanwhile. A lookup
//! of a name not yet registered may wait; registering wakes the waiters.
//!
//! In a cluster, a waiting lookup that finds no local name asks the
//! [`Remote`] names too, and a registration its task may export (the
//! manifest's `export`) is offered to the other nodes.

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
    exported: bool,
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

/// Names served beyond this runtime: the other nodes of a cluster.
pub trait Remote: Send + Sync {
    /// A portal to the remote service `name`, or pending (waker kept)
    /// until some node serves it.
    fn poll_lookup(&self, name: &str, cx: &mut Context<'_>) -> Poll<PortalRef>;
    /// Forgets a waiter that gave up.
    fn cancel_wait(&self, name: &str, waker: &Waker);
    /// A local name that may be exported was registered: offer it now.
    fn exported(&self, name: &str);
}

/// The runtime's name service.
#[derive(Default)]
pub struct Names {
    state: Mutex<State>,
    remote: std::sync::OnceLock<Arc<dyn Remote>>,
}

impl Names {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Joins the name service to a cluster's names (once).
    pub fn set_remote(&self, remote: Arc<dyn Remote>) {
        let _ = self.remote.set(remote);
    }

    /// Registers `portal` under `name` for `owner`, charging it; with
    /// `exported`, other nodes of a cluster may call it too. A name whose
    /// service has closed may be taken over, and so may a live one by
    /// the task that replaces its owner (a live upgrade: the old service
    /// is retired in favour of the new, see `Service::retire`).
    pub fn register(
        &self,
        name: &str,
        portal: PortalRef,
        owner: &Arc<TaskShared>,
        exported: bool,
    ) -> Result<(), Errno> {
        let mut st = self.lock();
        let mut retired = None;
        if let Some(e) = st.entries.get(name) {
            let service = e.portal.service();
            match owner.replaces() == Some(e.owner.id) {
                // A live upgrade: the new server takes the name over, and
                // the old one's service sends its calls on.
                true if !service.is_closed() => {
                    e.owner
                        .replaced
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                    retired = Some(service.clone());
                }
                _ if !service.is_closed() => return Err(Errno::Exists),
                _ => {}
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
            exported,
        };
        if let Some(old) = &retired {
            old.retire(entry.portal.service());
        }
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
        if let (true, Some(remote)) = (exported, self.remote.get()) {
            remote.exported(name);
        }
        Ok(())
    }

    /// The live names registered here that other nodes may call, sorted.
    pub fn exported(&self) -> Vec<String> {
        let st = self.lock();
        let mut v: Vec<String> = st
            .entries
            .iter()
            .filter(|(_, e)| e.exported && !e.portal.service().is_closed())
            .map(|(n, _)| n.clone())
            .collect();
        v.sort();
        v
    }

    /// A new portal to the service registered under `name` here, or
    /// else on another node of the cluster; pending (with the waker kept)
    /// until one of them is registered.
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
        drop(st);
        match self.remote.get() {
            Some(remote) => remote.poll_lookup(name, cx),
            None => Poll::Pending,
        }
    }

    /// A new portal to the live service registered under `name` here, if
    /// any (without waiting; other nodes are not asked).
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
        if let Some(remote) = self.remote.get() {
            remote.cancel_wait(name, waker);
        }
    }

    /// The names `owner` holds, sorted.
    pub fn names_of(&self, owner: TaskId) -> Vec<String> {
        let st = self.lock();
        let mut v: Vec<String> = (st.entries.iter())
            .filter(|(_, e)| e.owner.id == owner)
            .map(|(n, _)| n.clone())
            .collect();
        v.sort();
        v
    }

    /// The task holding `name`, if a task does.
    pub fn owner_of(&self, name: &str) -> Option<TaskId> {
        self.lock().entries.get(name).map(|e| e.owner.id)
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
        names
            .register("kv", PortalRef::new(&s), &t1, false)
            .unwrap();
        assert!(
            flag.0.load(std::sync::atomic::Ordering::SeqCst),
            "waiter woken"
        );
        assert!(names.poll_lookup("kv", &mut cx).is_ready());
        assert_eq!(
            names.register("kv", PortalRef::new(&s), &t2, false).err(),
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
        names
            .register("kv", PortalRef::new(&s), &t1, false)
            .unwrap();
        drop(holder);
        let s2 = Service::new(TaskId(3));
        let _h2 = ServiceRef::new(&s2);
        names
            .register("kv", PortalRef::new(&s2), &t3, false)
            .unwrap();
        assert_eq!(t1.memory.current(), 0, "the old entry's charge returned");
        assert_eq!(t3.memory.current(), ENTRY_BYTES + 2);
    }

    /// A live upgrade: only the task that replaces a name's owner may take
    /// the live name over, and the old service is then retired.
    #[test]
    fn the_replacing_task_takes_a_live_name_over() {
        let names = Names::default();
        let (old, stranger) = (task(1, None), task(2, None));
        let mut new = TaskShared::new(TaskId(3), "t3".into(), None, None);
        new.replaces = Some(TaskId(1));
        let new = Arc::new(new);
        let (s1, s3) = (Service::new(TaskId(1)), Service::new(TaskId(3)));
        let (_h1, _h3) = (ServiceRef::new(&s1), ServiceRef::new(&s3));
        names
            .register("kv", PortalRef::new(&s1), &old, false)
            .unwrap();
        assert_eq!(
            names
                .register("kv", PortalRef::new(&s3), &stranger, false)
                .err(),
            Some(Errno::Exists)
        );
        assert!(!s1.is_retired());
        names
            .register("kv", PortalRef::new(&s3), &new, false)
            .unwrap();
        assert!(s1.is_retired());
        assert!(Arc::ptr_eq(names.lookup("kv").unwrap().service(), &s3));
        assert_eq!(old.memory.current(), 0, "the old entry's charge returned");
    }

    /// Names elsewhere: a local name wins, a remote one is found when no
    /// local one is, waiting lookups are withdrawn from both, and only
    /// exported registrations are offered.
    #[test]
    fn remote_names_come_after_local_ones() {
        #[derive(Default)]
        struct Fake {
            service: std::sync::OnceLock<Arc<Service>>,
            offered: Mutex<Vec<String>>,
            cancelled: Mutex<Vec<String>>,
        }
        impl Remote for Fake {
            fn poll_lookup(&self, name: &str, _: &mut Context<'_>) -> Poll<PortalRef> {
                match (name, self.service.get()) {
                    ("far", Some(s)) => Poll::Ready(PortalRef::new(s)),
                    _ => Poll::Pending,
                }
            }
            fn cancel_wait(&self, name: &str, _: &Waker) {
                self.cancelled.lock().unwrap().push(name.into());
            }
            fn exported(&self, name: &str) {
                self.offered.lock().unwrap().push(name.into());
            }
        }
        let names = Names::default();
        let fake = Arc::new(Fake::default());
        let far = Service::new(TaskId(9));
        let _far_holder = ServiceRef::new(&far);
        let _ = fake.service.set(far.clone());
        names.set_remote(fake.clone());
        let t = task(1, None);
        let near = Service::new(TaskId(1));
        let _holder = ServiceRef::new(&near);
        let flag = Arc::new(Flag(Default::default()));
        let w = Waker::from(flag);
        let mut cx = Context::from_waker(&w);
        let Poll::Ready(p) = names.poll_lookup("far", &mut cx) else {
            panic!("remote name not found")
        };
        assert!(Arc::ptr_eq(p.service(), &far));
        assert!(
            names.lookup("far").is_none(),
            "lookup without waiting is local"
        );
        names
            .register("far", PortalRef::new(&near), &t, false)
            .unwrap();
        let Poll::Ready(p) = names.poll_lookup("far", &mut cx) else {
            panic!()
        };
        assert!(Arc::ptr_eq(p.service(), &near), "the local name wins");
        assert!(names.poll_lookup("nowhere", &mut cx).is_pending());
        names.cancel_wait("nowhere", &w);
        assert_eq!(*fake.cancelled.lock().unwrap(), ["nowhere"]);
        names
            .register("kv", PortalRef::new(&near), &t, true)
            .unwrap();
        assert_eq!(*fake.offered.lock().unwrap(), ["kv"], "only exported names");
        assert_eq!(names.exported(), ["kv"]);
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
            match names.register(&format!("flood{i:03}"), PortalRef::new(&s), &t, false) {
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
