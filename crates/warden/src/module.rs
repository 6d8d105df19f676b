//! Loading modules: read, check, compile (once per runtime, cached on disk)
//! and pre-link against the host functions, so that spawning a task is only
//! instantiation.

use crate::cache::{CacheOutcome, CodeCache};
use crate::host::TaskData;
use std::path::{Path, PathBuf};
use wasmtime::{Engine, ExternType, InstancePre, Linker, Module};

/// Import modules Warden provides to guests.
pub const PROVIDED_IMPORT_MODULES: &[&str] = &["wasi_snapshot_preview1", crate::host::MODULE];

/// A module ready to be instantiated as tasks; shared by all its tasks.
pub struct LoadedModule {
    /// The file it came from.
    pub path: PathBuf,
    /// Whether the compiled code came from the disk cache (`None`: no cache).
    pub cache: Option<CacheOutcome>,
    pub(crate) pre: InstancePre<TaskData>,
}

/// Reads, validates, compiles and links the module at `path`.
///
/// Refuses, with a message naming the file, anything that is not a
/// WebAssembly core module (binary, or text in a `.wat` file), a component,
/// a module that does not fit a task slot (more than one memory or table,
/// a table over the element limit: Wasmtime's compiler says which),
/// a module without a `_start` command entry point, and a module importing
/// anything Warden does not provide (the message names the import).
pub(crate) fn load(
    engine: &Engine,
    linker: &Linker<TaskData>,
    cache: Option<&CodeCache>,
    path: &Path,
) -> Result<LoadedModule, String> {
    let shown = path.display();
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read module {shown}: {e}"))?;
    let wasm = if bytes.starts_with(b"\0asm") {
        if bytes.get(4..8) != Some(&[1, 0, 0, 0]) {
            return Err(format!(
                "{shown}: a WebAssembly component or unknown binary version; \
                 Warden runs core modules (WASI preview 1)"
            ));
        }
        bytes
    } else if path.extension().is_some_and(|e| e == "wat") {
        wat::parse_bytes(&bytes)
            .map_err(|e| format!("{shown}: invalid WebAssembly text: {e}"))?
            .into_owned()
    } else {
        return Err(format!(
            "{shown}: not a WebAssembly module (no \\0asm header; text modules must end in .wat)"
        ));
    };
    let (module, outcome) = match cache {
        Some(c) => c.load_or_compile(engine, &wasm).map(|(m, o)| (m, Some(o))),
        None => Module::from_binary(engine, &wasm).map(|m| (m, None)),
    }
    .map_err(|e| format!("{shown}: invalid module: {e:#}"))?;

    for import in module.imports() {
        if !PROVIDED_IMPORT_MODULES.contains(&import.module()) {
            return Err(format!(
                "{shown}: imports `{}::{}`, which Warden does not provide \
                 (provided import modules: {})",
                import.module(),
                import.name(),
                PROVIDED_IMPORT_MODULES.join(", ")
            ));
        }
    }
    match module.get_export("_start") {
        Some(ExternType::Func(f)) if f.params().len() == 0 && f.results().len() == 0 => {}
        _ => {
            return Err(format!(
                "{shown}: no `_start` function exported; Warden runs WASI command modules"
            ))
        }
    }
    let pre = linker
        .instantiate_pre(&module)
        .map_err(|e| format!("{shown}: {e:#}"))?;
    Ok(LoadedModule {
        path: path.to_path_buf(),
        cache: outcome,
        pre,
    })
}
