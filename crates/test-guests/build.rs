//! Compiles every guest program under `guests/` into `$OUT_DIR`:
//! `.wat` files with the `wat` crate, `.c` files with clang for
//! `wasm32-wasi` (install: `apt-get install clang lld wasi-libc
//! libclang-rt-dev-wasm32`). Generates one `pub const` path per guest.

use std::path::{Path, PathBuf};
use std::process::Command;

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
                // A passive service is a reactor: no main, entered by its exports.
                let text = std::fs::read_to_string(&path).unwrap();
                let reactor = text.contains("WARDEN_PASSIVE_SERVICE(");
                let status = Command::new(&clang)
                    .args(["--target=wasm32-wasi", "-O2", "-Wall", "-Werror"])
                    .args(reactor.then_some("-mexec-model=reactor"))
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
    std::fs::write(out.join("guests.rs"), consts).unwrap();
}
