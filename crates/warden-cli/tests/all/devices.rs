//! Block devices: a task granted a device reads and writes its sectors in
//! the host file, nobody else reaches it, one task holds it at a time,
//! and operators see what was done to it.

use crate::util::{self, guests, manifest, warden, Launch};
use std::time::Duration;
use warden::{DeviceSpec, Runtime, RuntimeConfig, TaskSpec};

/// A runtime with one device, `disk0`, of `size` bytes at `dir/disk.img`.
fn runtime(dir: &std::path::Path, size: u64) -> Runtime {
    let mut spec = DeviceSpec::new("disk0", dir.join("disk.img"));
    spec.size = Some(size);
    Runtime::new(RuntimeConfig {
        workers: 2,
        cache_dir: None,
        max_tasks: 64,
        devices: vec![spec],
        ..RuntimeConfig::default()
    })
    .unwrap()
}

fn device_task(dir: &std::path::Path, name: &str, args: &[&str], granted: bool) -> TaskSpec {
    let mut s = util::spec(dir, name, guests::DEVICE);
    s.args = args.iter().map(|a| a.to_string()).collect();
    if granted {
        s.ipc.devices = vec!["disk0".into()];
    }
    s
}

/// The byte pattern `device.c` writes.
fn pattern(n: usize, seed: u64) -> Vec<u8> {
    (0..n as u64)
        .map(|i| ((seed + i * 31) & 0xff) as u8)
        .collect()
}

#[test]
fn a_granted_task_reads_and_writes_the_host_file() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(dir.path(), 1 << 20);
    let spec = device_task(dir.path(), "check", &["check", "disk0"], true);
    let r = util::run_one(&rt, &spec, Duration::from_secs(30));
    assert_eq!(
        util::stdout_of(dir.path(), "check"),
        "device ok 2048\n",
        "{r:?}"
    );
    let file = std::fs::read(dir.path().join("disk.img")).unwrap();
    assert_eq!(file.len(), 1 << 20);
    assert_eq!(&file[..512], &pattern(512, 1)[..]);
    assert_eq!(&file[file.len() - 512..], &pattern(512, 2)[..]);
    assert_eq!(
        &file[1024 * 512..1024 * 512 + 65536],
        &pattern(65536, 3)[..]
    );
    // Three writes and two reads succeeded; the task and the device say so.
    assert_eq!((r.device_writes, r.device_reads), (3, 2), "{r:?}");
    assert_eq!(r.device_written_bytes, 1024 + 65536);
    let d = &rt.devices()[0];
    assert_eq!(
        (d.writes, d.reads, d.syncs, d.claimed),
        (3, 2, 1, false),
        "{d:?}"
    );
}

#[test]
fn only_its_holder_reaches_a_device_and_it_is_free_after_the_holder_ends() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime(dir.path(), 64 << 10);
    let stranger = device_task(dir.path(), "stranger", &["open", "disk0"], false);
    util::run_one(&rt, &stranger, Duration::from_secs(30));
    assert_eq!(util::stdout_of(dir.path(), "stranger"), "open: denied\n");
    let holder = rt
        .spawn(&device_task(dir.path(), "holder", &["open", "disk0"], true))
        .unwrap();
    util::wait_for_output(dir.path(), "holder", "holding");
    let second = device_task(dir.path(), "second", &["open", "disk0"], true);
    util::run_one(&rt, &second, Duration::from_secs(30));
    assert_eq!(util::stdout_of(dir.path(), "second"), "open: busy\n");
    assert!(rt.devices()[0].claimed);
    rt.kill(holder, "by the test").unwrap();
    util::wait(&rt, holder, Duration::from_secs(30));
    assert!(!rt.devices()[0].claimed);
    let fill = device_task(dir.path(), "fill", &["fill", "disk0", "9"], true);
    let r = util::run_one(&rt, &fill, Duration::from_secs(30));
    assert_eq!(r.exit_code, Some(0), "{r:?}");
    assert!(std::fs::read(dir.path().join("disk.img"))
        .unwrap()
        .iter()
        .all(|&b| b == 9));
}

#[test]
fn operators_see_each_device() {
    let dir = tempfile::tempdir().unwrap();
    let device = |name: &str| {
        format!("[[device]]\nname = \"{name}\"\nfile = \"{name}.img\"\nsize = \"1MiB\"\n")
    };
    let task = |name: &str, args: &str, dev: &str| {
        format!(
            "[[task]]\nname = \"{name}\"\nmodule = \"{}\"\nargs = [{args}]\n\
             devices = [\"{dev}\"]\nstdout = \"{name}.out\"\n",
            guests::DEVICE
        )
    };
    let text = format!(
        "{}{}{}{}",
        device("disk0"),
        device("disk1"),
        task("check", "\"check\", \"disk0\"", "disk0"),
        // Holds disk1 until the system is stopped.
        task("hold", "\"open\", \"disk1\"", "disk1"),
    );
    let path = manifest(dir.path(), &text);
    let system = Launch::new(&path)
        .with(|c| {
            c.current_dir(dir.path());
        })
        .start();
    let control = system.control();
    util::wait_for_output(dir.path(), "check", "device ok");
    util::wait_for_output(dir.path(), "hold", "holding");
    let devices: serde_json::Value =
        serde_json::from_str(&util::get_body(control, "/api/devices")).unwrap();
    let disk0 = &devices[0];
    assert_eq!(
        (
            &disk0["name"],
            &disk0["sectors"],
            &disk0["claimed"],
            &disk0["writes"]
        ),
        (&"disk0".into(), &2048.into(), &false.into(), &3.into()),
        "{devices}"
    );
    assert_eq!(devices[1]["claimed"], true, "{devices}");
    let metrics = util::get_body(control, "/metrics");
    for line in [
        "warden_device_writes_total{device=\"disk0\"} 3",
        "warden_device_read_bytes_total{device=\"disk0\"} 66048",
        "warden_device_claimed{device=\"disk1\"} 1",
    ] {
        assert!(metrics.contains(line), "{line} not in {metrics}");
    }
    let ps = warden()
        .args(["ps", "--control", control])
        .output()
        .unwrap();
    let ps = String::from_utf8_lossy(&ps.stdout);
    let row = |name: &str| {
        ps.lines()
            .find(|l| l.starts_with(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} in {ps}"))
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    assert!(
        row("disk0").starts_with("disk0 1.0 MiB no 2 "),
        "{}",
        row("disk0")
    );
    assert!(
        row("disk1").starts_with("disk1 1.0 MiB yes 0 "),
        "{}",
        row("disk1")
    );
}

#[test]
fn manifests_name_what_is_wrong_with_a_device() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("small.img"), [0u8; 1024]).unwrap();
    let module = guests::DEVICE;
    for (extra, says) in [
        ("[[device]]\nname = \"d\"\nfile = \"absent.img\"\n", "give a size to create it"),
        ("[[device]]\nname = \"d\"\nfile = \"small.img\"\nsize = \"2KiB\"\n", "is 1024 bytes, not its size"),
        ("[[device]]\nname = \"d\"\nfile = \"x.img\"\nsize = \"1000\"\n", "multiple of 512"),
        ("[[task]]\nname = \"t2\"\nmodule = \"M\"\ndevices = [\"d\"]\n[[device]]\nname = \"d\"\nfile = \"small.img\"\n", "granted to \"t\" already"),
        ("", "no [[device]] named \"d\""),
    ] {
        let text = format!(
            "[[task]]\nname = \"t\"\nmodule = \"{module}\"\ndevices = [\"d\"]\n{}",
            extra.replace("M", module)
        );
        let out = warden().arg("check").arg(manifest(dir.path(), &text)).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{err}");
        assert!(err.contains(says), "{says:?} not in {err}");
    }
}
