//! The compiled-code cache: native code for each module and component, kept on disk
//! between runs so a module is compiled once, not once per run.
//!
//! Location, in order: `$WARDEN_CACHE_DIR`, `$XDG_CACHE_HOME/warden`,
//! `$HOME/.cache/warden`. Each entry is named by the SHA-256 of the module
//! bytes and of the engine's compatibility hash (Wasmtime version, target
//! and compiler settings), so a changed module or engine never meets stale
//! code. Entries are written to a temporary file and renamed into place,
//! so concurrent runs never see half an entry.
//!
//! Loading an entry maps native code into the process, so the directory
//! must be writable only by whoever runs Warden: a directory owned by
//! another user, or writable by the group or others, is refused. An entry
//! that fails to load is recompiled and replaced.
//!
//! Precompiled files (`warden compile -o prog.cwasm`) are native code too.
//! The cache remembers the SHA-256 of each one it wrote
//! (`precompiled/<digest>`), so that `warden run` accepts those and refuses
//! a precompiled file from anywhere else unless told to trust it.

use sha2::{Digest, Sha256};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use wasmtime::component::Component;
use wasmtime::{Engine, Module};

/// A directory of compiled modules.
#[derive(Debug, Clone)]
pub struct CodeCache {
    dir: PathBuf,
}

/// Whether [`CodeCache::load_or_compile`] found the module in the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheOutcome {
    /// Loaded compiled code from disk.
    Hit,
    /// Compiled, then stored.
    Miss,
}

struct Sha256Hasher<'a>(&'a mut Sha256);

impl Hasher for Sha256Hasher<'_> {
    fn finish(&self) -> u64 {
        0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

impl CodeCache {
    /// The default location (see the module docs), if one can be found.
    pub fn default_dir() -> Option<PathBuf> {
        let env = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        env("WARDEN_CACHE_DIR")
            .or_else(|| env("XDG_CACHE_HOME").map(|d| d.join("warden")))
            .or_else(|| env("HOME").map(|d| d.join(".cache").join("warden")))
    }

    /// A cache in `dir`, created if needed (private to this user). Refused
    /// if someone else could write into it.
    pub fn new(dir: impl Into<PathBuf>) -> std::io::Result<Self> {
        use std::os::unix::fs::{DirBuilderExt, MetadataExt};
        let dir = dir.into();
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)?;
        let meta = std::fs::metadata(&dir)?;
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        if meta.uid() != me || meta.mode() & 0o022 != 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                format!(
                    "owned by uid {} with mode {:o}: others could plant native code in it; \
                     make it yours alone (chmod go-w) or turn the cache off (--no-cache)",
                    meta.uid(),
                    meta.mode() & 0o777
                ),
            ));
        }
        Ok(CodeCache { dir })
    }

    /// The cache directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Records that `precompiled` (a serialized module) was written by
    /// Warden, so it may be loaded later.
    pub fn trust(&self, precompiled: &[u8]) -> std::io::Result<()> {
        let marker = self.marker(precompiled);
        std::fs::create_dir_all(marker.parent().unwrap_or(&self.dir))?;
        std::fs::write(marker, b"")
    }

    /// Whether [`CodeCache::trust`] recorded `precompiled`.
    pub fn trusts(&self, precompiled: &[u8]) -> bool {
        self.marker(precompiled).is_file()
    }

    fn marker(&self, precompiled: &[u8]) -> PathBuf {
        self.dir
            .join("precompiled")
            .join(hex(&Sha256::digest(precompiled)))
    }

    fn entry(&self, engine: &Engine, wasm: &[u8]) -> PathBuf {
        let mut sha = Sha256::new();
        engine
            .precompile_compatibility_hash()
            .hash(&mut Sha256Hasher(&mut sha));
        sha.update((wasm.len() as u64).to_le_bytes());
        sha.update(wasm);
        self.dir.join(format!("{}.cwasm", hex(&sha.finalize())))
    }

    /// Loads the compiled form of `wasm` (binary module bytes), compiling
    /// and storing it on a miss. A failure to write the cache is not an
    /// error: the compiled module is returned all the same.
    pub fn load_or_compile(
        &self,
        engine: &Engine,
        wasm: &[u8],
    ) -> wasmtime::Result<(Module, CacheOutcome)> {
        self.cached(
            engine,
            wasm,
            Module::from_binary,
            Module::serialize,
            |e, p| {
                // SAFETY: see `cached`.
                unsafe { Module::deserialize_file(e, p) }
            },
        )
    }

    /// [`CodeCache::load_or_compile`] for a component's bytes.
    pub fn load_or_compile_component(
        &self,
        engine: &Engine,
        wasm: &[u8],
    ) -> wasmtime::Result<(Component, CacheOutcome)> {
        self.cached(
            engine,
            wasm,
            Component::from_binary,
            Component::serialize,
            |e, p| {
                // SAFETY: see `cached`.
                unsafe { Component::deserialize_file(e, p) }
            },
        )
    }

    /// The entry of `wasm` loaded by `load` (which may trust it: entries
    /// are only ever written by `serialize` below into a directory
    /// private to the operator, see the module docs, and are keyed by
    /// the engine's compatibility hash), or else compiled and stored.
    fn cached<C>(
        &self,
        engine: &Engine,
        wasm: &[u8],
        compile: impl FnOnce(&Engine, &[u8]) -> wasmtime::Result<C>,
        serialize: impl FnOnce(&C) -> wasmtime::Result<Vec<u8>>,
        load: impl FnOnce(&Engine, &Path) -> wasmtime::Result<C>,
    ) -> wasmtime::Result<(C, CacheOutcome)> {
        let path = self.entry(engine, wasm);
        if path.is_file() {
            if let Ok(m) = load(engine, &path) {
                return Ok((m, CacheOutcome::Hit));
            }
        }
        let code = compile(engine, wasm)?;
        if let Ok(bytes) = serialize(&code) {
            let tmp = path.with_extension(format!("tmp{}", std::process::id()));
            if std::fs::write(&tmp, &bytes).is_ok() && std::fs::rename(&tmp, &path).is_err() {
                let _ = std::fs::remove_file(&tmp);
            }
        }
        Ok((code, CacheOutcome::Miss))
    }
}

fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_load_hits_and_changed_module_misses() {
        let dir = tempfile::tempdir().unwrap();
        let cache = CodeCache::new(dir.path()).unwrap();
        let engine = Engine::default();
        let a = wat::parse_str("(module (func (export \"f\")))").unwrap();
        let b = wat::parse_str("(module (func (export \"g\")))").unwrap();
        assert_eq!(
            cache.load_or_compile(&engine, &a).unwrap().1,
            CacheOutcome::Miss
        );
        let (m, outcome) = cache.load_or_compile(&engine, &a).unwrap();
        assert_eq!(outcome, CacheOutcome::Hit);
        assert!(m.get_export("f").is_some());
        assert_eq!(
            cache.load_or_compile(&engine, &b).unwrap().1,
            CacheOutcome::Miss
        );
    }

    #[test]
    fn a_directory_others_can_write_is_refused() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = CodeCache::new(dir.path()).unwrap_err();
        assert!(e.to_string().contains("mode 777"), "{e}");
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(CodeCache::new(dir.path()).is_ok());
    }

    #[test]
    fn trusts_only_what_it_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let cache = CodeCache::new(dir.path()).unwrap();
        assert!(!cache.trusts(b"code"));
        cache.trust(b"code").unwrap();
        assert!(cache.trusts(b"code"));
        assert!(!cache.trusts(b"other code"));
    }

    #[test]
    fn corrupt_entry_is_recompiled() {
        let dir = tempfile::tempdir().unwrap();
        let cache = CodeCache::new(dir.path()).unwrap();
        let engine = Engine::default();
        let a = wat::parse_str("(module)").unwrap();
        std::fs::write(cache.entry(&engine, &a), b"garbage").unwrap();
        assert_eq!(
            cache.load_or_compile(&engine, &a).unwrap().1,
            CacheOutcome::Miss
        );
        assert_eq!(
            cache.load_or_compile(&engine, &a).unwrap().1,
            CacheOutcome::Hit
        );
    }
}
