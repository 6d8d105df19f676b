//! Block devices and file services as operators see them: `GET
//! /api/devices` and `GET /api/file-services` (JSON), and the
//! `warden_device_*` and `warden_file_service_*` series of `/metrics`.

use crate::runtime::Runtime;
use std::fmt::Write as _;

/// Every device with its counters.
pub(super) fn list(rt: &Runtime) -> serde_json::Value {
    serde_json::to_value(rt.devices()).unwrap_or_default()
}

/// Every file service with its counters.
pub(super) fn file_services(rt: &Runtime) -> serde_json::Value {
    serde_json::to_value(rt.file_services()).unwrap_or_default()
}

/// The `warden_file_service_*` series, one per file service.
pub(super) fn file_service_metrics(rt: &Runtime, out: &mut String) {
    let services = rt.file_services();
    if services.is_empty() {
        return;
    }
    type Value = fn(&crate::FileServiceView) -> u64;
    let series: [(&str, &str, &str, Value); 5] = [
        (
            "warden_file_service_ops_total",
            "counter",
            "Requests sent.",
            |f| f.ops,
        ),
        (
            "warden_file_service_errors_total",
            "counter",
            "Requests failed.",
            |f| f.errors,
        ),
        (
            "warden_file_service_read_bytes_total",
            "counter",
            "Bytes read.",
            |f| f.read_bytes,
        ),
        (
            "warden_file_service_written_bytes_total",
            "counter",
            "Bytes written.",
            |f| f.written_bytes,
        ),
        (
            "warden_file_service_clients",
            "gauge",
            "Tasks it serves directories of.",
            |f| f.clients as u64,
        ),
    ];
    for (name, kind, help, value) in series {
        let _ = writeln!(
            out,
            "# HELP {name} {help} (by file service)\n# TYPE {name} {kind}"
        );
        for f in &services {
            let _ = writeln!(out, "{name}{{service=\"{}\"}} {}", f.name, value(f));
        }
    }
}

/// The `warden_device_*` series, one per device.
pub(super) fn metrics(rt: &Runtime, out: &mut String) {
    let devices = rt.devices();
    if devices.is_empty() {
        return;
    }
    type Value = fn(&crate::DeviceView) -> u64;
    let series: [(&str, &str, &str, Value); 7] = [
        ("warden_device_reads_total", "counter", "Reads done.", |d| {
            d.reads
        }),
        (
            "warden_device_writes_total",
            "counter",
            "Writes done.",
            |d| d.writes,
        ),
        (
            "warden_device_read_bytes_total",
            "counter",
            "Bytes read.",
            |d| d.read_bytes,
        ),
        (
            "warden_device_written_bytes_total",
            "counter",
            "Bytes written.",
            |d| d.written_bytes,
        ),
        (
            "warden_device_syncs_total",
            "counter",
            "Flushes to the host file's storage.",
            |d| d.syncs,
        ),
        (
            "warden_device_errors_total",
            "counter",
            "Operations its host file failed.",
            |d| d.errors,
        ),
        (
            "warden_device_claimed",
            "gauge",
            "1 while a task holds it.",
            |d| d.claimed as u64,
        ),
    ];
    for (name, kind, help, value) in series {
        let _ = writeln!(
            out,
            "# HELP {name} {help} (by block device)\n# TYPE {name} {kind}"
        );
        for d in &devices {
            let _ = writeln!(out, "{name}{{device=\"{}\"}} {}", d.name, value(d));
        }
    }
}
