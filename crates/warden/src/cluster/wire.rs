//! What nodes say to each other through the broker, and how it is checked.
//!
//! Calls, replies and progress notes are small binary frames; a node's
//! announcement is JSON. Everything that arrives from the broker is
//! decoded here and refused whole if any part is out of shape: a frame is
//! never trusted past its own bytes.
//!
//! ```text
//! call:      [VERSION][CALL][node len: u8][node][task id: u64 LE][portals][request bytes]
//! traced:    [VERSION][TRACED][trace id: 16][span id: 8] then as a call from [node len]
//! reply:     [VERSION][REPLY][code: i32 LE][portals][reply bytes]   code 0 or an Errno
//! progress:  [VERSION][PROGRESS]                                    "still working"
//! release:   [VERSION][RELEASE]                     "nobody here holds the portal"
//! portals:   [count: u8] then per portal [subject len: u8][subject]
//! ```
//!
//! A portal crosses nodes as a subject its node serves it on
//! (`warden.<cluster>.portal.<node>.<instance>.<n>`); an error reply has
//! no portals and no bytes.
//!
//! Subjects ([`Subjects`]) all start `warden.<cluster>.`, so that clusters
//! sharing a broker never hear each other. Node `b`'s calls to a name
//! served by node `a` go to `….call.b.a.<name>` when the name is made
//! only of letters, digits, `-`, `_` and single inner dots, and to
//! `….callx.b.a.<hex of the name>` otherwise (so that no name can reach
//! a wildcard or an empty token). The caller picks the serving node: a
//! call is signed for one receiver (see [`super::seal`]).
//! Every subject a node publishes on names it (its calls, announcements
//! and hello), apart from answers to what it was sent and calls through
//! portals it was lent; every subject it subscribes to is its own or one
//! of a name it serves. So a broker can give each node exactly those
//! permissions (see "Locking the broker down" in doc/clusters.md).

use crate::ipc::Errno;
use serde::{Deserialize, Serialize};

/// The frame format's version, first byte of every frame.
pub const VERSION: u8 = 1;
const CALL: u8 = 1;
const REPLY: u8 = 2;
const PROGRESS: u8 = 3;
const RELEASE: u8 = 4;
const TRACED: u8 = 5;

/// First token of every subject a node uses; the cluster's name is the
/// second.
pub const PREFIX: &str = "warden";

/// The cluster a manifest that names none joins.
pub const DEFAULT_CLUSTER: &str = "default";

/// Longest node name.
pub const MAX_NODE: usize = 64;

/// Largest announcement accepted.
pub const MAX_ANNOUNCE: usize = 64 << 10;

/// Most portals one message may carry across nodes.
pub const MAX_PORTALS: usize = 64;

/// The longest a lent portal's subject may be.
pub const MAX_PORTAL_SUBJECT: usize = 160;

/// A call as it arrives at the serving node.
#[derive(Debug, PartialEq, Eq)]
pub struct Call<'a> {
    /// The calling node.
    pub node: &'a str,
    /// The calling task on that node.
    pub task: u64,
    /// Subjects of the portals the request carries.
    pub portals: Vec<&'a str>,
    /// The request's bytes.
    pub request: &'a [u8],
    /// The span the call was made in (W3C trace and span ids), when the
    /// caller traces it.
    pub trace: Option<Trace>,
}

/// A W3C trace id and span id.
pub type Trace = ([u8; 16], [u8; 8]);

/// A reply's bytes and the subjects of the portals it carries.
#[derive(Debug, PartialEq, Eq)]
pub struct Reply<'a> {
    /// The reply's bytes.
    pub bytes: &'a [u8],
    /// Subjects of its portals.
    pub portals: Vec<&'a str>,
}

/// A frame on a call's reply subject.
#[derive(Debug, PartialEq, Eq)]
pub enum Answer<'a> {
    /// The serving node works on the call.
    Progress,
    /// The call's end: its reply, or the error it failed with.
    Done(Result<Reply<'a>, Errno>),
}

/// A frame on a lent portal's subject.
#[derive(Debug, PartialEq, Eq)]
pub enum PortalFrame<'a> {
    /// A call through the portal.
    Call(Call<'a>),
    /// The borrowing node holds the portal no more.
    Release,
}

/// A node's periodic announcement of itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Announce {
    /// The node's name.
    pub node: String,
    /// Random per process: tells a restarted node from its predecessor.
    pub instance: u64,
    /// The names it serves for the cluster now.
    pub exports: Vec<String>,
}

/// Whether `node` can name a node: 1 to `MAX_NODE` letters, digits,
/// `-` or `_`.
pub fn valid_node(node: &str) -> bool {
    (1..=MAX_NODE).contains(&node.len())
        && node
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The subjects of one cluster: every one starts `warden.<cluster>.`.
#[derive(Debug, Clone)]
pub struct Subjects {
    prefix: String,
}

impl Subjects {
    /// The subjects of the cluster named `cluster` (a valid node name).
    pub fn of(cluster: &str) -> Subjects {
        debug_assert!(valid_node(cluster));
        Subjects {
            prefix: format!("{PREFIX}.{cluster}"),
        }
    }

    /// The subject node `caller` sends its calls to `name` on `server`
    /// to (the caller is in the subject, so that a broker can let each
    /// node publish calls only as itself, and the server, so that a
    /// broker can let each node hear only its own).
    pub fn call(&self, caller: &str, server: &str, name: &str) -> String {
        self.call_as(caller, server, name)
    }

    /// What node `server` subscribes to to serve `name`: its calls from
    /// every node.
    pub fn calls_to(&self, server: &str, name: &str) -> String {
        self.call_as("*", server, name)
    }

    /// The calling node a call subject names (`None` if it is not one).
    pub fn caller_of<'a>(&self, subject: &'a str) -> Option<&'a str> {
        let rest = subject.strip_prefix(self.prefix.as_str())?;
        let rest = rest
            .strip_prefix(".call.")
            .or_else(|| rest.strip_prefix(".callx."))?;
        rest.split('.').next()
    }

    fn call_as(&self, caller: &str, server: &str, name: &str) -> String {
        let p = &self.prefix;
        let plain = !name.is_empty()
            && name.split('.').all(|token| {
                !token.is_empty()
                    && token
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            });
        if plain {
            format!("{p}.call.{caller}.{server}.{name}")
        } else {
            let hex: String = name.bytes().map(|b| format!("{b:02x}")).collect();
            format!("{p}.callx.{caller}.{server}.{hex}")
        }
    }

    /// The node that lent the portal served on `subject`.
    pub fn lender_of<'a>(&self, subject: &'a str) -> Option<&'a str> {
        let rest = subject.strip_prefix(self.prefix.as_str())?;
        rest.strip_prefix(".portal.")?.split('.').next()
    }

    /// The subject a lent portal is served on: the `n`th its node lent,
    /// made unguessable by `secret`.
    pub fn portal(&self, node: &str, instance: u64, n: u64, secret: u64) -> String {
        format!(
            "{}.portal.{node}.{instance:x}.{n:x}{secret:016x}",
            self.prefix
        )
    }

    /// The number a lent portal's subject was made with (see
    /// [`Subjects::portal`]), if `s` is one of node `node`'s.
    pub fn portal_number(&self, node: &str, s: &str) -> Option<u64> {
        let rest = s.strip_prefix(self.prefix.as_str())?;
        let rest = rest.strip_prefix(".portal.")?.strip_prefix(node)?;
        let last = rest.strip_prefix('.')?.split('.').nth(1)?;
        let n = last.get(..last.len().checked_sub(16)?)?;
        u64::from_str_radix(n, 16).ok()
    }

    /// Whether `s` is a lent portal's subject in this cluster.
    pub fn owns_portal(&self, s: &str) -> bool {
        s.strip_prefix(self.prefix.as_str())
            .is_some_and(|rest| rest.starts_with(".portal."))
            && valid_portal_subject(s)
    }

    /// `warden.<cluster>`.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// Where node `node`'s own requests (hello, ps) hear their answers.
    pub fn requests_inbox(&self, node: &str) -> String {
        format!("{}.inbox.{node}.r", self.prefix)
    }

    /// The subject a node announces itself on.
    pub fn announce(&self, node: &str) -> String {
        format!("{}.node.{node}", self.prefix)
    }

    /// Every node's announcements.
    pub fn announcements(&self) -> String {
        format!("{}.node.*", self.prefix)
    }

    /// Asked to learn whether a node name is taken.
    pub fn hello(&self, node: &str) -> String {
        format!("{}.hello.{node}", self.prefix)
    }

    /// Asked for every node's tasks.
    pub fn ps(&self) -> String {
        format!("{}.ps", self.prefix)
    }

    /// Node `node`'s inbox for answers, named by a secret of the node's
    /// (calls add a token).
    pub fn inbox(&self, node: &str, secret: u64) -> String {
        format!("{}.inbox.{node}.{secret:016x}", self.prefix)
    }
}

/// The subject call number `id` is answered on in `inbox`: the call's
/// number, then its secret `token` in hex (written by hand: this runs
/// for every call).
pub fn reply_subject(inbox: &str, id: u64, token: u64) -> String {
    let mut s = String::with_capacity(inbox.len() + 38);
    s.push_str(inbox);
    s.push('.');
    let mut digits = [0u8; 20];
    let mut n = id;
    let mut at = digits.len();
    loop {
        at -= 1;
        digits[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    digits[at..].iter().for_each(|&d| s.push(d as char));
    s.push('_');
    const HEX: &[u8; 16] = b"0123456789abcdef";
    (0..16)
        .rev()
        .for_each(|i| s.push(HEX[(token >> (4 * i)) as usize & 15] as char));
    s
}

/// The call number and secret of a [`reply_subject`] in `inbox`.
pub fn reply_call(inbox: &str, subject: &str) -> Option<(u64, u64)> {
    let rest = subject.strip_prefix(inbox)?;
    let (id, token) = rest.strip_prefix('.')?.split_once('_')?;
    let hex = |b: u8| b.is_ascii_digit() || (b'a'..=b'f').contains(&b);
    if token.len() != 16 || !token.bytes().all(hex) {
        return None;
    }
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let token = u64::from_str_radix(token, 16).ok()?;
    Some((id.parse::<u64>().ok()?, token))
}

/// Whether `s` can be a lent portal's subject (of any cluster: a frame
/// is checked against its receiver's with [`Subjects::owns_portal`]).
pub fn valid_portal_subject(s: &str) -> bool {
    let tokens: Vec<&str> = s.split('.').collect();
    s.len() <= MAX_PORTAL_SUBJECT
        && tokens.len() == 6
        && tokens[0] == PREFIX
        && valid_node(tokens[1])
        && tokens[2] == "portal"
        && valid_node(tokens[3])
        && tokens[4..]
            .iter()
            .all(|t| !t.is_empty() && t.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Appends a portal list.
fn encode_portals(out: &mut Vec<u8>, portals: &[String]) {
    debug_assert!(portals.len() <= MAX_PORTALS);
    out.push(portals.len() as u8);
    for p in portals {
        debug_assert!(valid_portal_subject(p));
        out.push(p.len() as u8);
        out.extend_from_slice(p.as_bytes());
    }
}

/// Splits a portal list off the front of `bytes`.
fn decode_portals(bytes: &[u8]) -> Option<(Vec<&str>, &[u8])> {
    let (&n, mut rest) = bytes.split_first()?;
    if n as usize > MAX_PORTALS {
        return None;
    }
    let mut portals = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let (&len, after) = rest.split_first()?;
        let subject = std::str::from_utf8(after.get(..len as usize)?).ok()?;
        if !valid_portal_subject(subject) {
            return None;
        }
        portals.push(subject);
        rest = &after[len as usize..];
    }
    Some((portals, rest))
}

/// The longest a call frame from `node` with `portals` portals and a
/// request of `request` bytes can be.
pub fn call_len(node: &str, portals: usize, request: usize) -> usize {
    3 + 24 + node.len() + 8 + 1 + portals * (1 + MAX_PORTAL_SUBJECT) + request
}

/// Appends a call frame to `out` (a traced one if `trace` is given).
pub fn encode_call(
    out: &mut Vec<u8>,
    (node, task, trace): (&str, u64, Option<Trace>),
    portals: &[String],
    request: &[u8],
) {
    debug_assert!(valid_node(node));
    out.reserve(36 + node.len() + request.len());
    match trace {
        None => out.extend_from_slice(&[VERSION, CALL]),
        Some((t, s)) => {
            out.extend_from_slice(&[VERSION, TRACED]);
            out.extend_from_slice(&t);
            out.extend_from_slice(&s);
        }
    }
    out.push(node.len() as u8);
    out.extend_from_slice(node.as_bytes());
    out.extend_from_slice(&task.to_le_bytes());
    encode_portals(out, portals);
    out.extend_from_slice(request);
}

/// Decodes a call frame; `None` if it is not one.
pub fn decode_call(frame: &[u8]) -> Option<Call<'_>> {
    let (trace, frame) = match frame {
        [VERSION, CALL, rest @ ..] => (None, rest),
        [VERSION, TRACED, rest @ ..] => {
            let t: [u8; 16] = rest.get(..16)?.try_into().ok()?;
            let s: [u8; 8] = rest.get(16..24)?.try_into().ok()?;
            (Some((t, s)), &rest[24..])
        }
        _ => return None,
    };
    let [n, rest @ ..] = frame else {
        return None;
    };
    let n = *n as usize;
    let node = std::str::from_utf8(rest.get(..n)?).ok()?;
    if !valid_node(node) {
        return None;
    }
    let task = u64::from_le_bytes(rest.get(n..n + 8)?.try_into().ok()?);
    let (portals, request) = decode_portals(&rest[n + 8..])?;
    Some(Call {
        node,
        task,
        portals,
        request,
        trace,
    })
}

/// Decodes a frame on a lent portal's subject.
pub fn decode_portal_frame(frame: &[u8]) -> Option<PortalFrame<'_>> {
    match frame {
        [VERSION, RELEASE] => Some(PortalFrame::Release),
        _ => decode_call(frame).map(PortalFrame::Call),
    }
}

/// A release frame.
pub fn encode_release() -> Vec<u8> {
    vec![VERSION, RELEASE]
}

/// A reply frame: the reply's bytes and portals, or the error the call
/// failed with.
pub fn encode_reply(result: Result<(&[u8], &[String]), Errno>) -> Vec<u8> {
    let (code, bytes, portals) = match result {
        Ok((b, p)) => (0, b, p),
        Err(e) => (e.code(), &[][..], &[][..]),
    };
    let mut out = Vec::with_capacity(7 + bytes.len());
    out.extend_from_slice(&[VERSION, REPLY]);
    out.extend_from_slice(&code.to_le_bytes());
    encode_portals(&mut out, portals);
    out.extend_from_slice(bytes);
    out
}

/// A progress frame.
pub fn encode_progress() -> Vec<u8> {
    vec![VERSION, PROGRESS]
}

/// Decodes a frame on a reply subject; `None` if it is neither a reply
/// nor a progress note, or its code is not one of Warden's.
pub fn decode_answer(frame: &[u8]) -> Option<Answer<'_>> {
    match frame {
        [VERSION, PROGRESS] => Some(Answer::Progress),
        [VERSION, REPLY, c0, c1, c2, c3, rest @ ..] => {
            let (portals, bytes) = decode_portals(rest)?;
            match i32::from_le_bytes([*c0, *c1, *c2, *c3]) {
                0 => Some(Answer::Done(Ok(Reply { bytes, portals }))),
                code if bytes.is_empty() && portals.is_empty() => Errno::ALL
                    .into_iter()
                    .find(|e| e.code() == code)
                    .map(|e| Answer::Done(Err(e))),
                _ => None,
            }
        }
        _ => None,
    }
}

/// Decodes an announcement heard on `subject`; `None` if it is malformed,
/// too large, or claims a node other than the subject's.
pub fn decode_announce(subjects: &Subjects, subject: &str, payload: &[u8]) -> Option<Announce> {
    if payload.len() > MAX_ANNOUNCE {
        return None;
    }
    let a: Announce = serde_json::from_slice(payload).ok()?;
    let ok = valid_node(&a.node)
        && subject == subjects.announce(&a.node)
        && a.exports.iter().all(|n| !n.is_empty() && n.len() <= 256);
    ok.then_some(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_round_trip_and_refusals() {
        let mut f = Vec::new();
        encode_call(&mut f, ("node-b", 42, None), &[], b"hello");
        assert_eq!(
            decode_call(&f),
            Some(Call {
                node: "node-b",
                task: 42,
                portals: vec![],
                request: b"hello",
                trace: None,
            })
        );
        // Every truncation is refused, never read past.
        for cut in 0..f.len() - 5 {
            assert_eq!(decode_call(&f[..cut]), None, "cut at {cut}");
        }
        let mut bad = f.clone();
        bad[0] = 9;
        assert_eq!(decode_call(&bad), None, "other version");
        let mut bad = f.clone();
        bad[2] = 200;
        assert_eq!(decode_call(&bad), None, "node length past the end");
        let mut bad = f.clone();
        bad[3] = b'.';
        assert_eq!(decode_call(&bad), None, "not a node name");
        // A traced call carries its trace and span, and is refused cut
        // short like any other.
        let mut f = Vec::new();
        let trace = ([7u8; 16], [9u8; 8]);
        encode_call(&mut f, ("node-b", 42, Some(trace)), &[], b"hello");
        let c = decode_call(&f).unwrap();
        assert_eq!(
            (c.trace, c.node, c.request),
            (Some(trace), "node-b", &b"hello"[..])
        );
        for cut in 0..f.len() - 5 {
            assert_eq!(decode_call(&f[..cut]), None, "cut at {cut}");
        }
    }

    #[test]
    fn portals_travel_as_subjects() {
        let prod = Subjects::of("prod");
        let p = vec![
            prod.portal("a", 0xbeef, 7, 1),
            prod.portal("a", 0xbeef, 8, 2),
        ];
        assert_eq!(p[0], "warden.prod.portal.a.beef.70000000000000001");
        assert!(prod.owns_portal(&p[0]));
        assert!(
            !Subjects::of("test").owns_portal(&p[0]),
            "another cluster's"
        );
        let mut f = Vec::new();
        encode_call(&mut f, ("b", 1, None), &p, b"req");
        let c = decode_call(&f).unwrap();
        assert_eq!(
            (c.portals.len(), c.portals[1], c.request),
            (2, p[1].as_str(), &b"req"[..])
        );
        let r = encode_reply(Ok((b"rep", &p[..1])));
        let Some(Answer::Done(Ok(reply))) = decode_answer(&r) else {
            panic!()
        };
        assert_eq!(
            (reply.bytes, reply.portals),
            (&b"rep"[..], vec![p[0].as_str()])
        );
        assert_eq!(
            decode_portal_frame(&encode_release()),
            Some(PortalFrame::Release)
        );
        assert!(matches!(
            decode_portal_frame(&f),
            Some(PortalFrame::Call(_))
        ));
        for bad in [
            "warden.prod.call.kv",
            "warden.prod.portal.a.b.>",
            "warden.prod.portal.a.1",
            "warden.portal.a.1.2",
            "x.prod.portal.a.1.2",
            "warden.p.q.portal.a.1.2",
        ] {
            assert!(!valid_portal_subject(bad), "{bad}");
            let mut f = Vec::new();
            f.extend_from_slice(&[VERSION, CALL, 1, b'b']);
            f.extend_from_slice(&1u64.to_le_bytes());
            f.push(1);
            f.push(bad.len() as u8);
            f.extend_from_slice(bad.as_bytes());
            assert_eq!(decode_call(&f), None, "{bad} refused");
        }
        let mut too_many = Vec::new();
        too_many.extend_from_slice(&[VERSION, REPLY, 0, 0, 0, 0, (MAX_PORTALS + 1) as u8]);
        assert_eq!(decode_answer(&too_many), None);
    }

    #[test]
    fn answers() {
        let ok = encode_reply(Ok((b"r", &[])));
        let Some(Answer::Done(Ok(r))) = decode_answer(&ok) else {
            panic!()
        };
        assert_eq!((r.bytes, r.portals.len()), (&b"r"[..], 0));
        let err = encode_reply(Err(Errno::PeerDied));
        assert_eq!(
            decode_answer(&err),
            Some(Answer::Done(Err(Errno::PeerDied)))
        );
        assert_eq!(decode_answer(&encode_progress()), Some(Answer::Progress));
        let mut unknown = encode_reply(Err(Errno::Denied));
        unknown[2] = 0x80;
        assert_eq!(decode_answer(&unknown), None, "a code Warden lacks");
        let mut with_bytes = err.clone();
        with_bytes.push(1);
        assert_eq!(decode_answer(&with_bytes), None, "an error with bytes");
        assert_eq!(decode_answer(&[VERSION]), None);
        assert_eq!(decode_answer(&[]), None);
    }

    #[test]
    fn a_lent_portals_subject_names_its_number() {
        let s = Subjects::of("prod");
        for n in [0, 1, 0xabc, u64::MAX] {
            let subject = s.portal("a", 0x1234, n, 0xfeed);
            assert_eq!(s.portal_number("a", &subject), Some(n), "{subject}");
            assert_eq!(s.portal_number("b", &subject), None, "another node's");
            assert_eq!(Subjects::of("test").portal_number("a", &subject), None);
        }
        assert_eq!(s.portal_number("a", "warden.prod.portal.a.1.00ff"), None);
    }

    #[test]
    fn reply_subjects_carry_the_call_and_its_secret() {
        let inbox = "warden.prod.inbox.b.00000000000000ff";
        for (id, token) in [
            (0, 0),
            (1, 0xfe),
            (12_345, 0x0123_4567_89ab_cdef),
            (u64::MAX, u64::MAX),
        ] {
            let s = reply_subject(inbox, id, token);
            assert_eq!(s, format!("{inbox}.{id}_{token:016x}"));
            assert_eq!(reply_call(inbox, &s), Some((id, token)), "{s}");
        }
        for bad in [
            "",
            ".1_00",
            ".+1_0000000000000000",
            "._0000000000000000",
            ".1_000000000000000g",
            ".1_+000000000000000",
            ".1_000000000000000A",
        ] {
            assert_eq!(reply_call(inbox, &format!("{inbox}{bad}")), None, "{bad}");
        }
        assert_eq!(
            reply_call(
                inbox,
                "warden.prod.inbox.c.00000000000000ff.1_0000000000000000"
            ),
            None
        );
    }

    #[test]
    fn subjects() {
        let s = Subjects::of(DEFAULT_CLUSTER);
        assert_eq!(s.call("b", "a", "kv"), "warden.default.call.b.a.kv");
        assert_eq!(
            s.call("b", "a", "log.errors"),
            "warden.default.call.b.a.log.errors"
        );
        assert_eq!(s.call("b", "a", "a b"), "warden.default.callx.b.a.612062");
        assert_eq!(s.call("b", "a", "x.>"), "warden.default.callx.b.a.782e3e");
        assert_eq!(
            s.call("b", "a", "a..b"),
            "warden.default.callx.b.a.612e2e62"
        );
        assert_eq!(s.call("b", "a", ".a"), "warden.default.callx.b.a.2e61");
        assert_eq!(s.calls_to("a", "kv"), "warden.default.call.*.a.kv");
        assert_eq!(s.caller_of(&s.call("b-2", "a", "a b")), Some("b-2"));
        assert_eq!(s.caller_of("warden.other.call.b.a.kv"), None);
        let prod = Subjects::of("prod");
        assert_eq!(prod.call("a", "c", "kv"), "warden.prod.call.a.c.kv");
        assert_eq!(prod.lender_of(&prod.portal("c", 1, 2, 3)), Some("c"));
        assert_eq!(prod.announce("a"), "warden.prod.node.a");
        assert_eq!(prod.inbox("a", 255), "warden.prod.inbox.a.00000000000000ff");
        assert!(valid_node("a") && valid_node("node_7-x"));
        assert!(!valid_node("") && !valid_node("a.b") && !valid_node("*"));
        assert!(!valid_node(&"n".repeat(MAX_NODE + 1)));
    }

    #[test]
    fn announcements() {
        let a = Announce {
            node: "a".into(),
            instance: 7,
            exports: vec!["kv".into()],
        };
        let bytes = serde_json::to_vec(&a).unwrap();
        let s = Subjects::of("prod");
        assert_eq!(decode_announce(&s, "warden.prod.node.a", &bytes), Some(a));
        let spoofed = decode_announce(&s, "warden.prod.node.b", &bytes);
        assert_eq!(spoofed, None, "spoofed");
        let other = decode_announce(&s, "warden.test.node.a", &bytes);
        assert_eq!(other, None, "another cluster's");
        assert_eq!(decode_announce(&s, "warden.prod.node.a", b"{"), None);
        let huge = vec![b' '; MAX_ANNOUNCE + 1];
        assert_eq!(decode_announce(&s, "warden.prod.node.a", &huge), None);
    }
}
