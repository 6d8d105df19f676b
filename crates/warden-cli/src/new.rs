//! `warden new KIND NAME`: a working starting point in a new directory.
//!
//! Each kind's sources are files under `crates/warden-cli/templates/`, with
//! `@NAME@` standing for the project's name; the SDK files a project
//! needs (the C header, the Java SDK and its TeaVM driver) are copied in
//! from `sdk/`, so the project builds with nothing from Warden's source
//! tree: `./build`, then the `warden run` line its README gives.

use crate::cli::NewKind;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// A file of a project: its path in the project, its text, and whether
/// it is a script to run.
type File = (&'static str, &'static str, bool);

/// A file of Warden's SDK, copied into a project under `sdk/`:
/// `sdk_file!("java/build", true)` is `sdk/java/build`, a script.
macro_rules! sdk_file {
    ($path:literal, $exe:literal) => {
        (
            concat!("sdk/", $path),
            include_str!(concat!("../../../sdk/", $path)),
            $exe,
        )
    };
}

const C_HEADER: File = ("warden.h", include_str!("../../../sdk/c/warden.h"), false);

const JAVA_SDK: &[File] = &[
    sdk_file!("java/build", true),
    sdk_file!("java/tools/Compile.java", false),
    sdk_file!("java/tools/Fetch.java", false),
    sdk_file!("java/tools/teavm.deps", false),
    sdk_file!("java/src/warden/Abi.java", false),
    sdk_file!("java/src/warden/MemoryObject.java", false),
    sdk_file!("java/src/warden/Portal.java", false),
    sdk_file!("java/src/warden/Request.java", false),
    sdk_file!("java/src/warden/Service.java", false),
    sdk_file!("java/src/warden/Socket.java", false),
    sdk_file!("java/src/warden/Task.java", false),
    sdk_file!("java/src/warden/WardenException.java", false),
];

/// What `warden new` writes for one kind.
struct Kind {
    /// One line for the README's title and the command's output.
    what: &'static str,
    /// The project's own sources: path and text.
    files: &'static [(&'static str, &'static str)],
    /// The commands `./build` runs, after its common preamble.
    build: &'static str,
    /// How to run it, and what it prints.
    run: &'static str,
    /// Whether the C header or the Java SDK comes along.
    sdk: Sdk,
}

#[derive(PartialEq)]
enum Sdk {
    None,
    C,
    Java,
}

const C_BUILD: &str = "\
# Needs clang with a wasm32-wasi target and wasi-libc (Debian: apt-get
# install clang lld wasi-libc libclang-rt-dev-wasm32). WASM_CC chooses
# another clang (a wasi-sdk's, say).
set -eu
cd \"$(dirname \"$0\")\"
cc=${WASM_CC:-clang}
";

const JAVA_BUILD: &str = "\
# Needs a JDK, 17 or later (Debian: apt-get install default-jdk-headless);
# TeaVM's jars are fetched from Maven Central on the first build, checked
# against sdk/java/tools/teavm.deps, and cached.
set -eu
cd \"$(dirname \"$0\")\"
";

/// A template's path in the project and its text:
/// `template!("service", "client.c")` is `templates/service/client.c`.
macro_rules! template {
    ($kind:literal, $path:literal) => {
        (
            $path,
            include_str!(concat!("../templates/", $kind, "/", $path)),
        )
    };
}

const C: Kind = Kind {
    what: "a C program",
    files: &[template!("c", "main.c")],
    build: "\"$cc\" --target=wasm32-wasi -O2 -Wall -o @NAME@.wasm main.c\n",
    run: "warden run @NAME@.wasm --memory-limit 16MiB --env GREETING=Hi -- you\n\
          # prints: Hi, you, from @NAME@",
    sdk: Sdk::None,
};

const SERVICE: Kind = Kind {
    what: "a C service and its client, with a manifest",
    files: &[
        template!("service", "service.c"),
        template!("service", "client.c"),
        template!("service", "warden.toml"),
    ],
    build: "for part in service client; do\n    \
            \"$cc\" --target=wasm32-wasi -O2 -Wall -I. -o \"$part.wasm\" \"$part.c\"\n\
            done\n",
    run: "warden run warden.toml\n\
          # prints: client: hello, ada (call 1) … service: answered 3 calls",
    sdk: Sdk::C,
};

const WAGI: Kind = Kind {
    what: "an HTTP handler run as a fresh task per request (WAGI)",
    files: &[
        template!("wagi", "handler.c"),
        template!("wagi", "warden.toml"),
    ],
    build: "\"$cc\" --target=wasm32-wasi -O2 -Wall -o handler.wasm handler.c\n",
    run: "warden run warden.toml &\n\
          curl http://127.0.0.1:8080/hi\n\
          # prints: Hello from @NAME@: GET /hi",
    sdk: Sdk::None,
};

const SERVLET: Kind = Kind {
    what: "an HTTP servlet: one long-lived task answering every request",
    files: &[
        template!("servlet", "servlet.c"),
        template!("servlet", "warden.toml"),
    ],
    build: "\"$cc\" --target=wasm32-wasi -O2 -Wall -I. -o servlet.wasm servlet.c\n",
    run: "warden run warden.toml &\n\
          curl http://127.0.0.1:8080/hi\n\
          # prints: Hello from @NAME@: GET /hi, request 1",
    sdk: Sdk::C,
};

const JAVA: Kind = Kind {
    what: "a Java program (TeaVM and Warden's Java SDK)",
    files: &[template!("java", "src/Main.java")],
    build: "sdk/java/build src Main @NAME@.wasm\n",
    run: "warden run @NAME@.wasm --memory-limit 64MiB --env GREETING=Hi -- you\n\
          # prints: Hi, you, from @NAME@",
    sdk: Sdk::Java,
};

fn kind(k: NewKind) -> &'static Kind {
    match k {
        NewKind::C => &C,
        NewKind::Service => &SERVICE,
        NewKind::Wagi => &WAGI,
        NewKind::Servlet => &SERVLET,
        NewKind::Java => &JAVA,
    }
}

/// Writes a new project of kind `k` into `dir` (which must not exist, or
/// be empty), named after the directory's last component.
pub fn new(k: NewKind, dir: &Path) -> Result<(), String> {
    let name = project_name(dir)?;
    if fs::read_dir(dir).map_or(false, |mut d| d.next().is_some()) {
        return Err(format!("{}: exists and is not empty", dir.display()));
    }
    let kind = kind(k);
    let mut files: Vec<(String, String, bool)> = kind
        .files
        .iter()
        .map(|&(path, text)| (path.to_string(), text.replace("@NAME@", name), false))
        .collect();
    match kind.sdk {
        Sdk::None => {}
        Sdk::C => files.push(owned(C_HEADER)),
        Sdk::Java => files.extend(JAVA_SDK.iter().copied().map(owned)),
    }
    files.push(("build".into(), build_script(&kind, name), true));
    files.push(("README.md".into(), readme(&kind, name), false));
    files.push((".gitignore".into(), "*.wasm\n".into(), false));
    for (path, text, exe) in &files {
        write(&dir.join(path), text, *exe)?;
    }
    println!("created {}: {} named {name}", dir.display(), kind.what);
    println!("next:\n  cd {}\n  ./build", dir.display());
    for line in kind.run.replace("@NAME@", name).lines() {
        println!("  {line}");
    }
    Ok(())
}

fn owned((path, text, exe): File) -> (String, String, bool) {
    (path.to_string(), text.to_string(), exe)
}

/// The directory's last component, which names the module, the service
/// and the route: a letter, then letters, digits, `-` or `_`.
fn project_name(dir: &Path) -> Result<&str, String> {
    let name = dir
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| format!("{}: not a directory name", dir.display()))?;
    let ok = name.len() <= 64
        && name.starts_with(|c: char| c.is_ascii_alphabetic())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !ok {
        return Err(format!(
            "{name:?}: a project's name is a letter, then up to 63 letters, digits, '-' or '_' \
             (it names the module and the service)"
        ));
    }
    Ok(name)
}

fn build_script(kind: &Kind, name: &str) -> String {
    let (head, sdk) = match kind.sdk {
        Sdk::Java => (JAVA_BUILD, " with sdk/java/build"),
        _ => (C_BUILD, ""),
    };
    format!(
        "#!/bin/sh\n# Builds {name}'s WebAssembly code{sdk}.\n{head}{}",
        kind.build.replace("@NAME@", name)
    )
}

fn readme(kind: &Kind, name: &str) -> String {
    let sources: Vec<String> = kind.files.iter().map(|f| format!("`{}`", f.0)).collect();
    let sdk = match kind.sdk {
        Sdk::None => "",
        Sdk::C => "`warden.h` is Warden's C SDK (the `warden` import module), copied here.\n",
        Sdk::Java => {
            "`sdk/java` is Warden's Java SDK (package `warden`) and its TeaVM driver, \
             copied here.\n"
        }
    };
    format!(
        "# {name}\n\n{}, made by `warden new`.\n\nSources: {}. {sdk}\n\
         ## Build and run\n\n```sh\n./build\n{}\n```\n\n\
         Warden's tutorial (`doc/tutorial.md` in its source) goes on from here.\n",
        capitalised(kind.what),
        sources.join(", "),
        kind.run.replace("@NAME@", name)
    )
}

fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

/// Writes one file, never over an existing one.
fn write(path: &Path, text: &str, executable: bool) -> Result<(), String> {
    let fail = |e: std::io::Error| format!("{}: {e}", path.display());
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).map_err(fail)?;
    }
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(if executable { 0o755 } else { 0o644 })
        .open(path)
        .map_err(fail)?;
    f.write_all(text.as_bytes()).map_err(fail)?;
    if executable {
        // The umask may have taken the execute bits away.
        fs::set_permissions(path, fs::Permissions::from_mode(0o755)).map_err(fail)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert_eq!(project_name(Path::new("a/b/hello-1")), Ok("hello-1"));
        for bad in ["1x", "a b", "..", "é", "-a", "a.b"] {
            let p = Path::new(bad);
            if p.file_name().is_some() {
                assert!(project_name(p).is_err(), "{bad}");
            }
        }
    }

    #[test]
    fn a_non_empty_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("proj");
        fs::create_dir(&p).unwrap();
        fs::write(p.join("keep"), "x").unwrap();
        let e = new(NewKind::C, &p).unwrap_err();
        assert!(e.contains("not empty"), "{e}");
        assert_eq!(fs::read_to_string(p.join("keep")).unwrap(), "x");
    }
}
