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
        let inner = &*self.inner;
        let (map, linker) = match entry {
            module::Entry::Command => (&inner.modules, &inner.linkers.task),
            module::Entry::Passive => (&inner.passive_modules, &inner.linkers.passive),
            module::Entry::Http => (&inner.http_components, &inner.linkers.task),
        };
        let mut modules = map.lock().unwrap_or_else(|e| e.into_inner());
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
        let m = Arc::new(
            module::load(
                &module::Loader {
                    engine: &inner.engine,
                    linker,
                    components: &inner.linkers.component,
                    cache: inner.cache.as_ref(),
                    allow_precompiled: inner.config.allow_precompiled,
                    max_bytes: inner.config.max_module_bytes,
                },
                path,
                bytes,
                entry,
            )
            .map_err(Error::Module)?,
        );
        modules.insert(path.to_path_buf(), m.clone());
        modules.insert(key, m.clone());
        Ok(m)
    }
}
