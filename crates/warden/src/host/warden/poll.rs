//! `poll`: one wait over every kind of waitable handle — connections and
//! listeners (readiness as `poll(2)` sees it), services (a call waits),
//! servlet exchanges, and child tasks (ended) — so one task can serve calls and connections
//! together.

use super::net::{MAX_POLL_HANDLES, POLL_HUP, POLL_IN, POLL_OUT};
use crate::host::guest::{memory, range, read_u32, ret32, write_u32};
use crate::host::sockets::Deadline;
use crate::host::wait::KEPT;
use crate::host::TaskData;
use crate::ipc::service::Service;
use crate::ipc::{Errno, Object};
use crate::net::socket::{poll_now, Conn, Listener};
use crate::task::TaskShared;
use std::future::Future;
use std::sync::Arc;
use std::task::Poll;
use wasmtime::{Caller, Linker};

pub(super) fn add_to_linker(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    linker.func_wrap_async(
        super::MODULE,
        "poll",
        |c: Caller<'_, TaskData>, (fds, n, timeout): (i32, i32, i64)| {
            Box::new(async move { ret32(poll(c, fds, n, timeout).await) })
        },
    )?;
    Ok(())
}

/// What one `poll` entry waits on.
enum Waitable {
    Conn(Arc<Conn>),
    Listener(Arc<Listener>),
    Service(Arc<Service>),
    Task(Arc<TaskShared>),
    Supervisor(Arc<crate::ipc::supervisor::Supervised>),
    Exchange(crate::ipc::exchange::ExchangeEnd),
}

/// One `poll` entry: what it waits on, the events asked and those found.
struct Entry {
    on: Waitable,
    events: u32,
    revents: u32,
}

/// A task's `poll` buffers, kept between calls so that a poll of a few
/// handles allocates nothing but the vector of its waits (nothing for one
/// handle, or when something is ready at once). Buffers that grew past
/// `KEPT` entries are not kept: a task that once polled thousands of
/// handles does not hold their room for ever.
#[derive(Default)]
pub(crate) struct Scratch {
    entries: Vec<Entry>,
    fds: Vec<libc::pollfd>,
}

async fn poll(mut c: Caller<'_, TaskData>, fds: i32, n: i32, timeout: i64) -> Result<i32, Errno> {
    let mut scratch = c.data_mut().ipc_mut().poll.take().unwrap_or_default();
    let result = poll_in(&mut c, &mut scratch, fds, n, timeout).await;
    // Its handles' references go now, not at the next call.
    scratch.entries.clear();
    if scratch.entries.capacity() <= KEPT && scratch.fds.capacity() <= KEPT {
        c.data_mut().ipc_mut().poll = Some(scratch);
    }
    result
}

async fn poll_in(
    c: &mut Caller<'_, TaskData>,
    scratch: &mut Scratch,
    fds: i32,
    n: i32,
    timeout: i64,
) -> Result<i32, Errno> {
    let n = n as u32;
    if n > MAX_POLL_HANDLES {
        return Err(Errno::Inval);
    }
    let Scratch {
        entries,
        fds: pollfds,
    } = scratch;
    entries.reserve(n as usize);
    {
        let (mem, data) = memory(c)?;
        range(mem.len(), fds, n as u64 * 12)?;
        for i in 0..n {
            let at = fds.wrapping_add((i * 12) as i32);
            let h = read_u32(mem, at)? as i32;
            let events = read_u32(mem, at.wrapping_add(4))?;
            let on = match data.ipc().handles.get(h)? {
                Object::Conn(s) => Waitable::Conn(s.clone()),
                Object::Listener(l) => Waitable::Listener(l.clone()),
                Object::Service(s) => Waitable::Service(s.service().clone()),
                Object::Task(t) => Waitable::Task(t.clone()),
                Object::Supervisor(s) => Waitable::Supervisor(s.clone()),
                Object::Exchange(x) => Waitable::Exchange(x.dup()),
                _ => return Err(Errno::BadHandle),
            };
            entries.push(Entry {
                on,
                events,
                revents: 0,
            });
        }
    }
    let deadline = Deadline::new(timeout);
    loop {
        let ready = check(entries, pollfds);
        // A wake that readiness does not confirm loops, but never past the
        // deadline.
        let ended =
            ready > 0 || deadline.passed() || deadline.wait(any_ready(entries)).await.is_err();
        if ended {
            let (mem, _) = memory(c)?;
            for (i, e) in entries.iter().enumerate() {
                write_u32(mem, fds.wrapping_add((i * 12 + 8) as i32), e.revents)?;
            }
            return Ok(ready);
        }
    }
}

/// Fills in each entry's events now (`fds` is room for the sockets'
/// `poll(2)` entries); returns how many have any.
fn check(entries: &mut [Entry], fds: &mut Vec<libc::pollfd>) -> i32 {
    fds.clear();
    let mut sockets = false;
    for e in entries.iter() {
        let fd = match &e.on {
            Waitable::Conn(s) => s.fd(),
            Waitable::Listener(l) => l.fd(),
            _ => -1,
        };
        sockets |= fd >= 0;
        let mut ev = libc::POLLRDHUP;
        if e.events & POLL_IN != 0 {
            ev |= libc::POLLIN;
        }
        if e.events & POLL_OUT != 0 {
            ev |= libc::POLLOUT;
        }
        fds.push(libc::pollfd {
            fd,
            events: ev,
            revents: 0,
        });
    }
    // Services, tasks and the rest are looked at directly: no system
    // call unless a socket is among the entries.
    if sockets {
        poll_now(fds);
    }
    let mut ready = 0;
    for (e, pfd) in entries.iter_mut().zip(fds.iter()) {
        let events = e.events;
        e.revents = match &e.on {
            Waitable::Conn(_) | Waitable::Listener(_) => socket_events(pfd.revents, events),
            Waitable::Service(s) => {
                if s.is_ready() {
                    POLL_IN & events
                } else {
                    0
                }
            }
            Waitable::Task(t) => {
                if t.family.exit().status.is_some() {
                    POLL_IN & events
                } else {
                    0
                }
            }
            Waitable::Supervisor(s) => match super::supervise::ready(s) {
                true => POLL_IN & events,
                false => 0,
            },
            Waitable::Exchange(x) => exchange_events(x, events),
        };
        if e.revents != 0 {
            ready += 1;
        }
    }
    ready
}

/// A socket's `WARDEN_POLL_*` bits from its `poll(2)` result: those asked
/// for in `events`, and a hang-up always.
fn socket_events(revents: i16, events: u32) -> u32 {
    let mut out = 0;
    if revents & libc::POLLIN != 0 {
        out |= POLL_IN;
    }
    if revents & libc::POLLOUT != 0 {
        out |= POLL_OUT;
    }
    if revents & (libc::POLLHUP | libc::POLLERR | libc::POLLRDHUP) != 0 {
        out |= POLL_HUP;
    }
    out & (events | POLL_HUP)
}

/// An exchange's `WARDEN_POLL_*` bits now: readable (bytes or the body's
/// end), writable, or hung up (no send can ever be taken).
fn exchange_events(x: &crate::ipc::exchange::ExchangeEnd, events: u32) -> u32 {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    let mut out = 0;
    if events & POLL_IN != 0 && x.poll_readable(&mut cx).is_ready() {
        out |= POLL_IN;
    }
    match x.poll_writable(&mut cx) {
        Poll::Ready(Ok(_)) => out |= POLL_OUT,
        Poll::Ready(Err(_)) => out |= POLL_HUP,
        Poll::Pending => {}
    }
    out & (events | POLL_HUP)
}

/// Resolves when `x` may have become ready for `events`.
async fn exchange_ready(x: &crate::ipc::exchange::ExchangeEnd, events: u32) {
    std::future::poll_fn(|cx| {
        let readable = events & POLL_IN != 0 && x.poll_readable(cx).is_ready();
        let writable = events & POLL_OUT != 0 && x.poll_writable(cx).is_ready();
        if readable || writable {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await
}

/// Resolves when any entry may have become ready. One entry, the usual
/// case, is waited on with no allocation; several share one vector.
async fn any_ready(entries: &[Entry]) {
    if let [e] = entries {
        return wait_entry(&e.on, e.events).await;
    }
    let waits = entries
        .iter()
        .filter(|e| can_wake(&e.on, e.events))
        .map(|e| wait_entry(&e.on, e.events));
    crate::host::wait::any_of(waits).await
}

/// Whether waiting on `on` for `events` may ever end: a service or child
/// can only be reported as POLL_IN, so without it, waiting on one would
/// wake for ever for nothing.
fn can_wake(on: &Waitable, events: u32) -> bool {
    matches!(
        on,
        Waitable::Conn(_) | Waitable::Listener(_) | Waitable::Exchange(_)
    ) || events & POLL_IN != 0
}

/// Resolves when `on` may have become ready for `events` (never, if it
/// cannot be reported: see [`can_wake`]).
async fn wait_entry(on: &Waitable, events: u32) {
    if !can_wake(on, events) {
        return std::future::pending().await;
    }
    match on {
        Waitable::Conn(s) => {
            let write = events & POLL_OUT != 0;
            let read = events & POLL_IN != 0 || !write;
            let mut readable = std::pin::pin!(async {
                if read {
                    let _ = s.readable().await;
                } else {
                    std::future::pending::<()>().await
                }
            });
            let mut writable = std::pin::pin!(async {
                if write {
                    let _ = s.writable().await;
                } else {
                    std::future::pending::<()>().await
                }
            });
            std::future::poll_fn(|cx| {
                if readable.as_mut().poll(cx).is_ready() || writable.as_mut().poll(cx).is_ready() {
                    Poll::Ready(())
                } else {
                    Poll::Pending
                }
            })
            .await
        }
        Waitable::Listener(l) => {
            let _ = l.ready().await;
        }
        Waitable::Service(s) => std::future::poll_fn(|cx| s.poll_ready(cx)).await,
        Waitable::Exchange(x) => exchange_ready(x, events).await,
        Waitable::Supervisor(s) => {
            let due = s.lock().pending.as_ref().map(|p| p.at);
            super::supervise::run_ends(s, due.map(tokio::time::Instant::from_std)).await
        }
        Waitable::Task(t) => {
            std::future::poll_fn(|cx| {
                let mut e = t.family.exit();
                if e.status.is_some() {
                    return Poll::Ready(());
                }
                if !e.waiters.iter().any(|w| w.will_wake(cx.waker())) {
                    e.waiters.push(cx.waker().clone());
                }
                Poll::Pending
            })
            .await
        }
    }
}
