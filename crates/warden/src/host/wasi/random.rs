//! WASI's `random_get`, and the random sources of every task's WASI
//! context: the thread's generator, with no state of the task's own.
//!
//! Wasmtime's `random_get` builds the bytes in a host vector first (up to
//! 64 MiB a call, charged to no budget, one generator call per byte) and
//! checks the guest's pointer only after. Here the range is checked first
//! (a pointer outside the caller's memory traps, as WASI says and
//! Wasmtime does), and the bytes are made in [`PIECE`]-byte pieces on the
//! stack and copied in. A large fill lets the worker go every
//! [`YIELD_EVERY`] bytes, so it is preempted, and killed, as guest code
//! is.

use super::cli::{guest_memory, out_of_bounds};
use crate::host::TaskData;
use rand::Rng;
use wasmtime::{Caller, Linker};

/// Bytes generated and copied at a time: four ChaCha blocks.
const PIECE: usize = 256;
/// Bytes filled between two yields of the worker (under a millisecond
/// of generating: 512 MiB take about 0.4 s here).
const YIELD_EVERY: usize = 1 << 20;

/// WASI's random sources for every task: the thread's generator
/// (`rand::rng()`: ChaCha12 seeded from the operating system and reseeded
/// after every 64 KiB it makes), as strong as the per-task `StdRng`
/// Wasmtime makes by default, which holds about 350 bytes of heap, with
/// its insecure twin, for the task's whole life.
pub(crate) struct ThreadRandom;

impl rand::TryRng for ThreadRandom {
    type Error = std::convert::Infallible;

    fn try_next_u32(&mut self) -> Result<u32, Self::Error> {
        rand::rng().try_next_u32()
    }

    fn try_next_u64(&mut self) -> Result<u64, Self::Error> {
        rand::rng().try_next_u64()
    }

    fn try_fill_bytes(&mut self, dst: &mut [u8]) -> Result<(), Self::Error> {
        rand::rng().try_fill_bytes(dst)
    }
}

/// Shadows `random_get` in `linker` (which must already hold Wasmtime's
/// WASI definitions).
pub(super) fn add_to_linker(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    super::shadowing(linker, |linker| {
        linker.func_wrap_async(
            "wasi_snapshot_preview1",
            "random_get",
            |mut c: Caller<'_, TaskData>, (buf, len): (i32, i32)| {
                Box::new(async move {
                    let size = guest_memory(&mut c)?.len();
                    let all = crate::host::guest::range(size, buf, u64::from(len as u32))
                        .map_err(|_| out_of_bounds())?;
                    let mut at = all.start;
                    while at < all.end {
                        let end = all.end.min(at + YIELD_EVERY);
                        fill(guest_memory(&mut c)?, at, end);
                        at = end;
                        if at < all.end {
                            tokio::task::yield_now().await;
                        }
                    }
                    Ok(0i32)
                })
            },
        )?;
        Ok(())
    })
}

/// Fills `mem[at..end]` (in bounds) with random bytes.
fn fill(mem: crate::host::guest::GuestMem<'_>, mut at: usize, end: usize) {
    let mut rng = rand::rng();
    let mut piece = [0u8; PIECE];
    while at < end {
        let n = (end - at).min(PIECE);
        rng.fill_bytes(&mut piece[..n]);
        mem.write(at, &piece[..n]);
        at += n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fill_covers_its_range_and_nothing_else() {
        let mut bytes = [0u8; 2 * PIECE + 10];
        let mem = crate::host::guest::GuestMem::of_test_buffer(&mut bytes);
        fill(mem, 3, 2 * PIECE + 7);
        assert_eq!(&bytes[..3], &[0, 0, 0]);
        assert_eq!(&bytes[2 * PIECE + 7..], &[0, 0, 0]);
        let zeros = bytes[3..2 * PIECE + 7].iter().filter(|&&b| b == 0).count();
        assert!(zeros < 16, "{zeros} zero bytes of {}", 2 * PIECE + 4);
    }

    #[test]
    fn two_draws_differ() {
        let (mut a, mut b) = ([0u8; 32], [0u8; 32]);
        ThreadRandom.fill_bytes(&mut a);
        ThreadRandom.fill_bytes(&mut b);
        assert_ne!(a, b);
    }
}
