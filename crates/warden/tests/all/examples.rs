//! The IPC examples under `examples/` build and run as their manifests say.

use crate::util::*;
use std::path::Path;

#[test]
fn echo_kv_and_pipeline_examples() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let built = std::process::Command::new(root.join("scripts/build-examples"))
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let run = |name: &str| {
        let manifest = root.join(format!("examples/{name}/{name}.toml"));
        let out = warden()
            .args(["run", "--no-cache"])
            .arg(&manifest)
            .output()
            .unwrap();
        let stdout = String::from_utf8(out.stdout).unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{name}: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    };
    let echo = run("echo");
    assert_eq!(echo.matches("1000 echoes checked").count(), 4, "{echo}");
    assert!(echo.contains("[server] served 4004 calls"), "{echo}");

    let kv = run("kv");
    assert_eq!(kv.matches("200 keys written, 100 left").count(), 8, "{kv}");
    assert!(
        kv.contains("[kv] 5608 operations, 800 entries left"),
        "{kv}"
    );

    let pipeline = run("pipeline");
    for want in [
        "[sink] received 22 words, starting \"MEMORY OBJECTS MOVE \"",
        "[source] revoked the object: old handle revoked, fresh handle works",
        "[filter] after the source revoked it, my handle: revoked",
        "[sink] after the source revoked it, my handle: revoked",
        "[source] result: MEMORY OBJECTS MOVE BETWEEN TASKS",
    ] {
        assert!(pipeline.contains(want), "{want:?} missing from {pipeline}");
    }
}
