//! `poll_oneoff` when any subscription names a socket (see `net`).
//!
//! A task keeps the call's buffers (its subscriptions, the sockets'
//! `pollfd`s and the events found) between calls, as `poll` does its own:
//! a call over a few descriptors allocates nothing when something is
//! ready at once, and, waiting on one socket, nothing either; only a wait
//! on several boxes a future for each.

use super::net::{errno, wasi_errno, Sock, Sockets};
use super::subscription::*;
use crate::host::guest::{memory, range, read_u32, write_u32};
use crate::host::wait::KEPT;
use crate::host::TaskData;
use crate::net::socket::poll_now;
use wasmtime::Caller;

#[derive(Clone, Copy)]
enum Sub {
    Clock(u64),
    Read(i32),
    Write(i32),
}

struct Subscription {
    userdata: u64,
    kind: Sub,
}

/// An event to report: userdata, type and flags.
type Event = (u64, u8, u16);

/// A task's `poll_oneoff` buffers, made at its first call over a socket.
#[derive(Default)]
pub(crate) struct Scratch {
    subs: Vec<Subscription>,
    fds: Vec<libc::pollfd>,
    events: Vec<Event>,
}

impl Scratch {
    /// Whether it is small enough to keep for the next call.
    fn worth_keeping(&self) -> bool {
        self.subs.capacity() <= KEPT
            && self.fds.capacity() <= KEPT
            && self.events.capacity() <= KEPT
    }
}

/// Clock subscriptions (relative) bound the wait; other descriptors
/// (files, the standard streams) are reported ready at once, as Wasmtime
/// reports files.
pub(super) async fn poll_oneoff(
    c: &mut Caller<'_, TaskData>,
    subs: i32,
    events: i32,
    n: i32,
    nevents: i32,
) -> i32 {
    let mut scratch = c.data_mut().preview1_mut().poll.take().unwrap_or_default();
    let result = poll_in(c, &mut scratch, subs, events, n, nevents).await;
    if scratch.worth_keeping() {
        c.data_mut().preview1_mut().poll = Some(scratch);
    }
    result
}

async fn poll_in(
    c: &mut Caller<'_, TaskData>,
    scratch: &mut Scratch,
    subs: i32,
    events: i32,
    n: i32,
    nevents: i32,
) -> i32 {
    let Scratch {
        subs: parsed,
        fds,
        events: found,
    } = scratch;
    if let Err(e) = parse(c, parsed, subs, events, n as u32 as usize) {
        return e;
    }
    let timeout = parsed
        .iter()
        .filter_map(|s| match s.kind {
            Sub::Clock(ns) => Some(ns),
            _ => None,
        })
        .min();
    let deadline =
        crate::host::sockets::Deadline::new(timeout.map_or(-1, |t| t.min(i64::MAX as u64) as i64));
    loop {
        ready(c, parsed, fds, found);
        if !found.is_empty() {
            return write_events(c, events, nevents, found);
        }
        if deadline.passed() || deadline.wait(wait_any(c, parsed)).await.is_err() {
            found.extend(
                parsed
                    .iter()
                    .filter(|s| matches!(s.kind, Sub::Clock(_)))
                    .map(|s| (s.userdata, EVENTTYPE_CLOCK, 0u16)),
            );
            return write_events(c, events, nevents, found);
        }
    }
}

/// Reads the `n` subscriptions at `subs` into `out` (cleared first),
/// after checking that they and the `n` events at `events` lie in memory.
fn parse(
    c: &mut Caller<'_, TaskData>,
    out: &mut Vec<Subscription>,
    subs: i32,
    events: i32,
    n: usize,
) -> Result<(), i32> {
    out.clear();
    let (mem, _) = memory(c).map_err(wasi_errno)?;
    range(mem.len(), subs, n as u64 * SUBSCRIPTION_BYTES).map_err(|_| errno::FAULT)?;
    range(mem.len(), events, n as u64 * EVENT_BYTES).map_err(|_| errno::FAULT)?;
    out.reserve(n);
    for i in 0..n {
        let mut s = [0u8; SUBSCRIPTION_BYTES as usize];
        let at = subs.wrapping_add((i as u64 * SUBSCRIPTION_BYTES) as i32);
        let r = range(mem.len(), at, SUBSCRIPTION_BYTES).map_err(|_| errno::FAULT)?;
        mem.read(r, &mut s);
        let field = |at: usize, n: usize| -> &[u8] { &s[at..at + n] };
        let userdata = u64::from_le_bytes(field(USERDATA, 8).try_into().expect("8 bytes"));
        let fd = i32::from_le_bytes(field(FD, 4).try_into().expect("4 bytes"));
        let kind = match s[TAG] {
            EVENTTYPE_CLOCK => {
                let flags = u16::from_le_bytes(field(FLAGS, 2).try_into().expect("2 bytes"));
                if flags & ABSTIME != 0 {
                    return Err(errno::NOTSUP); // absolute times: not with sockets
                }
                Sub::Clock(u64::from_le_bytes(
                    field(TIMEOUT, 8).try_into().expect("8 bytes"),
                ))
            }
            EVENTTYPE_FD_READ => Sub::Read(fd),
            EVENTTYPE_FD_WRITE => Sub::Write(fd),
            _ => return Err(errno::INVAL),
        };
        out.push(Subscription { userdata, kind });
    }
    Ok(())
}

/// Fills `out` (cleared first) with the events ready now; `fds` is room
/// for the sockets' `poll(2)` entries.
fn ready(
    c: &mut Caller<'_, TaskData>,
    subs: &[Subscription],
    fds: &mut Vec<libc::pollfd>,
    out: &mut Vec<Event>,
) {
    let sockets = &c.data().preview1().sockets;
    fds.clear();
    out.clear();
    for s in subs {
        let (fd, ev) = match s.kind {
            Sub::Read(fd) => (fd, libc::POLLIN),
            Sub::Write(fd) => (fd, libc::POLLOUT),
            Sub::Clock(_) => (-1, 0),
        };
        let raw = match sockets.get(fd) {
            Some((Sock::Conn(s), _)) => s.fd(),
            Some((Sock::Listener(l), _)) => l.fd(),
            None => -1,
        };
        fds.push(libc::pollfd {
            fd: raw,
            events: ev | libc::POLLRDHUP,
            revents: 0,
        });
    }
    poll_now(fds);
    for (s, p) in subs.iter().zip(fds.iter()) {
        let (ty, fd) = match s.kind {
            Sub::Read(fd) => (EVENTTYPE_FD_READ, fd),
            Sub::Write(fd) => (EVENTTYPE_FD_WRITE, fd),
            Sub::Clock(0) => {
                out.push((s.userdata, EVENTTYPE_CLOCK, 0));
                continue;
            }
            Sub::Clock(_) => continue,
        };
        if !sockets.has(fd) {
            out.push((s.userdata, ty, 0)); // a file: always ready
        } else if p.revents != 0 {
            let hup = p.revents & (libc::POLLHUP | libc::POLLRDHUP | libc::POLLERR) != 0;
            out.push((s.userdata, ty, u16::from(hup) * FD_READWRITE_HANGUP));
        }
    }
}

/// A socket subscription's wait: its socket and whether for writing.
fn waitable(sockets: &Sockets, s: &Subscription) -> Option<(Sock, bool)> {
    let (fd, write) = match s.kind {
        Sub::Read(fd) => (fd, false),
        Sub::Write(fd) => (fd, true),
        Sub::Clock(_) => return None,
    };
    let sock = match sockets.get(fd)?.0 {
        Sock::Conn(s) => Sock::Conn(s.clone()),
        Sock::Listener(l) => Sock::Listener(l.clone()),
    };
    Some((sock, write))
}

/// Resolves when the socket may have become ready as asked.
async fn wait_one(sock: &Sock, write: bool) {
    let _ = match sock {
        Sock::Conn(s) if write => s.writable().await,
        Sock::Conn(s) => s.readable().await,
        Sock::Listener(l) => l.ready().await,
    };
}

/// Resolves when any socket subscription may have become ready (never,
/// if none names a socket: the deadline ends the wait).
async fn wait_any(c: &mut Caller<'_, TaskData>, subs: &[Subscription]) {
    let sockets = &c.data().preview1().sockets;
    let mut socks = subs.iter().filter_map(|s| waitable(sockets, s));
    let Some(first) = socks.next() else {
        return std::future::pending().await;
    };
    let Some(second) = socks.next() else {
        // One socket, the usual case: waited on with no allocation.
        return wait_one(&first.0, first.1).await;
    };
    let waits = [first, second]
        .into_iter()
        .chain(socks)
        .map(|(sock, write)| async move { wait_one(&sock, write).await });
    crate::host::wait::any_of(waits).await
}

fn write_events(c: &mut Caller<'_, TaskData>, events: i32, nevents: i32, out: &[Event]) -> i32 {
    let Ok((mem, _)) = memory(c) else {
        return errno::FAULT;
    };
    for (i, (userdata, ty, flags)) in out.iter().enumerate() {
        let mut e = [0u8; EVENT_BYTES as usize];
        e[USERDATA..USERDATA + 8].copy_from_slice(&userdata.to_le_bytes());
        e[EVENT_TYPE] = *ty;
        e[EVENT_FLAGS..EVENT_FLAGS + 2].copy_from_slice(&flags.to_le_bytes());
        let at = events.wrapping_add((i as u64 * EVENT_BYTES) as i32);
        if mem.put(at, &e).is_err() {
            return errno::FAULT;
        }
    }
    match write_u32(mem, nevents, out.len() as u32) {
        Ok(()) => 0,
        Err(_) => errno::FAULT,
    }
}

/// Whether any subscription names a socket of this task.
pub(super) fn names_a_socket(c: &mut Caller<'_, TaskData>, subs: i32, n: i32) -> bool {
    let sockets = &c.data().preview1().sockets;
    if sockets.is_empty() {
        return false;
    }
    let Ok((mem, data)) = memory(c) else {
        return false;
    };
    let n = (n as u32).min(super::MAX_POLL_SUBSCRIPTIONS);
    (0..n).any(|i| {
        let at = subs.wrapping_add((u64::from(i) * SUBSCRIPTION_BYTES) as i32);
        let mut tag = [0u8; 1];
        let Ok(r) = range(mem.len(), at.wrapping_add(TAG as i32), 1) else {
            return false;
        };
        mem.read(r, &mut tag);
        tag[0] != EVENTTYPE_CLOCK
            && read_u32(mem, at.wrapping_add(FD as i32))
                .is_ok_and(|fd| data.preview1().sockets.has(fd as i32))
    })
}
