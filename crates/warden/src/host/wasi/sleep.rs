//! `poll_oneoff`'s commonest call, one clock subscription with a relative
//! timeout (a guest's `sleep`, `nanosleep`, `usleep`), served with a timer
//! alone.
//!
//! Wasmtime's `poll_oneoff` makes a resource-table entry and a boxed
//! pollable for each subscription, and its future (about 1 KiB) is boxed
//! for as long as the call waits: in a sleeping task, the largest part of
//! its heap after its store. Here a sleep is a timer and a few words, and
//! the answer is Wasmtime's: the clock event (the subscription's userdata,
//! no error, type clock, zero bytes and flags) in `events[0]`, 1 in
//! `*nevents`, and a zero timeout yields the worker once.
//!
//! Every call of this shape is answered here, never by Wasmtime: a task
//! whose file calls may block its thread (see `runtime::disks`) would have
//! Wasmtime answer it by sleeping the worker. So a relative clock
//! subscription whose records are misaligned or out of bounds is `EFAULT`
//! at once, and one naming a clock other than real time or monotonic
//! `EINVAL` (Wasmtime's answers for those). Anything else (more
//! subscriptions, an absolute time, a descriptor) is left to Wasmtime.

use super::subscription::*;
use crate::host::guest::range;
use crate::host::guest::{memory, GuestMem};
use crate::host::TaskData;
use std::time::Duration;
use wasmtime::Caller;

/// `clockid::realtime`, `clockid::monotonic`.
const REALTIME: u32 = 0;
const MONOTONIC: u32 = 1;

/// A sleep a `poll_oneoff` asks for.
#[derive(Debug, PartialEq)]
pub(super) struct Sleep {
    userdata: u64,
    timeout: Duration,
}

/// What to do with a `poll_oneoff`.
#[derive(Debug, PartialEq)]
pub(super) enum Parsed {
    /// Sleep, then answer with the clock event.
    Sleep(Sleep),
    /// Answer with this errno at once.
    Refuse(i32),
    /// Not a single relative clock subscription: Wasmtime's to answer.
    Other,
}

/// What `poll_oneoff(subs, events, n, nevents)` asks for (see the
/// module's text).
pub(super) fn parse(
    c: &mut Caller<'_, TaskData>,
    subs: i32,
    events: i32,
    n: i32,
    nevents: i32,
) -> Parsed {
    match memory(c) {
        Ok((mem, _)) => parse_in(mem, subs, events, n, nevents),
        Err(_) => Parsed::Other,
    }
}

fn parse_in(mem: GuestMem<'_>, subs: i32, events: i32, n: i32, nevents: i32) -> Parsed {
    if n != 1 {
        return Parsed::Other;
    }
    let Ok(at) = range(mem.len(), subs, SUBSCRIPTION_BYTES) else {
        return Parsed::Other;
    };
    let mut s = [0u8; SUBSCRIPTION_BYTES as usize];
    mem.read(at, &mut s);
    let word = |at: usize| u32::from_le_bytes(s[at..at + 4].try_into().expect("4 bytes"));
    let long = |at: usize| u64::from_le_bytes(s[at..at + 8].try_into().expect("8 bytes"));
    let flags = u16::from_le_bytes([s[FLAGS], s[FLAGS + 1]]);
    if s[TAG] != EVENTTYPE_CLOCK || flags & ABSTIME != 0 {
        return Parsed::Other;
    }
    let aligned = subs % 8 == 0 && events % 8 == 0 && nevents % 4 == 0;
    let fits =
        range(mem.len(), events, EVENT_BYTES).is_ok() && range(mem.len(), nevents, 4).is_ok();
    if !aligned || !fits {
        return Parsed::Refuse(FAULT);
    }
    if !matches!(word(CLOCK_ID), REALTIME | MONOTONIC) {
        return Parsed::Refuse(INVAL);
    }
    Parsed::Sleep(Sleep {
        userdata: long(USERDATA),
        timeout: Duration::from_nanos(long(TIMEOUT)),
    })
}

/// Sleeps `s`, then writes its event and count: WASI's errno (0, or
/// `EFAULT` should the memory be gone, which it cannot be while the task
/// runs).
pub(super) async fn sleep(
    c: &mut Caller<'_, TaskData>,
    s: Sleep,
    events: i32,
    nevents: i32,
) -> i32 {
    if s.timeout.is_zero() {
        tokio::task::yield_now().await;
    } else {
        tokio::time::sleep(s.timeout).await;
    }
    match memory(c) {
        Ok((mem, _)) => write_event(mem, &s, events, nevents),
        Err(_) => FAULT,
    }
}

/// WASI's `EFAULT`, `EINVAL`.
const FAULT: i32 = 21;
const INVAL: i32 = 28;

fn write_event(mem: GuestMem<'_>, s: &Sleep, events: i32, nevents: i32) -> i32 {
    // userdata (u64 at 0), error (u16 at 8) 0, type (u8 at 10) clock,
    // nbytes (u64 at 16) 0, flags (u16 at 24) 0: Wasmtime writes the
    // fields, not the padding between them.
    let mut e = [0u8; EVENT_TYPE + 1];
    e[..8].copy_from_slice(&s.userdata.to_le_bytes());
    e[EVENT_TYPE] = EVENTTYPE_CLOCK;
    let r = mem
        .put(events, &e)
        .and_then(|()| mem.put(events.wrapping_add(EVENT_NBYTES as i32), &[0; 10]))
        .and_then(|()| mem.put(nevents, &1u32.to_le_bytes()));
    match r {
        Ok(()) => 0,
        Err(_) => FAULT,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A subscription record: clock `id`, `timeout` ns, `flags`.
    fn subscription(tag: u8, id: u32, timeout: u64, flags: u16) -> [u8; 48] {
        let mut s = [0u8; 48];
        s[..8].copy_from_slice(&0x1122_3344_5566_7788u64.to_le_bytes());
        s[TAG] = tag;
        s[CLOCK_ID..CLOCK_ID + 4].copy_from_slice(&id.to_le_bytes());
        s[TIMEOUT..TIMEOUT + 8].copy_from_slice(&timeout.to_le_bytes());
        s[FLAGS..FLAGS + 2].copy_from_slice(&flags.to_le_bytes());
        s
    }

    /// Memory of 256 bytes (8-aligned) with `sub` at 0; events at 64,
    /// nevents at 128.
    fn parsed(sub: [u8; 48], subs: i32, events: i32, n: i32, nevents: i32) -> Parsed {
        let mut words = [0u64; 32];
        // SAFETY: the array's 256 bytes, viewed as bytes.
        let bytes = unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), 256) };
        bytes[..48].copy_from_slice(&sub);
        bytes[148..196].copy_from_slice(&sub);
        parse_in(GuestMem::of_test_buffer(bytes), subs, events, n, nevents)
    }

    #[test]
    fn one_relative_clock_is_a_sleep() {
        for id in [REALTIME, MONOTONIC] {
            let s = parsed(subscription(0, id, 5_000, 0), 0, 64, 1, 128);
            let want = Sleep {
                userdata: 0x1122_3344_5566_7788,
                timeout: Duration::from_nanos(5_000),
            };
            assert_eq!(s, Parsed::Sleep(want));
        }
    }

    #[test]
    fn a_relative_clock_that_cannot_be_served_is_refused_without_sleeping() {
        let sleep = subscription(0, MONOTONIC, 5_000, 0);
        // another clock (the process's CPU time)
        let cpu = subscription(0, 2, 5_000, 0);
        assert_eq!(parsed(cpu, 0, 64, 1, 128), Parsed::Refuse(INVAL));
        // misaligned records, records past the end
        assert_eq!(parsed(sleep, 0, 60, 1, 128), Parsed::Refuse(FAULT));
        assert_eq!(parsed(sleep, 0, 64, 1, 130), Parsed::Refuse(FAULT));
        assert_eq!(parsed(sleep, 0, 240, 1, 128), Parsed::Refuse(FAULT));
        assert_eq!(parsed(sleep, 0, 64, 1, 256), Parsed::Refuse(FAULT));
        assert_eq!(parsed(sleep, 148, 64, 1, 128), Parsed::Refuse(FAULT));
    }

    #[test]
    fn everything_else_is_left_to_wasmtime() {
        let sleep = subscription(0, MONOTONIC, 5_000, 0);
        // an absolute time, a descriptor
        let abs = subscription(0, MONOTONIC, 5_000, ABSTIME);
        assert_eq!(parsed(abs, 0, 64, 1, 128), Parsed::Other);
        let fd = subscription(1, MONOTONIC, 5_000, 0);
        assert_eq!(parsed(fd, 0, 64, 1, 128), Parsed::Other);
        // no subscription, two, a subscription past the end
        assert_eq!(parsed(sleep, 0, 64, 0, 128), Parsed::Other);
        assert_eq!(parsed(sleep, 0, 64, 2, 128), Parsed::Other);
        assert_eq!(parsed(sleep, 216, 64, 1, 128), Parsed::Other);
        assert_eq!(parsed(sleep, -8, 64, 1, 128), Parsed::Other);
    }

    #[test]
    fn the_event_is_wasmtimes_for_a_clock() {
        let mut words = [u64::MAX; 8];
        // SAFETY: the array's 64 bytes, viewed as bytes.
        let bytes = unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), 64) };
        let s = Sleep {
            userdata: 7,
            timeout: Duration::ZERO,
        };
        assert_eq!(write_event(GuestMem::of_test_buffer(bytes), &s, 0, 32), 0);
        assert_eq!(&bytes[..8], &7u64.to_le_bytes());
        assert_eq!(&bytes[8..11], &[0, 0, EVENTTYPE_CLOCK]);
        assert_eq!(&bytes[11..16], &[0xff; 5], "padding untouched");
        assert_eq!(&bytes[16..26], &[0; 10]);
        assert_eq!(&bytes[32..36], &1u32.to_le_bytes());
    }
}
