//! The `[[device]]` sections: block devices, each a host file (or raw
//! device), and the tasks they are granted to.
//!
//! ```toml
//! [[device]]
//! name = "disk0"               # the name tasks' `devices` grant
//! file = "disk.img"            # relative to the manifest
//! size = "256MiB"              # created this large if missing; else the
//!                              # file must be this large (default: its size)
//!
//! [[task]]
//! name = "fs"
//! module = "ext2.wasm"
//! devices = ["disk0"]          # at most one task entry per device
//! ```

use super::*;
use crate::dev::{DeviceSpec, SECTOR};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDevice {
    name: String,
    file: String,
    size: Option<String>,
}

/// The devices of the `[[device]]` entries; each bad one is a problem.
pub(super) fn devices(
    raw: Vec<RawDevice>,
    base: &Path,
    problems: &mut Vec<String>,
) -> Vec<DeviceSpec> {
    let mut out: Vec<DeviceSpec> = Vec::new();
    for (i, d) in raw.into_iter().enumerate() {
        let at = format!("device[{i}] ({:?})", d.name);
        match device(d, base) {
            Ok(spec) if out.iter().any(|o| o.name == spec.name) => {
                problems.push(format!("{at}: duplicate device name {:?}", spec.name))
            }
            Ok(spec) => out.push(spec),
            Err(e) => problems.push(format!("{at}: {e}")),
        }
    }
    out
}

fn device(d: RawDevice, base: &Path) -> Result<DeviceSpec, String> {
    if d.name.is_empty()
        || d.name
            .chars()
            .any(|c| c.is_control() || c.is_whitespace() || c == '"')
    {
        return Err("name: must be non-empty, without spaces, quotes or control characters".into());
    }
    let mut spec = DeviceSpec::new(d.name, base.join(&d.file));
    if let Some(text) = &d.size {
        let size = parse_size(text).map_err(|e| format!("size: {e}"))?;
        if size == 0 || size % SECTOR != 0 {
            return Err(format!(
                "size: must be a positive multiple of {SECTOR} bytes"
            ));
        }
        spec.size = Some(size);
    }
    match std::fs::metadata(&spec.file) {
        Ok(meta) if meta.is_file() => match spec.size {
            Some(size) if meta.len() != size => Err(format!(
                "file: {} is {} bytes, not its size ({size})",
                spec.file.display(),
                meta.len()
            )),
            _ => Ok(spec),
        },
        Ok(_) => Ok(spec),
        Err(_) if spec.size.is_some() => Ok(spec),
        Err(e) => Err(format!(
            "file: {}: {e} (give a size to create it)",
            spec.file.display()
        )),
    }
}

/// Every task's `devices` names a `[[device]]`, and no device is granted
/// to two tasks (nor to one entry's several copies).
pub(super) fn check_grants(tasks: &[TaskSpec], devices: &[DeviceSpec], problems: &mut Vec<String>) {
    let mut holder: BTreeMap<&str, &str> = BTreeMap::new();
    for t in tasks {
        for name in &t.ipc.devices {
            if !devices.iter().any(|d| &d.name == name) {
                problems.push(format!(
                    "task {:?}: devices: no [[device]] named {name:?}",
                    t.name
                ));
            } else if let Some(other) = holder.insert(name, &t.name) {
                problems.push(format!(
                    "task {:?}: devices: {name:?} is granted to {other:?} already (a device \
                     is held by one task)",
                    t.name
                ));
            }
        }
    }
}
