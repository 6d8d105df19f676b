//! Loading modules: read, check, compile (once per runtime, cached on disk)
//! and pre-link against the host functions, so that spawning a task is only
//! instantiation. A task's code is a core module (WASI preview 1) or a
//! component (WASI 0.2: `component`).

mod component;

use crate::cache::{CacheOutcome, CodeCache};
use crate::host::TaskData;
use std::path::{Path, PathBuf};
use wasmtime::{Engine, ExternType, InstancePre, Linker, Module, ModuleExport, Precompiled};

pub(crate) use component::{Linked, PROXY_AS_TASK};

/// Import modules Warden provides to guests.
pub const PROVIDED_IMPORT_MODULES: &[&str] = &[
    "wasi_snapshot_preview1",
    crate::host::MODULE,
    crate::host::TEAVM_MODULE,
];

/// A module ready to be instantiated as tasks; shared by all its tasks.
pub struct LoadedModule {
    /// The file it came from.
    pub path: PathBuf,
    /// Whether the compiled code came from the disk cache (`None`: no cache).
    pub cache: Option<CacheOutcome>,
    /// Its file's size and modification time when it was read (`None`:
    /// not read from a file): a reload compiles a module whose file has
    /// changed since.
    pub(crate) stamp: Option<Stamp>,
    pub(crate) code: Code,
}

/// A file's size and modification time.
pub(crate) type Stamp = (u64, std::time::SystemTime);

/// The size and modification time of the file at `path`, if it has one.
pub(crate) fn stamp(path: &Path) -> Option<Stamp> {
    let meta = std::fs::metadata(path).ok()?;
    Some((meta.len(), meta.modified().ok()?))
}

/// What a task's instance is made from.
pub(crate) enum Code {
    /// A core module, pre-linked, with the exports a task's start needs.
    Core {
        pre: InstancePre<TaskData>,
        exports: Exports,
    },
    /// A component, pre-linked for the world it is run in.
    Component(Linked),
}

/// A command module's exports a task's start needs, as indices into its
/// instances' exports.
pub(crate) struct Exports {
    /// `_start`, a function taking and returning nothing (see
    /// [`Entry::check`]); `None` in a passive module.
    pub start: Option<ModuleExport>,
    /// `memory`, if the module exports a memory by that name.
    pub memory: Option<ModuleExport>,
}

impl Exports {
    fn of(module: &Module, entry: Entry) -> Self {
        let start = (entry == Entry::Command)
            .then(|| module.get_export_index("_start"))
            .flatten();
        let memory = matches!(module.get_export("memory"), Some(ExternType::Memory(_)))
            .then(|| module.get_export_index("memory"))
            .flatten();
        Exports { start, memory }
    }
}

impl LoadedModule {
    /// Its core module, if it is one (not a component).
    pub(crate) fn core_module(&self) -> Option<&Module> {
        match &self.code {
            Code::Core { pre, .. } => Some(pre.module()),
            Code::Component(_) => None,
        }
    }

    /// The module's compiled code, as `warden compile -o` writes it.
    pub fn precompiled(&self) -> Result<Vec<u8>, String> {
        match &self.code {
            Code::Core { pre, .. } => pre.module().serialize(),
            Code::Component(linked) => linked.component().serialize(),
        }
        .map_err(|e| format!("{}: {e:#}", self.path.display()))
    }

    /// Whether it is a component (WASI 0.2) rather than a core module.
    pub fn is_component(&self) -> bool {
        matches!(self.code, Code::Component(_))
    }

    /// The least memory budget an instance starts with: the largest
    /// initial size of any of its linear memories and of its tables (as
    /// the budget charges them). A task's memory limit below it could
    /// only trap at start.
    pub fn initial_memory_bytes(&self) -> u64 {
        let required = match &self.code {
            Code::Core { pre, .. } => Some(pre.module().resources_required()),
            Code::Component(linked) => linked.component().resources_required(),
        };
        let Some(r) = required else { return 0 };
        let pages = r.max_initial_memory_size.unwrap_or(0);
        let elements = r.max_initial_table_size.unwrap_or(0);
        pages
            .saturating_mul(64 << 10)
            .saturating_add(elements.saturating_mul(crate::limiter::TABLE_ELEMENT_BYTES))
    }

    /// The engine it was compiled for.
    pub(crate) fn engine(&self) -> &Engine {
        match &self.code {
            Code::Core { pre, .. } => pre.module().engine(),
            Code::Component(linked) => linked.component().engine(),
        }
    }
}

/// What loading needs from the runtime: its engine, linkers, code cache
/// and settings.
pub(crate) struct Loader<'a> {
    pub engine: &'a Engine,
    /// The linker of the entry being loaded (a task's, or a passive
    /// task's).
    pub linker: &'a Linker<TaskData>,
    /// The components' linker.
    pub components: &'a wasmtime::component::Linker<TaskData>,
    pub cache: Option<&'a CodeCache>,
    pub allow_precompiled: bool,
    pub max_bytes: u64,
}

/// Reads (unless given its `bytes`), validates, compiles and links the
/// module or component at `path`.
///
/// Refuses, with a message naming the file, anything that is not a
/// WebAssembly core module (binary, or text in a `.wat` file), a
/// component, or either precompiled by `warden compile`; a module that
/// does not fit a task slot (more than one memory or table, a table over
/// the element limit: Wasmtime's compiler says which); a module without
/// a `_start` command entry point, a component without the export its
/// entry calls (see `component`); and anything importing what Warden
/// does not provide (the message names the import).
///
/// A precompiled file is native code that is not checked again, so it
/// is loaded only if `cache` recorded writing it or `allow_precompiled`.
pub(crate) fn load(
    loader: &Loader,
    path: &Path,
    bytes: Option<Vec<u8>>,
    entry: Entry,
) -> Result<LoadedModule, String> {
    let shown = path.display();
    let stamp = bytes.is_none().then(|| stamp(path)).flatten();
    let bytes = match bytes {
        Some(b) => b,
        None => {
            read(path, loader.max_bytes).map_err(|e| format!("cannot read module {shown}: {e}"))?
        }
    };
    let (code, cache) = if let Some(kind) = Engine::detect_precompiled(&bytes) {
        let trusted = loader.allow_precompiled || loader.cache.is_some_and(|c| c.trusts(&bytes));
        match kind {
            Precompiled::Module => {
                let module = precompiled(loader.engine, path, &bytes, trusted)?;
                (link_core(loader, path, module, entry)?, None)
            }
            Precompiled::Component => {
                let component = component::precompiled(loader.engine, path, &bytes, trusted)?;
                (component::link(loader, path, component, entry)?, None)
            }
        }
    } else if component::is_component(&bytes) {
        let (component, outcome) = component::compile(loader, path, &bytes)?;
        (component::link(loader, path, component, entry)?, outcome)
    } else {
        let wasm = wasm_bytes(path, bytes)?;
        let (module, outcome) = match loader.cache {
            Some(c) => c
                .load_or_compile(loader.engine, &wasm)
                .map(|(m, o)| (m, Some(o))),
            None => Module::from_binary(loader.engine, &wasm).map(|m| (m, None)),
        }
        .map_err(|e| format!("{shown}: invalid module: {e:#}"))?;
        (link_core(loader, path, module, entry)?, outcome)
    };
    Ok(LoadedModule {
        path: path.to_path_buf(),
        cache,
        stamp,
        code,
    })
}

/// A core module's code: its imports checked, its entry's exports found,
/// pre-linked with `loader`'s linker.
fn link_core(loader: &Loader, path: &Path, module: Module, entry: Entry) -> Result<Code, String> {
    let shown = path.display();
    check_core_imports(path, &module)?;
    entry.check(&module).map_err(|e| format!("{shown}: {e}"))?;
    let pre = loader
        .linker
        .instantiate_pre(&module)
        .map_err(|e| match entry {
            Entry::Passive => format!(
                "{shown}: {e:#} (a passive task's handler runs inside its callers' calls \
             and may not wait: it can use WASI, handles, memory objects, permits, \
             name_lookup and calls to other passive or host services)"
            ),
            _ => format!("{shown}: {e:#}"),
        })?;
    Ok(Code::Core {
        exports: Exports::of(&module, entry),
        pre,
    })
}

/// Refuses a core module importing anything Warden does not provide,
/// naming the import.
fn check_core_imports(path: &Path, module: &Module) -> Result<(), String> {
    let shown = path.display();
    for import in module.imports() {
        let teavm = import.module() == crate::host::TEAVM_MODULE;
        if let Some(why) = crate::host::teavm_refusal(import.name()).filter(|_| teavm) {
            return Err(format!(
                "{shown}: imports `teavm::{}`: {why}",
                import.name()
            ));
        }
        if !PROVIDED_IMPORT_MODULES.contains(&import.module()) {
            let hint = match import.module().starts_with("wasi:") {
                true => {
                    "; WASI 0.2 interfaces are for components: make one with \
                         `wasm-tools component new`"
                }
                false => "",
            };
            return Err(format!(
                "{shown}: imports `{}::{}`, which Warden does not provide \
                 (provided import modules: {}){hint}",
                import.module(),
                import.name(),
                PROVIDED_IMPORT_MODULES.join(", ")
            ));
        }
    }
    Ok(())
}

/// Default largest module file (see [`crate::RuntimeConfig::max_module_bytes`]).
pub const DEFAULT_MAX_MODULE_BYTES: u64 = 256 << 20;

/// The bytes of the module file at `path`: a regular file (after
/// symlinks) of at most `max` bytes, its size known before anything is
/// read. A device, a pipe, a directory or a file whose size the kernel
/// does not tell (`/proc`, `/sys`: they say 0) is refused, and so is one
/// that grows past its size while it is read.
pub(crate) fn read(path: &Path, max: u64) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    let len = meta.len();
    if len == 0 {
        return Err("empty, or a file whose size is unknown (such as in /proc)".into());
    }
    if len > max {
        return Err(format!(
            "{len} bytes, over the largest module size of {max} bytes (max_module_size)"
        ));
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(len + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 != len {
        return Err("it changed size while being read".into());
    }
    Ok(bytes)
}

/// How a module is entered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Entry {
    /// A WASI command: `_start` runs it.
    Command,
    /// A passive service (a WASI reactor): `_initialize` if it has one,
    /// then `warden_passive_call` for each call, with request buffers from
    /// `warden_passive_alloc` (see `sdk/c/warden.h`).
    Passive,
    /// A `wasi:http/proxy` component: `wasi:http/incoming-handler` runs
    /// each request (see `component`).
    Http,
}

impl Entry {
    /// Checks that `module` exports what this entry calls.
    fn check(self, module: &Module) -> Result<(), String> {
        let func = |name: &str, params: usize, results: usize| match module.get_export(name) {
            Some(ExternType::Func(f)) => f.params().len() == params && f.results().len() == results,
            _ => false,
        };
        match self {
            Entry::Command if !func("_start", 0, 0) => Err(
                "no `_start` function exported; Warden runs WASI command modules \
                     (a reactor module runs as a passive task: passive = true)"
                    .into(),
            ),
            Entry::Passive
                if !func("warden_passive_call", 4, 1) || !func("warden_passive_alloc", 1, 1) =>
            {
                Err(
                    "a passive task exports `warden_passive_call` and `warden_passive_alloc` \
                     (WARDEN_PASSIVE_SERVICE in warden.h), built as a reactor \
                     (-mexec-model=reactor)"
                        .into(),
                )
            }
            Entry::Http => Err(
                "a core module; a route's `component` is a wasi:http/proxy component \
                 (a WAGI module is a route's `module`)"
                    .into(),
            ),
            _ => Ok(()),
        }
    }
}

/// The binary module in `bytes`, assembled first if `path` is a `.wat` file.
fn wasm_bytes(path: &Path, bytes: Vec<u8>) -> Result<Vec<u8>, String> {
    let shown = path.display();
    if bytes.starts_with(b"\0asm") {
        if bytes.get(4..8) != Some(&[1, 0, 0, 0]) {
            return Err(format!(
                "{shown}: an unknown WebAssembly binary version (Warden runs core \
                 modules, version 1, and components)"
            ));
        }
        Ok(bytes)
    } else if path.extension().is_some_and(|e| e == "wat") {
        Ok(wat::parse_bytes(&bytes)
            .map_err(|e| format!("{shown}: invalid WebAssembly text: {e}"))?
            .into_owned())
    } else {
        Err(format!(
            "{shown}: not a WebAssembly module (no \\0asm header; text modules must end in .wat)"
        ))
    }
}

/// A module `warden compile` wrote, if it may be trusted.
fn precompiled(
    engine: &Engine,
    path: &Path,
    bytes: &[u8],
    trusted: bool,
) -> Result<Module, String> {
    let shown = path.display();
    if !trusted {
        return Err(untrusted(path));
    }
    // SAFETY: the caller trusts the file: this runtime's cache recorded
    // writing it, or the operator said so. Wasmtime still refuses code
    // built for another engine version, configuration or machine.
    unsafe { Module::deserialize(engine, bytes) }
        .map_err(|e| format!("{shown}: cannot load precompiled module ({e:#}); compile it again"))
}

/// Why a precompiled file from elsewhere is refused.
fn untrusted(path: &Path) -> String {
    format!(
        "{}: precompiled elsewhere: its native code would run unchecked \
         (--allow-precompiled if you trust it, or compile the .wasm here)",
        path.display()
    )
}
