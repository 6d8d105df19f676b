//! Compiles every guest program under `guests/` into `$OUT_DIR`:
//! `.wat` files with the `wat` crate, `.c` files with clang for
//! `wasm32-wasi` (install: `apt-get install clang lld wasi-libc
//! libclang-rt-dev-wasm32`), each Java class with a `main` under
//! `guests/java/` with `scripts/guest-build java` (javac and TeaVM), and
//! the components of `guests/components/` (see [`components`]).
//! Generates one `pub const` path per guest. A Java guest or a component
//! that cannot be built (no JDK, no network for its toolchain) becomes an
//! empty path and a reason in `UNBUILT`: the tests that need it fail with
//! that reason, and the rest still build and run.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "build/components.rs"]
mod components;

fn main() {
    let out = PathBuf::from(std::env::var_os("OUT_DIR").unwrap());
    let src = Path::new("guests");
    println!("cargo:rerun-if-changed=guests");
    println!("cargo:rerun-if-changed=../../sdk/c");
    let sdk = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../sdk/c");
    let clang = std::env::var("WASM_CC").unwrap_or_else(|_| "clang".into());
    println!("cargo:rerun-if-env-changed=WASM_CC");
    let mut entries: Vec<_> = std::fs::read_dir(src)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    let mut consts = String::new();
    for path in entries {
        let stem = path.file_stem().unwrap().to_str().unwrap().to_string();
        let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
        let dest = out.join(format!("{stem}.wasm"));
        match ext {
            "wat" => {
                let wasm =
                    wat::parse_file(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                std::fs::write(&dest, wasm).unwrap();
            }
            "c" => {
                // A passive service is a reactor: no main, entered by its
                // exports. Its handler copies every reply into the buffer
                // the kernel lends it; bulk memory makes that copy one
                // `memory.copy` (a native memmove), not a loop in Wasm.
                let text = std::fs::read_to_string(&path).unwrap();
                let reactor = text.contains("WARDEN_PASSIVE_SERVICE(");
                let status = Command::new(&clang)
                    .args(["--target=wasm32-wasi", "-O2", "-Wall", "-Werror"])
                    .args(if reactor {
                        &["-mexec-model=reactor", "-mbulk-memory"][..]
                    } else {
                        &[]
                    })
                    .arg("-I")
                    .arg(&sdk)
                    .arg(&path)
                    .arg("-o")
                    .arg(&dest)
                    .status()
                    .unwrap_or_else(|e| {
                        panic!(
                            "cannot run {clang} to build {}: {e}\n\
                             install the C guest toolchain: apt-get install -y clang lld \
                             wasi-libc libclang-rt-dev-wasm32",
                            path.display()
                        )
                    });
                assert!(status.success(), "{clang} failed on {}", path.display());
            }
            _ => continue,
        }
        consts.push_str(&format!(
            "/// `guests/{}` compiled.\npub const {}: &str = {:?};\n",
            path.file_name().unwrap().to_str().unwrap(),
            stem.to_uppercase(),
            dest.to_str().unwrap()
        ));
    }
    services(&out, &sdk, &clang, &mut consts);
    let mut unbuilt = String::new();
    java(&out, &mut consts, &mut unbuilt);
    components::build(&out, &mut consts, &mut unbuilt);
    consts.push_str(&format!(
        "/// Guests that could not be built, with the reason.\n\
         pub const UNBUILT: &[(&str, &str)] = &[{unbuilt}];\n"
    ));
    std::fs::write(out.join("guests.rs"), consts).unwrap();
}

/// Builds each service under the repository's `services/` (every C file
/// of its directory, with the C SDK) into `<name>.wasm`: `EXT2`, ….
fn services(out: &Path, sdk: &Path, clang: &str, consts: &mut String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../services");
    println!("cargo:rerun-if-changed=../../services");
    let mut dirs: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    for dir in dirs {
        let name = dir.file_name().unwrap().to_str().unwrap().to_string();
        let mut sources: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "c"))
            .collect();
        sources.sort();
        let dest = out.join(format!("{name}.wasm"));
        // A service copies blocks and replies; bulk memory makes each
        // copy one `memory.copy` (a native memmove), not libc's loop of
        // 4-byte loads and stores in Wasm.
        let status = Command::new(clang)
            .args([
                "--target=wasm32-wasi",
                "-O2",
                "-mbulk-memory",
                "-Wall",
                "-Werror",
                "-I",
            ])
            .arg(sdk)
            .args(&sources)
            .arg("-o")
            .arg(&dest)
            .status()
            .unwrap_or_else(|e| panic!("cannot run {clang} to build services/{name}: {e}"));
        assert!(status.success(), "{clang} failed on services/{name}");
        consts.push_str(&format!(
            "/// `services/{name}` compiled.\npub const {}: &str = {:?};\n",
            name.to_uppercase(),
            dest.to_str().unwrap()
        ));
    }
}

/// Builds each class with a `main` under `guests/java` (all the directory's
/// sources together, with the Java SDK) into `java_<name>.wasm`.
fn java(out: &Path, consts: &mut String, unbuilt: &mut String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    println!("cargo:rerun-if-changed=../../sdk/java");
    println!("cargo:rerun-if-changed=../../scripts/guest-build");
    let dir = Path::new("guests/java");
    let mut classes: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| std::fs::read_to_string(p).is_ok_and(|t| t.contains("static void main")))
        .collect();
    classes.sort();
    for path in classes {
        let class = path.file_stem().unwrap().to_str().unwrap();
        let name = snake(class);
        let dest = out.join(format!("{name}.wasm"));
        let built = Command::new(root.join("scripts/guest-build"))
            .args(["java", dir.to_str().unwrap(), class])
            .arg(&dest)
            .output();
        let path_text = match built {
            Ok(o) if o.status.success() => dest.to_str().unwrap().to_string(),
            Ok(o) => {
                let why = String::from_utf8_lossy(&o.stderr).trim().to_string();
                println!("cargo:warning=cannot build {class}: {why}");
                unbuilt.push_str(&format!("({:?}, {:?}),\n", name.to_uppercase(), why));
                String::new()
            }
            Err(e) => panic!("scripts/guest-build: {e}"),
        };
        consts.push_str(&format!(
            "/// `guests/java/{class}.java` compiled by TeaVM.\npub const {}: &str = {:?};\n",
            name.to_uppercase(),
            path_text
        ));
    }
}

/// `JavaKit` as `java_kit`.
fn snake(class: &str) -> String {
    let mut s = String::new();
    for (i, c) in class.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            s.push('_');
        }
        s.push(c.to_ascii_lowercase());
    }
    s
}
