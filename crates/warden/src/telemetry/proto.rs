//! OTLP's protobuf encoding of a batch of spans: an
//! `ExportTraceServiceRequest` (opentelemetry-proto, `trace/v1` and
//! `collector/trace/v1`), written by hand — the handful of fields Warden
//! sends do not need a code generator.
//!
//! Protobuf in brief: a message is a run of fields, each a key
//! (`field number << 3 | wire type`, a varint) and a value: a varint
//! (type 0), eight little-endian bytes (type 1: `fixed64`, `double`), or
//! a length (a varint) and that many bytes (type 2: strings, bytes,
//! nested messages). Fields at their default value are left out.

use super::Span;
use serde_json::Value;

const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn key(out: &mut Vec<u8>, field: u32, wire: u8) {
    varint(out, (u64::from(field) << 3) | u64::from(wire));
}

fn bytes(out: &mut Vec<u8>, field: u32, b: &[u8]) {
    key(out, field, LEN);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn uint(out: &mut Vec<u8>, field: u32, v: u64) {
    if v != 0 {
        key(out, field, VARINT);
        varint(out, v);
    }
}

fn fixed64(out: &mut Vec<u8>, field: u32, v: u64) {
    key(out, field, FIXED64);
    out.extend_from_slice(&v.to_le_bytes());
}

/// A nested message, written by `f`, as field `field`.
fn message(out: &mut Vec<u8>, field: u32, f: impl FnOnce(&mut Vec<u8>)) {
    let mut inner = Vec::new();
    f(&mut inner);
    bytes(out, field, &inner);
}

/// The request body for `spans` of the service `service`.
pub(super) fn request(service: &str, spans: &[Span]) -> Vec<u8> {
    let mut out = Vec::new();
    // ExportTraceServiceRequest.resource_spans
    message(&mut out, 1, |rs| {
        // ResourceSpans.resource: Resource.attributes
        message(rs, 1, |r| {
            key_value(r, 1, "service.name", &Value::from(service));
        });
        // ResourceSpans.scope_spans
        message(rs, 2, |ss| {
            // ScopeSpans.scope: InstrumentationScope.name
            message(ss, 1, |scope| bytes(scope, 1, b"warden"));
            for s in spans {
                message(ss, 2, |out| span(out, s));
            }
        });
    });
    out
}

/// A `Span`'s fields.
fn span(out: &mut Vec<u8>, s: &Span) {
    bytes(out, 1, &s.at.trace);
    bytes(out, 2, &s.at.span);
    if let Some(parent) = &s.parent {
        bytes(out, 4, parent);
    }
    bytes(out, 5, s.name.as_bytes());
    uint(out, 6, u64::from(s.kind));
    fixed64(out, 7, s.start_ns);
    fixed64(out, 8, s.end_ns);
    for (k, v) in &s.attributes {
        key_value(out, 9, k, v);
    }
    // Span.status: Status.code (1 ok, 2 error)
    message(out, 15, |st| uint(st, 3, if s.error { 2 } else { 1 }));
}

/// A `KeyValue` as field `field`: integers as `int_value`, other numbers
/// as `double_value`, text as `string_value`, anything else as its JSON.
fn key_value(out: &mut Vec<u8>, field: u32, k: &str, v: &Value) {
    message(out, field, |kv| {
        bytes(kv, 1, k.as_bytes());
        message(kv, 2, |any| match v {
            Value::String(s) => bytes(any, 1, s.as_bytes()),
            Value::Bool(b) => {
                key(any, 2, VARINT);
                varint(any, u64::from(*b));
            }
            Value::Number(n) if n.is_i64() || n.is_u64() => {
                let i = n.as_i64().unwrap_or(i64::MAX);
                key(any, 3, VARINT);
                varint(any, i as u64);
            }
            Value::Number(n) => {
                key(any, 4, FIXED64);
                any.extend_from_slice(&n.as_f64().unwrap_or(0.0).to_le_bytes());
            }
            other => bytes(any, 1, other.to_string().as_bytes()),
        });
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::Context;
    use serde_json::json;

    /// A field as read back: its number and its value (a varint or
    /// fixed64 as a number, a length-delimited one as its bytes).
    #[derive(Debug, PartialEq)]
    enum Field {
        Num(u64),
        Bytes(Vec<u8>),
    }

    fn read_varint(b: &[u8], at: &mut usize) -> u64 {
        let (mut v, mut shift) = (0u64, 0);
        loop {
            let byte = b[*at];
            *at += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return v;
            }
            shift += 7;
        }
    }

    /// Every field of the message `b`, in order.
    fn fields(b: &[u8]) -> Vec<(u64, Field)> {
        let (mut at, mut out) = (0, Vec::new());
        while at < b.len() {
            let k = read_varint(b, &mut at);
            let value = match k & 7 {
                0 => Field::Num(read_varint(b, &mut at)),
                1 => {
                    let v = u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
                    at += 8;
                    Field::Num(v)
                }
                2 => {
                    let n = read_varint(b, &mut at) as usize;
                    at += n;
                    Field::Bytes(b[at - n..at].to_vec())
                }
                w => panic!("wire type {w}"),
            };
            out.push((k >> 3, value));
        }
        out
    }

    fn only(b: &[u8], field: u64) -> Vec<u8> {
        let found: Vec<_> = fields(b).into_iter().filter(|(f, _)| *f == field).collect();
        match &found[..] {
            [(_, Field::Bytes(v))] => v.clone(),
            other => panic!("field {field}: {other:?}"),
        }
    }

    #[test]
    fn a_span_reads_back_field_by_field() {
        let at = Context::root();
        let s = Span {
            at,
            parent: Some([7; 8]),
            name: "GET /hello".into(),
            kind: 2,
            start_ns: 1_700_000_000_000_000_001,
            end_ns: 1_700_000_000_000_000_999,
            attributes: vec![
                ("http.response.status_code", json!(200)),
                ("warden.task.cpu_ms", json!(1.5)),
                ("url.path", json!("/hello")),
                ("negative", json!(-3)),
            ],
            error: true,
        };
        let req = request("svc", &[s]);
        let rs = only(&req, 1);
        let resource = only(&rs, 1);
        let kv = only(&resource, 1);
        assert_eq!(only(&kv, 1), b"service.name");
        assert_eq!(only(&only(&kv, 2), 1), b"svc");
        let ss = only(&rs, 2);
        assert_eq!(only(&only(&ss, 1), 1), b"warden");
        let span = fields(&only(&ss, 2));
        assert_eq!(span[0], (1, Field::Bytes(at.trace.to_vec())));
        assert_eq!(span[1], (2, Field::Bytes(at.span.to_vec())));
        assert_eq!(span[2], (4, Field::Bytes(vec![7; 8])));
        assert_eq!(span[3], (5, Field::Bytes(b"GET /hello".to_vec())));
        assert_eq!(span[4], (6, Field::Num(2)));
        assert_eq!(span[5], (7, Field::Num(1_700_000_000_000_000_001)));
        assert_eq!(span[6], (8, Field::Num(1_700_000_000_000_000_999)));
        let values: Vec<Vec<(u64, Field)>> = span[7..11]
            .iter()
            .map(|(f, v)| {
                assert_eq!(*f, 9);
                let Field::Bytes(kv) = v else { panic!() };
                fields(&only(kv, 2))
            })
            .collect();
        assert_eq!(values[0], vec![(3, Field::Num(200))]);
        assert_eq!(values[1], vec![(4, Field::Num(1.5f64.to_bits()))]);
        assert_eq!(values[2], vec![(1, Field::Bytes(b"/hello".to_vec()))]);
        assert_eq!(values[3], vec![(3, Field::Num(-3i64 as u64))]);
        let Field::Bytes(status) = &span[11].1 else {
            panic!()
        };
        assert_eq!((span[11].0, fields(status)), (15, vec![(3, Field::Num(2))]));
    }
}
