//! `warden serve component.wasm`: one wasi:http/proxy component behind a
//! web server, as `wasmtime serve` runs one, but each request's instance
//! a task within the route's limits. The flags become a manifest's
//! `[[http]]` section with one route, checked by the same code as a
//! manifest file.

use crate::cli::ServeArgs;
use crate::program::{dirs, env, strings};
use std::path::Path;
use std::process::ExitCode;
use toml::{Table, Value};
use warden::{Manifest, SystemSpec};

pub fn serve(args: ServeArgs) -> Result<ExitCode, String> {
    if !args.component.is_file() {
        return Err(format!("component not found: {}", args.component.display()));
    }
    let text = toml::to_string(&manifest(&args)?).map_err(|e| e.to_string())?;
    let manifest = Manifest::parse(&text, Path::new(".")).map_err(as_flag)?;
    let mut spec = SystemSpec::from_manifest(manifest);
    // One program's settings: no prefix on its instances' output.
    spec.config.prefix_output = false;
    // One handler: a limit it cannot start within is refused at once.
    spec.strict_limits = true;
    crate::run::run_system(spec, &args.system, true)
}

/// The manifest the flags stand for: no control API unless asked, one
/// server on `--addr`, one route taking every path.
fn manifest(a: &ServeArgs) -> Result<Table, String> {
    let mut route = Table::new();
    let mut put = |key: &str, v: Value| route.insert(key.into(), v);
    put("path", "/*".into());
    put("name", route_name(&a.component).into());
    put(
        "component",
        a.component.to_string_lossy().into_owned().into(),
    );
    put("args", strings(&a.args));
    put("env", Value::Table(env(&a.env)?));
    put("dirs", Value::Table(dirs(&a.dir)?));
    put("connect", strings(&a.allow_connect));
    for (key, value) in [
        ("memory_limit", &a.memory_limit),
        ("on_memory_limit", &a.on_memory_limit),
        ("cpu_limit", &a.cpu_limit),
        ("timeout", &a.timeout),
        ("max_body", &a.max_body),
        ("max_response", &a.max_response),
    ] {
        if let Some(v) = value {
            put(key, v.as_str().into());
        }
    }
    for (key, value) in [
        ("max_concurrent", a.max_concurrent),
        ("max_queue", a.max_queue),
    ] {
        if let Some(n) = value {
            put(key, Value::Integer(i64::try_from(n).unwrap_or(i64::MAX)));
        }
    }
    let mut http = Table::new();
    http.insert("listen".into(), a.addr.clone().into());
    http.insert("route".into(), Value::Array(vec![Value::Table(route)]));
    let mut runtime = Table::new();
    runtime.insert("control".into(), "off".into());
    let mut m = Table::new();
    m.insert("runtime".into(), Value::Table(runtime));
    m.insert("http".into(), Value::Array(vec![Value::Table(http)]));
    Ok(m)
}

/// The route's name: the component's file name without extension.
fn route_name(component: &Path) -> String {
    component
        .file_stem()
        .map(|s| {
            s.to_string_lossy()
                .chars()
                .filter(|c| c.is_alphanumeric() || "-_.".contains(*c))
                .collect()
        })
        .filter(|s: &String| !s.is_empty())
        .unwrap_or_else(|| "component".into())
}

/// A manifest error, said of the flags: `http[0] ("…"): route[0] ("/*"):
/// cpu_limit: …` becomes `cpu_limit: …`.
fn as_flag(error: String) -> String {
    match error.rsplit_once("(\"/*\"): ") {
        Some((_, rest)) => rest.to_string(),
        None => error,
    }
}
