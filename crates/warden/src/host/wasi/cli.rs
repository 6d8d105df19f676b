//! WASI's `args_get`, `args_sizes_get`, `environ_get` and
//! `environ_sizes_get`, answered from the task's own [`Strings`]. They
//! shadow Wasmtime's definitions, which keep each argument and variable
//! as its own string, copy the whole list on every call, and so cost a
//! per-request handler some sixty allocations for its CGI environment
//! alone. Here a list is one buffer, built once (an HTTP route's
//! arguments are shared by all its requests) and copied into the guest
//! as it is.
//!
//! As WASI preview 1 says and Wasmtime does, a pointer outside the
//! caller's memory or a misaligned one traps.

use crate::host::guest::GuestMem;
use crate::host::TaskData;
use std::sync::Arc;
use wasmtime::{Caller, Extern, Linker};

/// A list of strings as WASI hands them to a program: one buffer, each
/// string ended by a NUL byte.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Strings {
    bytes: Vec<u8>,
    count: u32,
}

impl Strings {
    /// An empty list with room for `bytes` bytes.
    pub fn with_capacity(bytes: usize) -> Strings {
        Strings {
            bytes: Vec::with_capacity(bytes),
            count: 0,
        }
    }

    /// A program's arguments: `argv0`, then `args`.
    pub fn args(argv0: &str, args: &[String]) -> Strings {
        let len = argv0.len() + 1 + args.iter().map(|a| a.len() + 1).sum::<usize>();
        let mut s = Strings::with_capacity(len);
        s.push(|b| b.extend_from_slice(argv0.as_bytes()));
        for a in args {
            s.push(|b| b.extend_from_slice(a.as_bytes()));
        }
        s
    }

    /// An environment: each variable as `name=value`.
    pub fn env(vars: &[(String, String)]) -> Strings {
        let len = vars.iter().map(|(k, v)| k.len() + v.len() + 2).sum();
        let mut s = Strings::with_capacity(len);
        for (k, v) in vars {
            s.push_var(k, v);
        }
        s
    }

    /// Appends one string, written by `write` (which must not write NUL:
    /// the program would see the string end there).
    pub fn push(&mut self, write: impl FnOnce(&mut Vec<u8>)) {
        write(&mut self.bytes);
        self.bytes.push(0);
        self.count += 1;
    }

    /// Appends `name=value`.
    pub fn push_var(&mut self, name: &str, value: &str) {
        self.push(|b| {
            b.extend_from_slice(name.as_bytes());
            b.push(b'=');
            b.extend_from_slice(value.as_bytes());
        });
    }

    /// How many strings.
    pub(crate) fn len(&self) -> usize {
        self.count as usize
    }

    #[cfg(test)]
    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The strings, without their NULs.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &[u8]> {
        let end = self.bytes.len().saturating_sub(1);
        self.bytes[..end].split(|&b| b == 0).take(self.len())
    }

    #[cfg(test)]
    /// The `name=value` string whose name is `name`, its value.
    pub fn var(&self, name: &str) -> Option<&[u8]> {
        self.iter()
            .find_map(|s| s.strip_prefix(name.as_bytes())?.strip_prefix(b"="))
    }

    #[cfg(test)]
    /// The whole buffer.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Writes the list for `*_get`: the strings at `buf`, a pointer to
    /// each at `ptrs` (little-endian words).
    fn write_to(&self, mem: GuestMem, ptrs: i32, buf: i32) -> wasmtime::Result<()> {
        if ptrs % 4 != 0 {
            return Err(misaligned());
        }
        let words = crate::host::guest::range(mem.len(), ptrs, 4 * u64::from(self.count))
            .map_err(|_| out_of_bounds())?;
        let text = crate::host::guest::range(mem.len(), buf, self.bytes.len() as u64)
            .map_err(|_| out_of_bounds())?;
        mem.write(text.start, &self.bytes);
        // Each string's address: below 4 GiB, as it is in the memory.
        let mut at = text.start;
        for (s, word) in self
            .bytes
            .split_inclusive(|&b| b == 0)
            .zip(words.step_by(4))
        {
            mem.write(word, &(at as u32).to_le_bytes());
            at += s.len();
        }
        Ok(())
    }

    /// Writes `*_sizes_get`'s two results: the count and the bytes.
    fn write_sizes(&self, mem: GuestMem, count: i32, bytes: i32) -> wasmtime::Result<()> {
        if count % 4 != 0 || bytes % 4 != 0 {
            return Err(misaligned());
        }
        let put = |ptr: i32, v: u32| mem.put(ptr, &v.to_le_bytes()).map_err(|_| out_of_bounds());
        put(count, self.count)?;
        put(bytes, self.bytes.len() as u32)
    }
}

/// A task's arguments and environment.
#[derive(Debug, Clone, Default)]
pub(crate) struct Cli {
    pub(crate) args: Arc<Strings>,
    pub(crate) env: Arc<Strings>,
}

/// The trap of a WASI call handed a misaligned pointer.
pub(super) fn misaligned() -> wasmtime::Error {
    wasmtime::format_err!("misaligned pointer passed to a WASI call")
}

/// The trap of a WASI call handed a pointer outside the caller's memory.
pub(super) fn out_of_bounds() -> wasmtime::Error {
    wasmtime::format_err!("pointer out of bounds in a WASI call")
}

/// The caller's exported memory (WASI's calls need one): the one the
/// task recorded when it started, or before that its export.
pub(super) fn guest_memory<'a>(
    caller: &'a mut Caller<'_, TaskData>,
) -> wasmtime::Result<GuestMem<'a>> {
    if let Some(mem) = GuestMem::of(&mut *caller) {
        return Ok(mem);
    }
    let Some(Extern::Memory(memory)) = caller.get_export("memory") else {
        wasmtime::bail!("missing required memory export");
    };
    Ok(GuestMem::looked_up(memory, &*caller))
}

/// Shadows the four calls in `linker` (which must already hold
/// Wasmtime's WASI definitions).
pub(super) fn add_to_linker(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    const WASI: &str = "wasi_snapshot_preview1";
    type List = fn(&Cli) -> &Arc<Strings>;
    let lists: [(&str, &str, List); 2] = [
        ("args_get", "args_sizes_get", |c| &c.args),
        ("environ_get", "environ_sizes_get", |c| &c.env),
    ];
    super::shadowing(linker, |linker| {
        lists.into_iter().try_for_each(|(get, sizes, list)| {
            linker.func_wrap(
                WASI,
                get,
                move |mut c: Caller<'_, TaskData>, ptrs: i32, buf: i32| {
                    // The list's Arc, so the guest's memory can be borrowed.
                    let strings = Arc::clone(list(&c.data().preview1().cli));
                    strings.write_to(guest_memory(&mut c)?, ptrs, buf)?;
                    Ok(0i32)
                },
            )?;
            linker.func_wrap(
                WASI,
                sizes,
                move |mut c: Caller<'_, TaskData>, count: i32, bytes: i32| {
                    let strings = Arc::clone(list(&c.data().preview1().cli));
                    strings.write_sizes(guest_memory(&mut c)?, count, bytes)?;
                    Ok(0i32)
                },
            )?;
            Ok::<_, wasmtime::Error>(())
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_is_its_strings_each_ended_by_nul() {
        let args = Strings::args("prog.wasm", &["a".into(), "".into(), "bc".into()]);
        assert_eq!(args.as_bytes(), b"prog.wasm\0a\0\0bc\0");
        assert_eq!(args.len(), 4);
        let all: Vec<&[u8]> = args.iter().collect();
        assert_eq!(all, [&b"prog.wasm"[..], b"a", b"", b"bc"]);
        let env = Strings::env(&[("A".into(), "1".into()), ("AB".into(), "x=y".into())]);
        assert_eq!(env.as_bytes(), b"A=1\0AB=x=y\0");
        assert_eq!(env.var("AB"), Some(&b"x=y"[..]));
        assert_eq!(env.var("A"), Some(&b"1"[..]));
        assert_eq!(env.var("B"), None);
        assert!(Strings::default().is_empty());
    }

    #[test]
    fn a_list_is_written_as_wasi_lays_it_out() {
        let args = Strings::args("p", &["ab".into(), "".into()]);
        let mut bytes = [0xffu8; 64];
        let mem = GuestMem::of_test_buffer(&mut bytes);
        args.write_sizes(mem, 0, 4).unwrap();
        args.write_to(mem, 8, 40).unwrap();
        let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
        assert_eq!((word(0), word(4)), (3, 6), "three strings, six bytes");
        assert_eq!(
            (word(8), word(12), word(16)),
            (40, 42, 45),
            "each one's address"
        );
        assert_eq!(&bytes[40..46], b"p\0ab\0\0");
        assert_eq!(bytes[46], 0xff, "nothing written past the strings");
    }

    #[test]
    fn wild_and_misaligned_pointers_are_refused() {
        let env = Strings::env(&[("A".into(), "1".into())]);
        let mut bytes = [0u8; 64];
        let mem = GuestMem::of_test_buffer(&mut bytes);
        assert!(env.write_to(mem, 64, 0).is_err(), "array past the end");
        assert!(env.write_to(mem, 0, 61).is_err(), "buffer past the end");
        assert!(env.write_to(mem, 0, -4).is_err(), "a wrapped pointer");
        assert!(env.write_to(mem, 2, 8).is_err(), "misaligned array");
        assert!(env.write_sizes(mem, 62, 0).is_err());
        assert!(env.write_sizes(mem, 0, 1).is_err());
        assert!(
            env.write_to(mem, 56, 60).is_ok(),
            "the last bytes are in bounds"
        );
        assert_eq!(&bytes[60..64], b"A=1\0");
        assert_eq!(Strings::default().iter().count(), 0);
    }
}
