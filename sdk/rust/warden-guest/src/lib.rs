//! Rust bindings for Warden guests: the `warden` host functions as safe
//! types. Builds with Rust 1.63 for `wasm32-wasi`, with no dependencies:
//!
//! ```text
//! rustc --edition 2021 --crate-type rlib --target wasm32-wasi -O src/lib.rs
//! rustc --edition 2021 --target wasm32-wasi -O --extern warden_guest=libwarden_guest.rlib client.rs
//! ```
//!
//! ```no_run
//! let echo = warden_guest::Portal::lookup("echo", -1)?;
//! let reply = echo.call(b"hello")?;
//! assert_eq!(reply, b"hello");
//! # Ok::<(), warden_guest::Error>(())
//! ```
//!
//! Every function returns [`Error`] for a negative code from the kernel;
//! none of them panics on the kernel's account.

#![warn(missing_docs)]

mod raw;

use std::fmt;

/// Bytes taken at most by a receive or a reply, unless set otherwise (a
/// task's default `max_message_bytes`).
pub const DEFAULT_CAPACITY: usize = 64 * 1024;

/// A kernel error code (negative, as `WARDEN_E*` in `warden.h`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Error(pub i32);

impl Error {
    /// A handle that is not this task's, or of the wrong kind.
    pub const BAD_HANDLE: Error = Error(-1);
    /// The object was revoked.
    pub const REVOKED: Error = Error(-2);
    /// The other task died or closed the service.
    pub const PEER_DIED: Error = Error(-3);
    /// No portal to the service is left.
    pub const NO_CLIENTS: Error = Error(-4);
    /// Not permitted by the manifest.
    pub const DENIED: Error = Error(-5);
    /// Over a quota.
    pub const QUOTA: Error = Error(-6);
    /// Over the task's memory budget.
    pub const NO_MEMORY: Error = Error(-7);
    /// The wait timed out.
    pub const TIMEOUT: Error = Error(-9);
    /// An invalid argument.
    pub const INVALID: Error = Error(-10);
    /// Out of range (sectors past a device's end).
    pub const RANGE: Error = Error(-13);
    /// Held by another handle (a device).
    pub const BUSY: Error = Error(-16);
    /// The host's storage failed (a device).
    pub const IO: Error = Error(-17);
    /// Already there (a name; a mapping over another).
    pub const EXISTS: Error = Error(-11);
    /// Not supported here (a mapping a passive task cannot make).
    pub const NOT_SUPPORTED: Error = Error(-18);

    /// What the code means (the text of `warden_strerror`).
    pub fn describe(self) -> &'static str {
        match self.0 {
            -1 => "bad handle",
            -2 => "revoked",
            -3 => "peer died",
            -4 => "no clients",
            -5 => "denied",
            -6 => "quota exceeded",
            -7 => "out of memory",
            -8 => "bad pointer",
            -9 => "timed out",
            -10 => "invalid argument",
            -11 => "already exists",
            -12 => "would deadlock",
            -13 => "out of range",
            -14 => "no reply",
            -15 => "would wait",
            -16 => "busy",
            -17 => "I/O error",
            -18 => "not supported",
            _ => "unknown error",
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.describe(), self.0)
    }
}

impl std::error::Error for Error {}

/// The result of a host function.
pub type Result<T> = std::result::Result<T, Error>;

/// `call_fast`'s answer when the call must wait (an active service).
const WOULD_WAIT: i64 = -15;

fn check(r: i64) -> Result<i64> {
    if r < 0 {
        Err(Error(r as i32))
    } else {
        Ok(r)
    }
}

/// A handle, closed when dropped.
#[derive(Debug)]
struct Handle(i32);

impl Drop for Handle {
    fn drop(&mut self) {
        unsafe { raw::close(self.0) };
    }
}

/// A capability to call a service.
#[derive(Debug)]
pub struct Portal(Handle);

impl Portal {
    /// The portal registered under `name`, waiting up to `timeout_ns` for
    /// it (negative: for ever; 0: not at all).
    pub fn lookup(name: &str, timeout_ns: i64) -> Result<Portal> {
        let h = unsafe { raw::name_lookup(name.as_ptr(), name.len() as u32, timeout_ns) };
        Ok(Portal(Handle(check(h as i64)? as i32)))
    }

    /// Calls the service and waits for its reply (at most
    /// [`DEFAULT_CAPACITY`] bytes; see [`Portal::call_into`]).
    pub fn call(&self, request: &[u8]) -> Result<Vec<u8>> {
        let mut reply = vec![0; DEFAULT_CAPACITY];
        let n = self.call_into(request, &mut reply)?;
        reply.truncate(n);
        Ok(reply)
    }

    /// Calls the service with the reply written into `reply`: its length.
    /// A reply longer than `reply` is [`Error::QUOTA`].
    pub fn call_into(&self, request: &[u8], reply: &mut [u8]) -> Result<usize> {
        let mut nh = 0u32;
        let (req, cap) = (request.as_ptr(), reply.len() as u32);
        let mut n = unsafe {
            raw::call_fast(self.0 .0, req, request.len() as u32, std::ptr::null(), 0,
                reply.as_mut_ptr(), cap, std::ptr::null_mut(), &mut nh)
        };
        if n == WOULD_WAIT {
            n = unsafe {
                raw::call(self.0 .0, req, request.len() as u32, std::ptr::null(), 0,
                    reply.as_mut_ptr(), cap, std::ptr::null_mut(), &mut nh)
            };
        }
        let n = check(n)? as usize;
        if n > reply.len() {
            return Err(Error::QUOTA);
        }
        Ok(n)
    }

    /// Revokes this portal, to a service this task serves, and every copy
    /// of it: their calls fail with [`Error::REVOKED`], waiting ones too
    /// ([`Error::DENIED`] for another task's service).
    pub fn revoke(&self) -> Result<()> {
        check(unsafe { raw::portal_revoke(self.0 .0) } as i64).map(|_| ())
    }

    /// Calls the service for a memory object: the reply's length and the
    /// object the reply carried ([`Error::BAD_HANDLE`] if it carried none).
    pub fn call_for_memory(&self, request: &[u8], reply: &mut [u8]) -> Result<(usize, MemoryObject)> {
        let (mut h, mut nh) = (-1i32, 1u32);
        let (req, cap) = (request.as_ptr(), reply.len() as u32);
        let n = unsafe {
            raw::call(self.0 .0, req, request.len() as u32, std::ptr::null(), 0,
                reply.as_mut_ptr(), cap, &mut h, &mut nh)
        };
        let n = check(n)? as usize;
        if nh != 1 || h < 0 {
            return Err(Error::BAD_HANDLE);
        }
        Ok((n.min(reply.len()), MemoryObject(Handle(h))))
    }
}

/// A service this task serves.
#[derive(Debug)]
pub struct Service {
    handle: Handle,
    buffer: Vec<u8>,
}

/// A received call, answered with [`Request::reply`].
#[derive(Debug)]
pub struct Request {
    id: u64,
    /// The request's bytes.
    pub data: Vec<u8>,
}

impl Service {
    /// A new service.
    pub fn create() -> Result<Service> {
        let h = check(unsafe { raw::service_create() } as i64)? as i32;
        Ok(Service { handle: Handle(h), buffer: vec![0; DEFAULT_CAPACITY] })
    }

    /// Publishes a portal to the service under `name`.
    pub fn register(&self, name: &str) -> Result<()> {
        let portal = Handle(check(unsafe { raw::portal_create(self.handle.0) } as i64)? as i32);
        let r = unsafe { raw::name_register(name.as_ptr(), name.len() as u32, portal.0) };
        check(r as i64).map(|_| ())
    }

    /// Waits for the next call ([`Error::NO_CLIENTS`] once no portal is
    /// left). A request longer than the buffer arrives cut short.
    pub fn receive(&mut self) -> Result<Request> {
        let (mut id, mut nh) = (0u64, 0u32);
        let n = unsafe {
            raw::recv(self.handle.0, &mut id, self.buffer.as_mut_ptr(), self.buffer.len() as u32,
                std::ptr::null_mut(), &mut nh)
        };
        let n = (check(n)? as usize).min(self.buffer.len());
        Ok(Request { id, data: self.buffer[..n].to_vec() })
    }
}

impl Request {
    /// Answers the call.
    pub fn reply(self, response: &[u8]) -> Result<()> {
        let r = unsafe {
            raw::reply(self.id, response.as_ptr(), response.len() as u32, std::ptr::null(), 0)
        };
        check(r as i64).map(|_| ())
    }
}

/// A child task.
#[derive(Debug)]
pub struct Task(Handle);

/// How a child ended: its exit code, or trapped or killed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this code.
    Code(i32),
    /// It trapped.
    Trapped,
    /// It was killed.
    Killed,
}

/// A handle to the module the manifest granted under `name`.
fn granted_module(name: &str) -> Result<Handle> {
    let h = unsafe { raw::module_lookup(name.as_ptr(), name.len() as u32) };
    Ok(Handle(check(h as i64)? as i32))
}

/// `args` as NUL-terminated strings (their pointers form a child's argv).
fn nul_terminated(args: &[&str]) -> Vec<Vec<u8>> {
    args.iter().map(|a| a.bytes().chain(Some(0)).collect()).collect()
}

impl Exit {
    /// A run's status as `task_wait` gives it: an exit code, or -1
    /// trapped, -2 killed.
    fn of(status: i32) -> Exit {
        match status {
            -1 => Exit::Trapped,
            -2 => Exit::Killed,
            code => Exit::Code(code),
        }
    }
}

impl Task {
    /// Starts the granted module `module` with `args`, a memory limit and a
    /// CPU limit (0: none of its own).
    pub fn spawn(module: &str, args: &[&str], memory_limit: u64, cpu_limit_ns: u64) -> Result<Task> {
        let m = granted_module(module)?;
        let words = nul_terminated(args);
        let argv: Vec<*const u8> = words.iter().map(|w| w.as_ptr()).collect();
        let budget = raw::Budget { memory_limit, cpu_limit_ns, cpu_share: 1 };
        let h = unsafe {
            raw::task_spawn(m.0, argv.as_ptr(), argv.len() as u32, &budget, std::ptr::null(), 0)
        };
        Ok(Task(Handle(check(h as i64)? as i32)))
    }

    /// Waits up to `timeout_ns` (negative: for ever) for the child to end.
    pub fn wait(&self, timeout_ns: i64) -> Result<Exit> {
        let mut status = 0i32;
        check(unsafe { raw::task_wait(self.0 .0, timeout_ns, &mut status) } as i64)?;
        Ok(Exit::of(status))
    }

    /// Kills the child and its children.
    pub fn kill(&self) -> Result<()> {
        check(unsafe { raw::task_kill(self.0 .0) } as i64).map(|_| ())
    }
}

/// Which children a supervisor restarts when one ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// The one that ended.
    OneForOne = 0,
    /// Every child.
    OneForAll = 1,
    /// It and those spawned after it.
    RestForOne = 2,
}

/// When a supervised child is restarted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restart {
    /// Whenever it ends.
    Permanent = 0,
    /// When it fails (a non-zero exit, a trap, a kill).
    Transient = 1,
    /// Never.
    Temporary = 2,
}

/// What a supervisor's wait reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Supervised {
    /// `member` ended (`Exit`) and was restarted; its restarts so far.
    Restarted(u32, Exit, u32),
    /// `member` ended for good: its policy does not restart it.
    Ended(u32, Exit),
    /// Past the intensity: every child was killed.
    GaveUp(u32, Exit),
}

/// A supervisor of this task's children (see `warden.h`): restarts are
/// made, and paid for, in this task's [`Supervisor::wait`].
#[derive(Debug)]
pub struct Supervisor(Handle);

impl Supervisor {
    /// A supervisor allowing `max_restarts` restarts in any `within_ns`,
    /// each after `backoff_ns` doubling within the window.
    pub fn new(strategy: Strategy, max_restarts: u32, within_ns: u64, backoff_ns: u64) -> Result<Supervisor> {
        let spec = raw::SupervisorSpec { strategy: strategy as u32, max_restarts, within_ns, backoff_ns };
        Ok(Supervisor(Handle(check(unsafe { raw::supervisor_create(&spec) } as i64)? as i32)))
    }

    /// Spawns the granted module `module` with `args` as a child with
    /// `restart`; its member index.
    pub fn spawn(&self, restart: Restart, module: &str, args: &[&str], memory_limit: u64) -> Result<u32> {
        let m = granted_module(module)?;
        let words = nul_terminated(args);
        let argv: Vec<*const u8> = words.iter().map(|w| w.as_ptr()).collect();
        let budget = raw::Budget { memory_limit, cpu_limit_ns: 0, cpu_share: 1 };
        let n = unsafe {
            raw::supervisor_spawn(self.0 .0, restart as i32, m.0, argv.as_ptr(), argv.len() as u32,
                &budget, std::ptr::null(), 0)
        };
        Ok(check(n as i64)? as u32)
    }

    /// Waits up to `timeout_ns` (negative: for ever) for the next end
    /// among the children, and deals with it.
    pub fn wait(&self, timeout_ns: i64) -> Result<Supervised> {
        let mut e = raw::SupervisorEvent::default();
        check(unsafe { raw::supervisor_wait(self.0 .0, timeout_ns, &mut e) } as i64)?;
        let exit = Exit::of(e.status);
        let member = e.member as u32;
        Ok(match e.kind {
            1 => Supervised::Restarted(member, exit, e.restarts),
            2 => Supervised::Ended(member, exit),
            _ => Supervised::GaveUp(member, exit),
        })
    }

    /// The member's current run.
    pub fn child(&self, member: u32) -> Result<Task> {
        let h = unsafe { raw::supervisor_child(self.0 .0, member as i32) };
        Ok(Task(Handle(check(h as i64)? as i32)))
    }
}

/// Bytes outside every task's memory, shared by handle.
#[derive(Debug)]
pub struct MemoryObject(Handle);

impl MemoryObject {
    /// A zeroed object of `size` bytes, charged to this task's budget.
    pub fn create(size: u64) -> Result<MemoryObject> {
        Ok(MemoryObject(Handle(check(unsafe { raw::mem_create(size) } as i64)? as i32)))
    }

    /// Reads into `buf` from `offset`: the bytes read.
    pub fn read(&self, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let n = unsafe { raw::mem_read(self.0 .0, offset, buf.as_mut_ptr(), buf.len() as u32) };
        Ok(check(n)? as usize)
    }

    /// Writes `data` at `offset`.
    pub fn write(&self, offset: u64, data: &[u8]) -> Result<usize> {
        let n = unsafe { raw::mem_write(self.0 .0, offset, data.as_ptr(), data.len() as u32) };
        Ok(check(n)? as usize)
    }

    /// The object's size.
    pub fn size(&self) -> Result<u64> {
        Ok(check(unsafe { raw::mem_size(self.0 .0) })? as u64)
    }

    /// A handle to `len` bytes at `offset`, read-only if asked.
    pub fn view(&self, offset: u64, len: u64, readonly: bool) -> Result<MemoryObject> {
        let h = unsafe { raw::mem_view(self.0 .0, offset, len, readonly as i32) };
        Ok(MemoryObject(Handle(check(h as i64)? as i32)))
    }

    /// Revokes every handle and mapping of this object's bytes (this one
    /// too): every mapping is gone when it returns. The fresh handle to
    /// the same bytes.
    pub fn revoke(&self) -> Result<MemoryObject> {
        let h = unsafe { raw::mem_revoke(self.0 .0) };
        Ok(MemoryObject(Handle(check(h as i64)? as i32)))
    }

    /// Maps `len` bytes at `offset` (both multiples of [`PAGE`]) into
    /// fresh memory of this task's: loads and stores reach the object
    /// directly. Writable only through a writable handle. Unmapped when
    /// dropped (the memory it took stays the task's). See
    /// `warden_mem_map` in `sdk/c/warden.h`.
    pub fn map(&self, offset: u64, len: u64, writable: bool) -> Result<Mapping> {
        let size = usize::try_from(len).map_err(|_| Error::INVALID)?;
        let pages = (size + 65535) / 65536;
        let old = core::arch::wasm32::memory_grow(0, pages);
        if old == usize::MAX {
            return Err(Error::NO_MEMORY);
        }
        let at = (old * 65536) as *mut u8;
        let flags = if writable { 3 } else { 1 };
        check(unsafe { raw::mem_map(self.0 .0, offset, len, at, flags) } as i64)?;
        Ok(Mapping { at, len: size })
    }
}

/// The host's page size: what mappings are aligned to.
pub const PAGE: usize = 4096;

/// A memory object's bytes mapped into this task's memory.
#[derive(Debug)]
pub struct Mapping {
    at: *mut u8,
    len: usize,
}

impl Mapping {
    /// Where the bytes are.
    pub fn as_ptr(&self) -> *mut u8 {
        self.at
    }

    /// Their length.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the mapping is empty (never: a mapping is a page or more).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes. Others may change them meanwhile (the object's writers);
    /// an access after a revoke traps the task.
    pub fn bytes(&self) -> &[u8] {
        unsafe { std::slice::from_raw_parts(self.at, self.len) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        unsafe { raw::mem_unmap(self.at, self.len as u32) };
    }
}

/// Bytes in a block device's sector.
pub const SECTOR: usize = 512;

/// A block device the manifest grants this task (`[[device]]`, and
/// `devices = [...]` on the task): whole sectors read and written, one
/// holder at a time, released when dropped (see `sdk/c/warden.h`).
#[derive(Debug)]
pub struct Device(Handle);

impl Device {
    /// Opens the device `name`: [`Error::DENIED`] unless granted,
    /// [`Error::BUSY`] while another handle holds it.
    pub fn open(name: &str) -> Result<Device> {
        let h = unsafe { raw::device_open(name.as_ptr(), name.len() as u32) };
        Ok(Device(Handle(check(h as i64)? as i32)))
    }

    /// The device's size in sectors.
    pub fn sectors(&self) -> Result<u64> {
        let mut info = raw::DeviceInfo {
            sector_size: 0,
            sectors: 0,
        };
        check(unsafe { raw::device_info(self.0 .0, &mut info) } as i64)?;
        Ok(info.sectors)
    }

    /// Fills `buf` (a whole number of sectors, at most 1 MiB) from sector
    /// `sector` on: the bytes read.
    pub fn read(&self, sector: u64, buf: &mut [u8]) -> Result<usize> {
        let count = sectors_in(buf.len())?;
        let n = unsafe {
            raw::device_read(self.0 .0, sector, count, buf.as_mut_ptr(), buf.len() as u32)
        };
        Ok(check(n)? as usize)
    }

    /// Writes `data` (a whole number of sectors, at most 1 MiB) from
    /// sector `sector` on: the bytes written.
    pub fn write(&self, sector: u64, data: &[u8]) -> Result<usize> {
        let count = sectors_in(data.len())?;
        let n = unsafe {
            raw::device_write(self.0 .0, sector, count, data.as_ptr(), data.len() as u32)
        };
        Ok(check(n)? as usize)
    }

    /// Flushes what was written to the host's storage (fdatasync).
    pub fn sync(&self) -> Result<()> {
        check(unsafe { raw::device_sync(self.0 .0) } as i64).map(|_| ())
    }
}

/// How many sectors `len` bytes are: [`Error::INVALID`] unless whole.
fn sectors_in(len: usize) -> Result<u32> {
    if len % SECTOR != 0 || len / SECTOR > u32::MAX as usize {
        return Err(Error::INVALID);
    }
    Ok((len / SECTOR) as u32)
}
