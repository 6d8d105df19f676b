//! Loading modules into a runtime: from files or bytes, as commands, as
//! passive tasks' reactors or as HTTP components, each compiled once per
//! runtime.

use super::*;

impl Runtime {
    /// Loads (compiles, or fetches from the code cache) the module at
    /// `path`, once per runtime; later calls return the same module.
    pub fn load_module(&self, path: &Path) -> Result<Arc<LoadedModule>, Error> {
        self.load_entry(path, module::Entry::Command)
    }

    /// Loads the module at `path` as a passive task's (a reactor exporting
    /// the passive handler), once per runtime.
    pub fn load_passive_module(&self, path: &Path) -> Result<Arc<LoadedModule>, Error> {
        self.load_entry(path, module::Entry::Passive)
    }

    /// Loads the `wasi:http/proxy` component at `path`, as an HTTP
    /// route's handler (`Entry::Http`), once per runtime.
    pub fn load_http_component(&self, path: &Path) -> Result<Arc<LoadedModule>, Error> {
        self.load_entry(path, module::Entry::Http)
    }

    /// Loads the module `spec`'s task runs, as it runs it: a passive
    /// task's reactor, a component servlet's `wasi:http/proxy` component
    /// (see [`TaskSpec::serves_http`]), or else a command's module or
    /// component.
    pub fn load_task_module(&self, spec: &TaskSpec) -> Result<Arc<LoadedModule>, Error> {
        let entry = match spec.passive && spec.serves.is_empty() {
            true => module::Entry::Passive,
            false if spec.serves_http() => module::Entry::Http,
            false => module::Entry::Command,
        };
        self.load_entry(&spec.module, entry)
    }

    /// Compiles the module in `bytes` (binary, or text if `name` ends in
    /// `.wat`) and registers it under `name`: a [`TaskSpec`] whose module
    /// is `name` then runs it, with no file. A name already loaded keeps
    /// its module.
    pub fn add_module(&self, name: &str, bytes: &[u8]) -> Result<Arc<LoadedModule>, Error> {
        self.add_entry(name.as_ref(), Some(bytes.to_vec()), module::Entry::Command)
    }

    /// [`Runtime::add_module`] for a passive task's module.
    pub fn add_passive_module(&self, name: &str, bytes: &[u8]) -> Result<Arc<LoadedModule>, Error> {
        self.add_entry(name.as_ref(), Some(bytes.to_vec()), module::Entry::Passive)
    }

    /// Loads a module to run as `entry`, linked with that entry's linker.
    pub(super) fn load_entry(
        &self,
        path: &Path,
        entry: module::Entry,
    ) -> Result<Arc<LoadedModule>, Error> {
        self.add_entry(path, None, entry)
    }

    /// Loads the module at `path`, or compiles `bytes` as if they were
    /// its contents, once per runtime.
    fn add_entry(
        &self,
        path: &Path,
        bytes: Option<Vec<u8>>,
        entry: module::Entry,
    ) -> Result<Arc<LoadedModule>, Error> {
        let mut modules = self
            .module_map(entry)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        // Spawning looks the module up by the path it was given; only a
        // path not seen before is resolved (symlinks, `..`) on the file system.
        if let Some(m) = modules.get(path) {
            return Ok(m.clone());
        }
        let key = match bytes {
            Some(_) => path.to_path_buf(),
            None => std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()),
        };
        if let Some(m) = modules.get(&key).cloned() {
            modules.insert(path.to_path_buf(), m.clone());
            return Ok(m);
        }
        let m = Arc::new(self.compile(path, bytes, entry)?);
        modules.insert(path.to_path_buf(), m.clone());
        modules.insert(key, m.clone());
        Ok(m)
    }

    fn module_map(&self, entry: module::Entry) -> &ModuleMap {
        let inner = &*self.inner;
        match entry {
            module::Entry::Command => &inner.modules,
            module::Entry::Passive => &inner.passive_modules,
            module::Entry::Http => &inner.http_components,
        }
    }

    fn compile(
        &self,
        path: &Path,
        bytes: Option<Vec<u8>>,
        entry: module::Entry,
    ) -> Result<LoadedModule, Error> {
        let inner = &*self.inner;
        let linker = match entry {
            module::Entry::Passive => &inner.linkers.passive,
            module::Entry::Command | module::Entry::Http => &inner.linkers.task,
        };
        let loader = module::Loader {
            engine: &inner.engine,
            linker,
            components: &inner.linkers.component,
            cache: inner.cache.as_ref(),
            allow_precompiled: inner.config.allow_precompiled,
            max_bytes: inner.config.max_module_bytes,
        };
        module::load(&loader, path, bytes, entry).map_err(Error::Module)
    }

    /// The module at `path`, compiled afresh if it was loaded as `entry`
    /// from a file that has changed since (`None` if it was not loaded,
    /// or has not changed): what a manifest reload installs with
    /// [`Runtime::install_module`] once every module has compiled.
    pub(crate) fn recompile_changed(
        &self,
        path: &Path,
        entry: module::Entry,
    ) -> Option<Result<Arc<LoadedModule>, Error>> {
        let loaded = (self
            .module_map(entry)
            .lock()
            .unwrap_or_else(|e| e.into_inner()))
        .get(path)
        .cloned()?;
        if loaded.stamp.is_none() || loaded.stamp == module::stamp(path) {
            return None;
        }
        Some(self.compile(path, None, entry).map(Arc::new))
    }

    /// Makes `m` the module tasks spawned from `path` as `entry` run from
    /// now on; tasks running the one before keep it.
    pub(crate) fn install_module(&self, path: &Path, entry: module::Entry, m: Arc<LoadedModule>) {
        let mut modules = self
            .module_map(entry)
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let key = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        modules.insert(key, m.clone());
        modules.insert(path.to_path_buf(), m);
    }
}
