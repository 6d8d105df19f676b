//! Block devices for tasks (JX's device drivers as kernel objects): a host
//! file or raw device, cut into 512-byte sectors, that the runtime opens
//! at start and grants to the tasks a manifest names.
//!
//! A device is held by one task at a time: the first granted task to open
//! it claims it, and the claim goes with its last handle (so a file-system
//! task that dies leaves its device to the one restarted after it). A
//! claim cannot be copied or sent in a message: only the task holding it
//! reaches the device.
//!
//! Reads and writes are whole sectors, at most [`MAX_TRANSFER`] bytes a
//! call, moved between the host file and the caller's memory by the host
//! kernel's copy (`pread`/`pwrite` straight into and out of guest memory,
//! no buffer of Warden's in between). Writes reach the host file's page
//! cache; [`Device::sync`] (`fdatasync`) is the explicit flush. Every
//! operation is counted, per device here and per task by the caller.

use crate::task::DeviceCounters;
use std::fs::File;
use std::io;
use std::os::unix::io::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// Bytes per sector.
pub const SECTOR: u64 = 512;

/// Most bytes one read or write moves.
pub const MAX_TRANSFER: u64 = 1 << 20;

/// A `[[device]]` of the manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeviceSpec {
    /// Its name, which tasks' `devices` grant.
    pub name: String,
    /// The host file (or raw device) behind it.
    pub file: PathBuf,
    /// Its size in bytes: a file that does not exist is created this
    /// large; one that does must be exactly this large. `None`: the
    /// file's own size.
    pub size: Option<u64>,
}

impl DeviceSpec {
    /// A device named `name` on `file`, its size the file's.
    pub fn new(name: impl Into<String>, file: impl Into<PathBuf>) -> Self {
        DeviceSpec {
            name: name.into(),
            file: file.into(),
            size: None,
        }
    }
}

/// An open device.
pub struct Device {
    name: String,
    file: File,
    sectors: u64,
    claimed: AtomicBool,
    /// What was done to it, by every task that held it.
    pub stats: DeviceCounters,
}

impl Device {
    /// Opens `spec`'s file read-write, creating it at its size if it is
    /// missing; refused (naming the file) if it cannot be opened, is not
    /// a whole number of sectors, or is not the size given.
    pub fn open(spec: &DeviceSpec) -> Result<Device, String> {
        let shown = spec.file.display();
        if spec.name.is_empty()
            || spec
                .name
                .chars()
                .any(|c| c.is_control() || c.is_whitespace() || c == '"')
        {
            return Err(format!(
                "device {:?}: a name is non-empty, without spaces, quotes or control characters",
                spec.name
            ));
        }
        if spec.size.is_some_and(|s| s == 0 || s % SECTOR != 0) {
            return Err(format!(
                "device {:?}: size must be a positive multiple of {SECTOR} bytes",
                spec.name
            ));
        }
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(spec.size.is_some())
            .truncate(false)
            .open(&spec.file)
            .map_err(|e| format!("device {:?}: {shown}: {e}", spec.name))?;
        let len = length(&file).map_err(|e| format!("device {:?}: {shown}: {e}", spec.name))?;
        let len = match (len, spec.size) {
            (0, Some(size)) => {
                file.set_len(size)
                    .map_err(|e| format!("device {:?}: {shown}: {e}", spec.name))?;
                size
            }
            (len, Some(size)) if len != size => {
                return Err(format!(
                    "device {:?}: {shown} is {len} bytes, not the {size} its size says",
                    spec.name
                ))
            }
            (len, _) => len,
        };
        if len == 0 || len % SECTOR != 0 {
            return Err(format!(
                "device {:?}: {shown} is {len} bytes, not a whole number of {SECTOR}-byte sectors",
                spec.name
            ));
        }
        Ok(Device {
            name: spec.name.clone(),
            file,
            sectors: len / SECTOR,
            claimed: AtomicBool::new(false),
            stats: DeviceCounters::default(),
        })
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its size in sectors.
    pub fn sectors(&self) -> u64 {
        self.sectors
    }

    /// Whether a task holds it now.
    pub fn claimed(&self) -> bool {
        self.claimed.load(Ordering::Acquire)
    }

    /// The claim on it, if no one holds it.
    pub fn claim(self: &Arc<Self>) -> Option<Claim> {
        self.claimed
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .ok()
            .map(|_| Claim(self.clone()))
    }

    /// The byte offset and length of `count` sectors at `sector`, if they
    /// are within the device and one transfer.
    pub fn extent(&self, sector: u64, count: u64) -> Option<(u64, u64)> {
        let end = sector.checked_add(count)?;
        let len = count.checked_mul(SECTOR)?;
        (count > 0 && end <= self.sectors && len <= MAX_TRANSFER).then_some((sector * SECTOR, len))
    }

    /// Moves `len` bytes between the device at byte `offset` and `buf`:
    /// into `buf` (a read), or from it (`write`).
    ///
    /// # Safety
    ///
    /// `buf` must be valid for `len` bytes of writing (a read) or reading
    /// (a write) for the whole call.
    pub unsafe fn transfer(
        &self,
        write: bool,
        offset: u64,
        buf: *mut u8,
        len: u64,
    ) -> io::Result<()> {
        let fd = self.file.as_raw_fd();
        let mut done = 0u64;
        while done < len {
            let (at, rest) = (buf.add(done as usize), (len - done) as usize);
            let off = (offset + done) as libc::off_t;
            // SAFETY: the caller vouches for `buf`'s `len` bytes.
            let n = match write {
                true => libc::pwrite(fd, at.cast(), rest, off),
                false => libc::pread(fd, at.cast(), rest, off),
            };
            match n {
                n if n > 0 => done += n as u64,
                0 => {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the file ended",
                    ))
                }
                _ => {
                    let e = io::Error::last_os_error();
                    if e.kind() != io::ErrorKind::Interrupted {
                        return Err(e);
                    }
                }
            }
        }
        Ok(())
    }

    /// Flushes what was written to the host file's storage.
    pub fn sync(&self) -> io::Result<()> {
        self.stats.syncs.fetch_add(1, Ordering::Relaxed);
        self.file.sync_data()
    }
}

/// The length of `file`: its size, or for a raw device, where its end is.
fn length(file: &File) -> io::Result<u64> {
    let meta = file.metadata()?;
    if meta.is_file() {
        return Ok(meta.len());
    }
    use std::io::Seek;
    (&*file).seek(io::SeekFrom::End(0))
}

/// A task's hold on a device; released when dropped.
pub struct Claim(Arc<Device>);

impl std::ops::Deref for Claim {
    type Target = Device;
    fn deref(&self) -> &Device {
        &self.0
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.0.claimed.store(false, Ordering::Release);
    }
}

/// The runtime's devices, by name.
pub type Devices = std::collections::HashMap<String, Arc<Device>>;

#[cfg(test)]
mod tests {
    use super::*;

    fn device(dir: &std::path::Path, size: Option<u64>) -> Result<Device, String> {
        let mut spec = DeviceSpec::new("d", dir.join("disk.img"));
        spec.size = size;
        Device::open(&spec)
    }

    #[test]
    fn created_at_its_size_then_held_to_it() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(device(dir.path(), Some(8192)).unwrap().sectors(), 16);
        assert!(device(dir.path(), None).is_ok());
        let e = device(dir.path(), Some(4096)).err().unwrap();
        assert!(e.contains("is 8192 bytes, not the 4096"), "{e}");
        assert!(device(dir.path(), Some(1000)).is_err());
        std::fs::write(dir.path().join("disk.img"), [0u8; 700]).unwrap();
        let e = device(dir.path(), None).err().unwrap();
        assert!(e.contains("not a whole number"), "{e}");
        let e = Device::open(&DeviceSpec::new("x", dir.path().join("absent")))
            .err()
            .unwrap();
        assert!(e.contains("absent"), "{e}");
    }

    #[test]
    fn extents_stay_inside_and_under_one_transfer() {
        let dir = tempfile::tempdir().unwrap();
        let d = device(dir.path(), Some(4 << 20)).unwrap();
        assert_eq!(d.extent(2, 3), Some((1024, 1536)));
        assert_eq!(d.extent(0, 0), None);
        assert_eq!(d.extent(d.sectors() - 1, 2), None);
        assert_eq!(d.extent(u64::MAX, 2), None);
        assert_eq!(d.extent(0, MAX_TRANSFER / SECTOR + 1), None);
    }

    #[test]
    fn one_claim_at_a_time_and_data_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let d = Arc::new(device(dir.path(), Some(4096)).unwrap());
        let claim = d.claim().unwrap();
        assert!(d.claim().is_none());
        let mut data = [7u8; 1024];
        // SAFETY: `data` is a live local buffer of the length given.
        unsafe { claim.transfer(true, 512, data.as_mut_ptr(), 1024) }.unwrap();
        let mut back = [0u8; 1024];
        unsafe { claim.transfer(false, 512, back.as_mut_ptr(), 1024) }.unwrap();
        assert_eq!(back, data);
        drop(claim);
        assert!(d.claim().is_some());
        let file = std::fs::read(dir.path().join("disk.img")).unwrap();
        assert_eq!(&file[512..1536], &[7u8; 1024][..]);
    }
}
