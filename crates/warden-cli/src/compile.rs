//! `warden compile`: modules and components compiled ahead of time, into the
//! compiled-code cache (so that the next `warden run` only loads them) and,
//! with `-o`, into a precompiled file that `warden run` takes in place of
//! the module.

use crate::cli::CompileArgs;
use std::path::Path;
use warden::{CacheOutcome, CodeCache, Runtime, RuntimeConfig};

pub fn compile(args: &CompileArgs) -> Result<(), String> {
    if args.output.is_some() && args.modules.len() != 1 {
        return Err("--output takes exactly one module".into());
    }
    let config = RuntimeConfig {
        workers: 1,
        ..RuntimeConfig::default()
    };
    let cache = config.cache_dir.clone();
    if cache.is_none() && args.output.is_none() {
        return Err(
            "no compiled-code cache (set WARDEN_CACHE_DIR, XDG_CACHE_HOME or HOME); \
                    write a precompiled file with -o instead"
                .into(),
        );
    }
    let rt = Runtime::new(config).map_err(|e| e.to_string())?;
    for module in &args.modules {
        // A reactor compiles as the passive task it can only be, a
        // wasi:http/proxy component as a route's handler.
        let loaded = rt
            .load_module(module)
            .or_else(|e| {
                rt.load_passive_module(module)
                    .or_else(|_| rt.load_http_component(module))
                    .map_err(|_| e)
            })
            .map_err(|e| e.to_string())?;
        match (loaded.cache, &cache) {
            (Some(CacheOutcome::Hit), Some(dir)) => {
                say!(
                    "warden: {}: already in the cache ({})",
                    module.display(),
                    dir.display()
                )
            }
            (_, Some(dir)) => {
                say!(
                    "warden: {}: compiled into the cache ({})",
                    module.display(),
                    dir.display()
                )
            }
            (_, None) => {}
        }
        if let Some(out) = &args.output {
            write_precompiled(&loaded.precompiled()?, out, cache.as_deref())?;
        }
    }
    Ok(())
}

/// Writes `code` to `out` and records it in the cache as Warden's own, so
/// that `warden run` accepts it.
fn write_precompiled(code: &[u8], out: &Path, cache: Option<&Path>) -> Result<(), String> {
    let tmp = out.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, code)
        .and_then(|()| std::fs::rename(&tmp, out))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            format!("cannot write {}: {e}", out.display())
        })?;
    let trusted = cache.map(|dir| CodeCache::new(dir).and_then(|c| c.trust(code)));
    match trusted {
        Some(Ok(())) => say!("warden: wrote {}", out.display()),
        Some(Err(e)) => say!(
            "warden: wrote {}, but could not record it in the cache ({e}); \
             run it with --allow-precompiled",
            out.display()
        ),
        None => say!(
            "warden: wrote {}; without a compiled-code cache to record it in, \
             run it with --allow-precompiled",
            out.display()
        ),
    }
    Ok(())
}
