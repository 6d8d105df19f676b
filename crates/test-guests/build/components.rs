//! The component guests (WASI 0.2), built by the real toolchains through
//! `scripts/guest-build` (which installs them, pinned, on first use):
//!
//! - `guests/components/*.py` by componentize-py, `*.js` by
//!   componentize-js: `PY_COMMAND`, `PY_HTTP`, `JS_HTTP`;
//! - some of the C guests of `guests/`, compiled by clang and adapted by
//!   `wasm-tools component new` with Wasmtime's preview-1 adapter:
//!   `<NAME>_COMPONENT`;
//! - `GROW_COMPOSED`, a component with two memories: the command
//!   `grow_command.c` and the library `grow_library.c` (each given its
//!   world of `grow.wit` by `wasm-tools component embed`) composed by
//!   `wasm-tools compose`;
//! - `C_HTTP`, a wasi:http/proxy component in C without libc
//!   (`c_http.c`, given its world by `wasm-tools component embed`);
//! - the typed-service guests of `kv.wit`: `KV_SERVER` (a reactor
//!   exporting the store, wasi-libc's allocator, no WASI import),
//!   `KV_CLIENT` (a command importing it, adapted), and `KV_RENAMED`,
//!   `KV_FIELD`, `KV_PARAM` (`kv_probe.c` against a changed copy of the
//!   interface each), and `KV_COMPOSED` (the client and the server fused
//!   by `wasm-tools compose`: the typed-call benchmark's floor), and
//!   `COUNTER_SERVER` and `COUNTER_CLIENT` (a resource across calls;
//!   `COUNTERS_BORROWED`, the client against a changed interface), and
//!   `KERNEL_PROBE` (`warden:kernel` from a component);
//! - `components/*.wat` (hostile, hand-written) by the `wat` crate.

use std::path::Path;
use std::process::Command;

/// The C guests also built as components.
const ADAPTED: &[&str] = &["program", "files", "malloc_limit", "stdin_count", "noop"];

pub fn build(out: &Path, consts: &mut String, unbuilt: &mut String) {
    let dir = Path::new("guests/components");
    println!("cargo:rerun-if-changed=guests/components");
    println!("cargo:rerun-if-changed=../../sdk/wit");
    let mut put = |name: &str, what: &str, built: Result<std::path::PathBuf, String>| {
        let path = match built {
            Ok(p) => p.to_str().unwrap().to_string(),
            Err(why) => {
                println!("cargo:warning=cannot build {name}: {why}");
                unbuilt.push_str(&format!("({:?}, {:?}),\n", name.to_uppercase(), why));
                String::new()
            }
        };
        consts.push_str(&format!(
            "/// {what}\npub const {}: &str = {path:?};\n",
            name.to_uppercase()
        ));
    };
    for source in ["py_command.py", "py_http.py", "js_http.js"] {
        let (stem, lang) = source.rsplit_once('.').unwrap();
        let dest = out.join(format!("{stem}.wasm"));
        let built = guest_build(&[lang, dir.join(source).to_str().unwrap()], &dest);
        put(
            stem,
            &format!("`guests/components/{source}` as a component."),
            built,
        );
    }
    for name in ADAPTED {
        let core = out.join(format!("{name}.wasm"));
        let dest = out.join(format!("{name}_component.wasm"));
        let built = guest_build(&["component", core.to_str().unwrap()], &dest);
        let what = format!("`guests/{name}` adapted into a wasi:cli/command component.");
        put(&format!("{name}_component"), &what, built);
    }
    let c_http = c_component(dir, out, "c_http", &wit_dir(), "wasi:http/proxy");
    put(
        "c_http",
        "`guests/components/c_http.c` as a wasi:http/proxy component.",
        c_http,
    );
    typed(dir, out, &mut put);
    let composed = grow_composed(dir, out);
    put(
        "grow_composed",
        "`guests/components/grow_*.c` composed: a command component with two memories.",
        composed,
    );
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "wat") {
            let stem = path.file_stem().unwrap().to_str().unwrap().to_string();
            let dest = out.join(format!("{stem}.wasm"));
            let wasm = wat::parse_file(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            std::fs::write(&dest, wasm).unwrap();
            put(&stem, &format!("`guests/components/{stem}.wat`."), Ok(dest));
        }
    }
}

/// `scripts/guest-build ARGS… OUT`.
fn guest_build(args: &[&str], out: &Path) -> Result<std::path::PathBuf, String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/guest-build");
    run(Command::new(script).args(args).arg(out))?;
    Ok(out.to_path_buf())
}

/// Runs `cmd`; its stderr's last line if it fails.
fn run(cmd: &mut Command) -> Result<(), String> {
    let o = cmd.output().map_err(|e| format!("{cmd:?}: {e}"))?;
    if o.status.success() {
        return Ok(());
    }
    let err = String::from_utf8_lossy(&o.stderr);
    Err(err.trim().lines().last().unwrap_or("failed").to_string())
}

/// `scripts/guest-build --wasm-tools ARGS…`.
fn wasm_tools(args: &[&std::ffi::OsStr]) -> Result<(), String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/guest-build");
    run(Command::new(script).arg("--wasm-tools").args(args))
}

/// WASI 0.2's WIT (`scripts/guest-build --wit`).
fn wit_dir() -> std::path::PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/guest-build");
    let o = Command::new(script).arg("--wit").output();
    let text = o.map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    text.unwrap_or_default().into()
}

/// `dir/NAME.c`, compiled by clang without libc (so importing no WASI)
/// and given `world` of `wit` by `wasm-tools component embed`, made a
/// component: `out/NAME.wasm`.
fn c_component(
    dir: &Path,
    out: &Path,
    name: &str,
    wit: &Path,
    world: &str,
) -> Result<std::path::PathBuf, String> {
    let clang = std::env::var("WASM_CC").unwrap_or_else(|_| "clang".into());
    let core = out.join(format!("{name}.core.wasm"));
    run(Command::new(&clang)
        .args(["--target=wasm32-wasi", "-O2", "-nostdlib", "-Wl,--no-entry"])
        .arg(dir.join(format!("{name}.c")))
        .arg("-o")
        .arg(&core))?;
    embed_new(out, name, &core, wit, world, false)
}

/// The typed-service guests (see the module docs).
fn typed(
    dir: &Path,
    out: &Path,
    put: &mut dyn FnMut(&str, &str, Result<std::path::PathBuf, String>),
) {
    let wit = dir.join("kv.wit");
    let server = typed_core(dir, out, "kv_server", &["-mexec-model=reactor"])
        .and_then(|core| embed_new(out, "kv_server", &core, &wit, "server", false));
    // A reactor with its own _start: see kv_client.c.
    let entry = ["-mexec-model=reactor", "-nostartfiles", "-Wl,--no-entry"];
    let client = typed_core(dir, out, "kv_client", &entry)
        .and_then(|core| embed_new(out, "kv_client", &core, &wit, "client", true));
    let composed = match (&client, &server) {
        (Ok(c), Ok(s)) => kv_composed(out, c, s),
        _ => Err("kv_client or kv_server unbuilt".into()),
    };
    put(
        "kv_server",
        "`guests/components/kv_server.c`: serves warden-test:kv/store.",
        server,
    );
    put(
        "kv_client",
        "`guests/components/kv_client.c`: imports warden-test:kv/store.",
        client,
    );
    put(
        "kv_composed",
        "`KV_CLIENT` and `KV_SERVER` composed into one component by `wasm-tools compose`.",
        composed,
    );
    let relay = typed_core(dir, out, "kv_relay", &["-mexec-model=reactor"])
        .and_then(|core| embed_new(out, "kv_relay", &core, &wit, "relay", false));
    put(
        "kv_relay",
        "`guests/components/kv_relay.c`: serves warden-test:kv/front, calling on to the store.",
        relay,
    );
    let front = typed_core(dir, out, "kv_front_client", &entry)
        .and_then(|core| embed_new(out, "kv_front_client", &core, &wit, "front-client", true));
    put(
        "kv_front_client",
        "`guests/components/kv_front_client.c`: imports warden-test:kv/front.",
        front,
    );
    let counters = typed_core(dir, out, "counter_server", &["-mexec-model=reactor"])
        .and_then(|core| embed_new(out, "counter_server", &core, &wit, "counter-server", false));
    put(
        "counter_server",
        "`guests/components/counter_server.c`: serves warden-test:kv/counters (a resource).",
        counters,
    );
    let counters = typed_core(dir, out, "counter_client", &entry)
        .and_then(|core| embed_new(out, "counter_client", &core, &wit, "counter-client", true));
    put(
        "counter_client",
        "`guests/components/counter_client.c`: holds warden-test:kv/counters' counters.",
        counters,
    );
    let borrowed = typed_core(dir, out, "counter_client", &entry).and_then(|core| {
        let wit = dir.join("counters_borrowed.wit");
        embed_new(
            out,
            "counters_borrowed",
            &core,
            &wit,
            "counter-client",
            true,
        )
    });
    put(
        "counters_borrowed",
        "`guests/components/counter_client.c` importing `counters_borrowed.wit`'s counters.",
        borrowed,
    );
    let careful = typed_core(dir, out, "careful_client", &entry)
        .and_then(|core| embed_new(out, "careful_client", &core, &wit, "careful-client", true));
    put(
        "careful_client",
        "`guests/components/careful_client.c`: calls warden-test:kv/careful.",
        careful,
    );
    let kernel = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../sdk/wit/kernel.wit");
    let probe = typed_core(dir, out, "kernel_probe", &entry)
        .and_then(|core| embed_new(out, "kernel_probe", &core, &kernel, "kernel", true));
    put(
        "kernel_probe",
        "`guests/components/kernel_probe.c`: warden:kernel from a component.",
        probe,
    );
    for (name, define) in [("renamed", "FETCH"), ("field", "ENTRIES"), ("param", "SET")] {
        let stem = format!("kv_{name}");
        let flag = format!("-DPROBE_{define}");
        let built = typed_core(dir, out, "kv_probe", &[&flag]).and_then(|core| {
            let wit = dir.join(format!("{stem}.wit"));
            embed_new(out, &stem, &core, &wit, "client", true)
        });
        let what = format!("`guests/components/kv_probe.c` importing `{stem}.wit`'s store.");
        put(&stem, &what, built);
    }
}

/// `dir/NAME.c` compiled by clang with wasi-libc (and `flags`).
fn typed_core(
    dir: &Path,
    out: &Path,
    name: &str,
    flags: &[&str],
) -> Result<std::path::PathBuf, String> {
    let clang = std::env::var("WASM_CC").unwrap_or_else(|_| "clang".into());
    let core = out.join(format!(
        "{name}{}.core.wasm",
        flags.concat().replace('=', "")
    ));
    run(Command::new(&clang)
        .args(["--target=wasm32-wasi", "-O2", "-Wall", "-Werror"])
        .args(flags)
        .arg(dir.join(format!("{name}.c")))
        .arg("-o")
        .arg(&core))?;
    Ok(core)
}

/// `core` given `world` of `wit`, made the component `out/STEM.wasm`
/// (adapted as a command if `command`).
fn embed_new(
    out: &Path,
    stem: &str,
    core: &Path,
    wit: &Path,
    world: &str,
    command: bool,
) -> Result<std::path::PathBuf, String> {
    let embedded = out.join(format!("{stem}.embedded.wasm"));
    let dest = out.join(format!("{stem}.wasm"));
    let os = |s: &'static str| std::ffi::OsStr::new(s);
    wasm_tools(&[
        os("component"),
        os("embed"),
        wit.as_os_str(),
        os("--world"),
        world.as_ref(),
        core.as_os_str(),
        os("-o"),
        embedded.as_os_str(),
    ])?;
    if command {
        return guest_build(&["component", embedded.to_str().unwrap()], &dest);
    }
    wasm_tools(&[
        os("component"),
        os("new"),
        embedded.as_os_str(),
        os("-o"),
        dest.as_os_str(),
    ])?;
    Ok(dest)
}

/// The client fused with the server by `wasm-tools compose`: one
/// instance, no boundary (the typed-call benchmark's floor).
fn kv_composed(out: &Path, client: &Path, server: &Path) -> Result<std::path::PathBuf, String> {
    // `compose` names a definition by its file's stem, in kebab case.
    let definition = out.join("kv-server.wasm");
    std::fs::copy(server, &definition).map_err(|e| e.to_string())?;
    compose(client, &definition, &out.join("kv_composed.wasm"))
}

/// `command` with its import satisfied by `definition` (named by its
/// file's stem, in kebab case), fused by `wasm-tools compose` into `dest`.
fn compose(command: &Path, definition: &Path, dest: &Path) -> Result<std::path::PathBuf, String> {
    let os = std::ffi::OsStr::new;
    wasm_tools(&[
        os("compose"),
        command.as_os_str(),
        os("-d"),
        definition.as_os_str(),
        os("-o"),
        dest.as_os_str(),
    ])?;
    Ok(dest.to_path_buf())
}

/// The two-memory composition (see the module docs).
fn grow_composed(dir: &Path, out: &Path) -> Result<std::path::PathBuf, String> {
    let wit = dir.join("grow.wit");
    // `compose` names a definition by its file's stem, in kebab case.
    let library = c_component(dir, out, "grow_library", &wit, "library")?;
    let definition = out.join("grow-library.wasm");
    std::fs::rename(&library, &definition).map_err(|e| e.to_string())?;
    let clang = std::env::var("WASM_CC").unwrap_or_else(|_| "clang".into());
    let (core, embedded) = (
        out.join("grow_command.core.wasm"),
        out.join("grow_command.embedded.wasm"),
    );
    run(Command::new(&clang)
        .args(["--target=wasm32-wasi", "-O2"])
        .arg(dir.join("grow_command.c"))
        .arg("-o")
        .arg(&core))?;
    let os = |s: &'static str| std::ffi::OsStr::new(s);
    wasm_tools(&[
        os("component"),
        os("embed"),
        wit.as_os_str(),
        os("--world"),
        os("command"),
        core.as_os_str(),
        os("-o"),
        embedded.as_os_str(),
    ])?;
    let command = guest_build(
        &["component", embedded.to_str().unwrap()],
        &out.join("grow_command.wasm"),
    )?;
    compose(&command, &definition, &out.join("grow_composed.wasm"))
}
