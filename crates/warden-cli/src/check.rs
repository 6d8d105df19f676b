//! `warden check`: a manifest validated and every module it names
//! compiled, without running anything. Each problem is a line naming the
//! manifest and the line it is on.

use crate::cli::CheckArgs;
use std::collections::BTreeSet;
use std::path::Path;
use std::process::ExitCode;
use warden::RouteHandler as Handler;
use warden::{Manifest, Runtime, RuntimeConfig};

pub fn check(args: &CheckArgs) -> Result<ExitCode, String> {
    let path = &args.manifest;
    let bytes =
        std::fs::read(path).map_err(|e| format!("cannot read manifest {}: {e}", path.display()))?;
    if bytes.starts_with(b"\0asm") {
        return check_program(args);
    }
    let Ok(text) = String::from_utf8(bytes) else {
        say!(
            "warden: {}: neither a manifest (TOML text) nor a WebAssembly module",
            path.display()
        );
        return Ok(ExitCode::from(1));
    };
    let base = path.parent().unwrap_or(Path::new("."));
    // Every problem of the manifest, then those of the modules its good
    // entries name.
    let (m, bad) = match Manifest::parse_all(&text, base) {
        Ok(parsed) => parsed,
        Err(problems) => {
            for problem in &problems {
                say!("warden: {}: {problem}", path.display());
            }
            return Ok(ExitCode::from(1));
        }
    };
    for problem in &bad {
        say!("warden: {}: {problem}", path.display());
    }
    let config = RuntimeConfig {
        workers: 1,
        allow_precompiled: args.allow_precompiled,
        ..warden::runtime_config(&m)
    };
    let rt = Runtime::new(config).map_err(|e| format!("{}: {e}", path.display()))?;
    let modules = warden::modules(&m.tasks, &m.http);
    let mut problems = bad.len();
    for module in &modules {
        if let Err(e) = warden::load(&rt, module) {
            problems += 1;
            let at =
                line_naming(&text, module.0, base).map_or(String::new(), |l| format!("line {l}: "));
            say!("warden: {}: {at}{e}", path.display());
        }
    }
    for (who, why) in warden::misfits(&rt, &m.tasks, &m.http) {
        problems += 1;
        let at = limit_line(&text, &who).map_or(String::new(), |l| format!("line {l}: "));
        say!("warden: {}: {at}{who}: {why}", path.display());
    }
    if problems == 0 {
        // A typed binding that cannot work is refused as `warden run`
        // refuses it: one line, status 2.
        if let Some(why) = warden::bind_mismatches(&rt, &m.tasks).into_iter().next() {
            return Err(format!("{}: {why}", path.display()));
        }
    }
    for warning in unserved(&m) {
        say!("warden: {}: warning: {warning}", path.display());
    }
    if problems > 0 {
        return Ok(ExitCode::from(1));
    }
    let routes: usize = m.http.iter().map(|h| h.routes.len()).sum();
    println!(
        "{}: ok: {} tasks, {} servers with {routes} routes, {} modules compiled",
        path.display(),
        m.tasks.len(),
        m.http.len(),
        modules.len()
    );
    Ok(ExitCode::SUCCESS)
}

/// `warden check prog.wasm`: a single program's module or component
/// compiled, as `warden run` would compile it.
fn check_program(args: &CheckArgs) -> Result<ExitCode, String> {
    let path = &args.manifest;
    let config = RuntimeConfig {
        workers: 1,
        allow_precompiled: args.allow_precompiled,
        ..RuntimeConfig::default()
    };
    let rt = Runtime::new(config).map_err(|e| format!("{}: {e}", path.display()))?;
    let loaded = rt.load_module(path).or_else(|e| {
        rt.load_passive_module(path)
            .or_else(|_| rt.load_http_component(path))
            .map_err(|_| e)
    });
    match loaded {
        Ok(_) => {
            println!("{}: ok: compiled", path.display());
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            // Wasmtime's and Warden's load errors name the file already.
            say!("warden: {e}");
            Ok(ExitCode::from(1))
        }
    }
}

/// Service routes whose service no task provides.
fn unserved(m: &Manifest) -> Vec<String> {
    let provided: BTreeSet<&str> = m
        .tasks
        .iter()
        .flat_map(|t| &t.ipc.provides)
        .map(|s| s.as_str())
        .collect();
    m.http
        .iter()
        .flat_map(|h| &h.routes)
        .filter_map(|r| match &r.handler {
            Handler::Service(s) if !provided.contains(s.as_str()) => Some(format!(
                "route {:?} calls service {s:?}, which no task provides",
                r.path
            )),
            _ => None,
        })
        .collect()
}

/// The line of the `memory_limit` of the entry `who` names (`task
/// "name"`, a copy `name.N` found by `name`; or `route "/path"`).
fn limit_line(text: &str, who: &str) -> Option<usize> {
    let (kind, quoted) = who.split_once(' ')?;
    let value = quoted.trim_matches('"');
    let (key, values) = match kind {
        "task" => (
            "name",
            vec![value, value.rsplit_once('.').map_or(value, |(b, _)| b)],
        ),
        _ => ("path", vec![value]),
    };
    let lines: Vec<&str> = text.lines().collect();
    let sets = |l: &str, v: &str| {
        l.trim_start()
            .strip_prefix(key)
            .map(|r| r.trim_start())
            .and_then(|r| r.strip_prefix('='))
            .map(|r| r.trim())
            .is_some_and(|r| r == format!("\"{v}\"") || r == format!("'{v}'"))
    };
    let at = lines
        .iter()
        .position(|l| values.iter().any(|v| sets(l, v)))?;
    let start = (0..=at)
        .rev()
        .find(|&i| lines[i].trim_start().starts_with('['))?;
    let mut entry =
        (start + 1..lines.len()).take_while(|&i| !lines[i].trim_start().starts_with('['));
    let limit = entry.find(|&i| lines[i].trim_start().starts_with("memory_limit"));
    Some(limit.unwrap_or(start) + 1)
}

/// The first line that names `module` (as written, relative to `base`).
fn line_naming(text: &str, module: &Path, base: &Path) -> Option<usize> {
    let written = module
        .strip_prefix(base)
        .unwrap_or(module)
        .to_string_lossy()
        .into_owned();
    let quoted = [format!("\"{written}\""), format!("'{written}'")];
    text.lines()
        .position(|l| quoted.iter().any(|q| l.contains(q.as_str())))
        .map(|i| i + 1)
}

/// `warden cluster config`: the broker's authorization for the nodes the
/// manifests describe.
pub fn cluster_config(manifests: &[std::path::PathBuf]) -> Result<(), String> {
    use warden::cluster_config::{broker_config, Member};
    let mut members = vec![];
    for path in manifests {
        let m = Manifest::load(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let spec = m
            .cluster
            .ok_or_else(|| format!("{}: no [cluster] section", path.display()))?;
        let mut exports: Vec<String> = m.tasks.iter().flat_map(|t| t.ipc.export.clone()).collect();
        exports.sort();
        exports.dedup();
        members.push(Member { spec, exports });
    }
    print!("{}", broker_config(&members)?);
    Ok(())
}

/// `warden cluster key`: a key pair per node, its seed in `dir/NODE.nk`,
/// its public half printed as a line of a `cluster.members` file.
pub fn cluster_keys(nodes: &[String], dir: &std::path::Path) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    for node in nodes {
        if !warden::cluster_config::valid_node(node) {
            return Err(format!(
                "{node:?} is not a node name (1 to 64 letters, digits, '-' or '_')"
            ));
        }
    }
    // The directory the seeds go to is made if need be, readable by its
    // owner only, as the seeds themselves are.
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?;
    for node in nodes {
        let key = nkeys::KeyPair::new_server();
        let seed = key.seed().map_err(|e| format!("{node}: {e}"))?;
        let path = dir.join(format!("{node}.nk"));
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        file.write_all(format!("{seed}\n").as_bytes())
            .map_err(|e| format!("{}: {e}", path.display()))?;
        println!("{node} = \"{}\"", key.public_key());
    }
    Ok(())
}
