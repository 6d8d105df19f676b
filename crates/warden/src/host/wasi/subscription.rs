//! WASI preview 1's `subscription` and `event` records as they lie in a
//! guest's memory (little-endian, 8-aligned): the sizes and the offsets
//! of the fields `poll_oneoff`'s shadows read and write (see `sleep` and
//! `net`).

/// A `subscription`: userdata (u64), then a tagged union.
pub(super) const SUBSCRIPTION_BYTES: u64 = 48;
pub(super) const USERDATA: usize = 0;
/// The union's tag (u8): an [`EVENTTYPE_CLOCK`], fd-read or fd-write.
pub(super) const TAG: usize = 8;
/// A clock subscription's clock id (u32), timeout in nanoseconds (u64)
/// and flags (u16).
pub(super) const CLOCK_ID: usize = 16;
pub(super) const TIMEOUT: usize = 24;
pub(super) const FLAGS: usize = 40;
/// An fd subscription's descriptor (u32), where a clock's id would be.
pub(super) const FD: usize = 16;

/// An `event`: userdata (u64), error (u16 at 8), type (u8 at 10),
/// bytes available (u64 at 16) and flags (u16 at 24).
pub(super) const EVENT_BYTES: u64 = 32;
pub(super) const EVENT_TYPE: usize = 10;
pub(super) const EVENT_NBYTES: usize = 16;
pub(super) const EVENT_FLAGS: usize = 24;

/// `eventtype`.
pub(super) const EVENTTYPE_CLOCK: u8 = 0;
pub(super) const EVENTTYPE_FD_READ: u8 = 1;
pub(super) const EVENTTYPE_FD_WRITE: u8 = 2;
/// `eventrwflags::fd_readwrite_hangup`.
pub(super) const FD_READWRITE_HANGUP: u16 = 1;
/// `subclockflags::subscription_clock_abstime`.
pub(super) const ABSTIME: u16 = 1;
