//! The `[runtime]` section of a manifest.

use super::{parse_rate, parse_size, PolicyKind, RawRuntime, RuntimeSection};
use std::time::Duration;

/// The runtime settings `raw` describes, or its first bad key.
pub(super) fn section(raw: RawRuntime, base: &std::path::Path) -> Result<RuntimeSection, String> {
    let control_tls = super::http::tls_spec(
        [
            &raw.control_tls,
            &raw.control_tls_cert,
            &raw.control_tls_key,
            &raw.control_tls_client_ca,
        ],
        base,
    )
    .map_err(|e| format!("runtime.control_{e}"))?;
    Ok(RuntimeSection {
        control_tls,
        workers: match raw.workers {
            Some(0) => return Err("runtime.workers: must be at least 1".into()),
            w => w,
        },
        slice: match raw.slice_ms {
            Some(0) => return Err("runtime.slice_ms: must be at least 1".into()),
            Some(ms) => Some(Duration::from_millis(ms)),
            None => None,
        },
        cache: raw.cache,
        max_tasks: match raw.max_tasks {
            Some(0) => return Err("runtime.max_tasks: must be at least 1".into()),
            n => n,
        },
        control: match raw.control {
            Some(c) if c != "off" && c.parse::<std::net::SocketAddr>().is_err() => {
                return Err(format!(
                    "runtime.control: {c:?}: expected IP:PORT, or \"off\""
                ))
            }
            c => c,
        },
        link_rate: raw
            .link_rate
            .as_deref()
            .map(parse_rate)
            .transpose()
            .map_err(|e| format!("runtime.link_rate: {e}"))?,
        max_module_bytes: match raw.max_module_size.as_deref().map(parse_size) {
            Some(Ok(0)) => return Err("runtime.max_module_size: must be more than 0".into()),
            Some(Err(e)) => return Err(format!("runtime.max_module_size: {e}")),
            Some(Ok(n)) => Some(n),
            None => None,
        },
        memory_limit: match raw.memory_limit.as_deref().map(parse_size) {
            Some(Ok(0)) => return Err("runtime.memory_limit: must be more than 0".into()),
            Some(Err(e)) => return Err(format!("runtime.memory_limit: {e}")),
            n => n.map(Result::unwrap),
        },
        scheduler: match raw.scheduler.as_deref() {
            None => PolicyKind::RoundRobin,
            Some(p) => PolicyKind::parse(p).map_err(|e| format!("runtime.scheduler: {e}"))?,
        },
    })
}
