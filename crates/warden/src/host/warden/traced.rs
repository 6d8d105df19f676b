//! The spans of the portal calls a traced task makes (a task run for a
//! traced request, or spawned with a trace context): one per call, a
//! child of the task's span, from the call's start until its answer, with
//! the bytes each way. Nothing is measured for a task without a trace or
//! a runtime without tracing.
//!
//! A call carries its span's context to its server. A server that is not
//! traced itself but received a traced call, and has not answered it yet,
//! makes its own calls as spans under that call's: a request's calls
//! onward through a chain of services are one tree. (With several traced
//! calls received and unanswered, the last one received is the parent.)
//!
//! A call may take two host calls: `call_fast` makes it and, if the
//! server has not answered, says `Again`; `call` then waits. The start and
//! the span's context are kept from the first until the call ends.

use super::active::portal_of;
use super::state::TaskIpc;
use crate::host::TaskData;
use crate::ipc::Errno;
use crate::telemetry::{unix_ns, Context, Span};
use serde_json::json;

/// The trace context of a call that is beginning: the task's, if it is
/// traced, or that of the traced call it is serving, if spans are
/// recorded; its start and its own span's context are noted.
pub(super) fn begin(data: &mut TaskData) -> Option<Context> {
    let ipc = data.ipc();
    let trace = data.shared.trace.or(ipc.serving.map(|(_, at)| at))?;
    ipc.kernel.spans.get()?;
    let ipc = data.ipc_mut();
    ipc.traced_began
        .get_or_insert_with(|| (unix_ns(), trace.child()));
    Some(trace)
}

/// The call `handle` received, made in `trace`: calls made until it is
/// answered are spans under it.
pub(super) fn received(ipc: &mut TaskIpc, handle: i32, trace: Option<Context>) {
    ipc.serving = trace.map(|t| (handle, t));
}

/// The call `handle` was answered (or dropped).
pub(super) fn answered(ipc: &mut TaskIpc, handle: i32) {
    if ipc.serving.is_some_and(|(h, _)| h == handle) {
        ipc.serving = None;
    }
}

/// The name of the task serving `portal` (an active or a passive
/// task's service), or "service" (a host service, or a portal closed
/// since).
fn server_of(data: &TaskData, portal: i32) -> String {
    let Ok(p) = portal_of(data, portal) else {
        return "service".into();
    };
    let service = p.service();
    let passive = service
        .direct_handler()
        .and_then(|h| h.downcast_ref::<super::Passive>());
    match (service.server(), passive) {
        (Some(s), _) => s.name.clone(),
        (None, Some(p)) => p.shared.name.clone(),
        (None, None) => "service".into(),
    }
}

/// A call through `portal` of `req` bytes ended with `result` (from
/// `call_fast` if `fast`): its span, unless it is still under way.
pub(super) fn end(
    data: &mut TaskData,
    trace: Context,
    (portal, req): (i32, i32),
    result: &Result<i64, Errno>,
    fast: bool,
) {
    if fast && matches!(result, Err(Errno::Again)) {
        return;
    }
    let Some((began, at)) = data.ipc_mut().traced_began.take() else {
        return;
    };
    let name = format!("call {}", server_of(data, portal));
    let mut attributes = vec![
        ("warden.task.id", json!(data.shared.id.0)),
        ("warden.call.request_bytes", json!(req.max(0))),
    ];
    match result {
        Ok(n) => attributes.push(("warden.call.reply_bytes", json!(n))),
        Err(e) => attributes.push(("warden.call.error", json!(e.to_string()))),
    }
    if let Some(spans) = data.ipc().kernel.spans.get() {
        spans.record(Span {
            at,
            parent: Some(trace.span),
            name,
            kind: 3,
            start_ns: began,
            end_ns: unix_ns(),
            attributes,
            error: result.is_err(),
        });
    }
}
