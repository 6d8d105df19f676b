//! Frames sealed by the node that sends them, for a cluster whose
//! members are listed with their keys.
//!
//! Each node of such a cluster holds an nkey (an Ed25519 key pair, as
//! NATS uses) and the public keys of every member, by node name. Every
//! frame it sends — calls, answers, announcements, questions to every
//! node — gets a *seal*: a trailer naming the sender, its instance, a
//! sequence number and the instance the frame is meant for, then a tag
//! over all that together with the frame's subject and reply subject,
//! and the tag's kind:
//!
//! ```text
//! [frame][signer][signer len: u8][instance: u64 LE][seq: u64 LE][to: u64 LE][tag][kind: u8]
//! input = "warden-seal-2" subject 0 reply 0 frame signer len instance seq to kind
//! kind 1: tag = Ed25519(SHA-256(input)), 64 bytes: anyone may check it
//! kind 2: tag = HMAC-SHA256(pair key, input), 32 bytes: only the receiver
//! ```
//!
//! A frame for every node (an announcement, a question to all) is
//! signed (kind 1). A frame for one node — a call, its progress notes and
//! its answer, the bulk of the traffic — is tagged with the key that
//! node and the sender share (kind 2), which costs a hash instead of a
//! signature and its check: the *pair key* is the SHA-256 of the two
//! names and the X25519 agreement of one node's key with the other's
//! (each Ed25519 key taken as its Curve25519 twin, as libsodium's
//! `crypto_sign_ed25519_*_to_curve25519` do), computed once per member
//! when the node joins. Only the two nodes can make or check such a tag,
//! and a frame tagged by a node names it as the signer, so it cannot be
//! reflected back to its sender as the other's.
//!
//! The receiver checks the tag with the signer's listed key, so a frame
//! is refused if it was forged, altered, moved to another subject or
//! given another reply subject. Replays are refused by a
//! [`super::replay::Window`] per signer (and per name served): an
//! instance number starts with the process's start time, so a restarted
//! node's frames are newer than its predecessor's, and within an
//! instance each sequence number is accepted once. A call also names the
//! instance of the node it is sent to, so a restarted server refuses the
//! calls sent to its predecessor.
//!
//! A cluster without members is *open*: frames go unsealed, and anyone
//! who can reach the broker is trusted (see doc/clusters.md).

use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

/// A keyed cluster as its manifest gives it: this node's key and every
/// member's public key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Keys {
    /// The file holding this node's nkey seed (read when joining).
    pub seed: PathBuf,
    /// Every member's public key, by node name.
    pub members: BTreeMap<String, String>,
}

/// Bytes of a seal past its signer's name and tag: its length, instance,
/// sequence number, `to`, and the tag's kind.
const FIXED: usize = 1 + 8 + 8 + 8 + 1;
/// A signature's kind and length.
const SIGNED: (u8, usize) = (1, 64);
/// A pair key's tag: its kind and length.
const PAIRED: (u8, usize) = (2, 32);

/// What a seal says about its frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seal<'a> {
    /// The node that sealed the frame.
    pub signer: &'a str,
    /// The signer's instance.
    pub instance: u64,
    /// The frame's number among those its signer's instance sent.
    pub seq: u64,
    /// The instance of the node the frame is meant for (0: any).
    pub to: u64,
}

/// A member as a keyed node knows it.
pub struct Peer {
    /// Its public key, to check its signatures.
    public: nkeys::KeyPair,
    /// The key this node and it share (none for this node itself).
    pair: Option<ring::hmac::Key>,
}

/// How a node's frames are sealed and checked.
pub enum Trust {
    /// No keys: nothing is sealed or checked.
    Open,
    /// Sealed with `me` (or a pair key), checked against `members`.
    Keyed {
        /// This node's name.
        node: String,
        /// This node's key pair.
        me: nkeys::KeyPair,
        /// This node's instance.
        instance: u64,
        /// The last sequence number used.
        seq: AtomicU64,
        /// Every member, by node name.
        members: HashMap<String, Peer>,
    },
}

/// Why a frame was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No seal, or one out of shape.
    Unsealed,
    /// A signer that is not a member.
    Stranger,
    /// A tag that does not verify.
    Forged,
}

impl Trust {
    /// How node `node`, instance `instance`, seals and checks: open
    /// without `keys`. Errors name the file or member at fault, never a
    /// seed.
    pub fn load(node: &str, instance: u64, keys: Option<&Keys>) -> Result<Trust, String> {
        let Some(keys) = keys else {
            return Ok(Trust::Open);
        };
        let path = keys.seed.display();
        let seed = std::fs::read_to_string(&keys.seed)
            .map_err(|e| format!("cluster.key: cannot read {path}: {e}"))?;
        let me = nkeys::KeyPair::from_seed(seed.trim())
            .map_err(|_| format!("cluster.key: {path} holds no nkey seed"))?;
        match keys.members.get(node) {
            Some(k) if *k == me.public_key() => {}
            Some(_) => {
                return Err(format!(
                    "cluster.key: {path} is not the key cluster.members lists for node {node}"
                ))
            }
            None => return Err(format!("cluster.members: node {node} is not listed")),
        }
        let agree =
            Agreement::of(seed.trim()).ok_or(format!("cluster.key: {path} holds no nkey seed"))?;
        let mut members = HashMap::new();
        for (name, public) in &keys.members {
            let bad = || format!("cluster.members: {name}'s key is not an nkey public key");
            let key = nkeys::KeyPair::from_public_key(public).map_err(|_| bad())?;
            let pair = match name == node {
                true => None,
                false => Some(agree.pair_key(node, name, public).ok_or_else(bad)?),
            };
            members.insert(name.clone(), Peer { public: key, pair });
        }
        Ok(Trust::Keyed {
            node: node.to_string(),
            me,
            instance,
            seq: AtomicU64::new(0),
            members,
        })
    }

    /// Seals `frame` for `subject` and `reply`, meant for instance `to`
    /// (0: any) of node `receiver` ("": any node, and then signed).
    pub fn seal(&self, subject: &str, reply: &str, frame: &mut Vec<u8>, to: u64, receiver: &str) {
        let Trust::Keyed {
            node,
            me,
            instance,
            seq,
            members,
        } = self
        else {
            return;
        };
        let pair = members.get(receiver).and_then(|m| m.pair.as_ref());
        let (kind, tag_len) = if pair.is_some() { PAIRED } else { SIGNED };
        frame.reserve(node.len() + FIXED + tag_len);
        frame.extend_from_slice(node.as_bytes());
        frame.push(node.len() as u8);
        frame.extend_from_slice(&instance.to_le_bytes());
        let n = seq.fetch_add(1, Ordering::Relaxed) + 1;
        frame.extend_from_slice(&n.to_le_bytes());
        frame.extend_from_slice(&to.to_le_bytes());
        match pair {
            Some(key) => {
                let tag = pair_tag(key, subject, reply, frame, kind);
                frame.extend_from_slice(tag.as_ref());
            }
            None => {
                let digest = digest(subject, reply, frame, kind);
                let signature = me.sign(&digest).unwrap_or_else(|_| vec![0; 64]);
                frame.extend_from_slice(&signature);
            }
        }
        frame.push(kind);
    }

    /// Checks the seal of `frame`, heard on `subject` with `reply`: the
    /// frame's own bytes and what its seal says. An open cluster takes
    /// every frame whole, with no seal.
    pub fn open<'a>(
        &self,
        subject: &str,
        reply: &str,
        frame: &'a [u8],
    ) -> Result<(&'a [u8], Option<Seal<'a>>), Refusal> {
        let Trust::Keyed { members, .. } = self else {
            return Ok((frame, None));
        };
        let (body, seal, sealed, tag, kind) = split(frame).ok_or(Refusal::Unsealed)?;
        let member = members.get(seal.signer).ok_or(Refusal::Stranger)?;
        let good = match (kind, &member.pair) {
            (k, _) if k == SIGNED.0 => {
                let digest = digest(subject, reply, sealed, kind);
                member.public.verify(&digest, tag).is_ok()
            }
            (_, Some(key)) => {
                let want = pair_tag(key, subject, reply, sealed, kind);
                crate::timing_safe::eq(want.as_ref(), tag)
            }
            // This node's own name on a pair key's tag: a reflection.
            (_, None) => false,
        };
        match good {
            true => Ok((body, Some(seal))),
            false => Err(Refusal::Forged),
        }
    }
}

/// What a signature signs (kind 1): the SHA-256 of the seal's input.
fn digest(subject: &str, reply: &str, sealed: &[u8], kind: u8) -> [u8; 32] {
    let mut h = Sha256::new();
    input(subject, reply, sealed, kind, |b| h.update(b));
    h.finalize().into()
}

/// A pair key's tag (kind 2): the HMAC of the seal's input.
fn pair_tag(
    key: &ring::hmac::Key,
    subject: &str,
    reply: &str,
    sealed: &[u8],
    kind: u8,
) -> ring::hmac::Tag {
    let mut mac = ring::hmac::Context::with_key(key);
    input(subject, reply, sealed, kind, |b| mac.update(b));
    mac.sign()
}

/// Feeds a seal's tagged input to `update`: `sealed` is the frame with
/// its seal up to the tag.
fn input(subject: &str, reply: &str, sealed: &[u8], kind: u8, mut update: impl FnMut(&[u8])) {
    update(b"warden-seal-2");
    update(subject.as_bytes());
    update(&[0]);
    update(reply.as_bytes());
    update(&[0]);
    update(sealed);
    update(&[kind]);
}

/// Splits a sealed frame into the frame, its seal, the frame and seal up
/// to the tag, the tag and the tag's kind.
fn split(frame: &[u8]) -> Option<(&[u8], Seal<'_>, &[u8], &[u8], u8)> {
    let (&kind, rest) = frame.split_last()?;
    let tag_len = match kind {
        k if k == SIGNED.0 => SIGNED.1,
        k if k == PAIRED.0 => PAIRED.1,
        _ => return None,
    };
    let (sealed, tag) = rest.split_at(rest.len().checked_sub(tag_len)?);
    let (rest, fixed) = sealed.split_at(sealed.len().checked_sub(FIXED - 1)?);
    let len = fixed[0] as usize;
    let word = |i: usize| u64::from_le_bytes(fixed[1 + 8 * i..9 + 8 * i].try_into().unwrap());
    let signer_at = rest.len().checked_sub(len)?;
    let signer = std::str::from_utf8(&rest[signer_at..]).ok()?;
    if !super::valid_node(signer) {
        return None;
    }
    let seal = Seal {
        signer,
        instance: word(0),
        seq: word(1),
        to: word(2),
    };
    Some((&rest[..signer_at], seal, sealed, tag, kind))
}

/// This node's half of the agreements that make pair keys: its Ed25519
/// seed's Curve25519 scalar.
struct Agreement([u8; 32]);

impl Agreement {
    /// The scalar of the nkey seed `seed`.
    fn of(seed: &str) -> Option<Agreement> {
        let (_, raw) = nkeys::decode_seed(seed).ok()?;
        let signing = ed25519_dalek::SigningKey::from_bytes(&raw);
        Some(Agreement(signing.to_scalar_bytes()))
    }

    /// The key node `me` shares with node `other`, whose nkey public key
    /// is `public`: the same on both sides.
    fn pair_key(&self, me: &str, other: &str, public: &str) -> Option<ring::hmac::Key> {
        let (_, raw) = nkeys::from_public_key(public).ok()?;
        let point = ed25519_dalek::VerifyingKey::from_bytes(&raw).ok()?;
        let shared = point.to_montgomery().mul_clamped(self.0);
        if shared.as_bytes() == &[0; 32] {
            return None;
        }
        let (low, high) = if me < other { (me, other) } else { (other, me) };
        let mut h = Sha256::new();
        h.update(b"warden-pair-1");
        h.update(low.as_bytes());
        h.update([0]);
        h.update(high.as_bytes());
        h.update([0]);
        h.update(shared.as_bytes());
        Some(ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &h.finalize()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Node `node` with key `me`, knowing `members`, as [`Trust::load`]
    /// would make it from files.
    fn keyed(node: &str, me: &nkeys::KeyPair, members: &[(&str, &nkeys::KeyPair)]) -> Trust {
        let dir = tempfile::tempdir().unwrap();
        let seed = dir.path().join("seed");
        std::fs::write(&seed, me.seed().unwrap()).unwrap();
        let mut listed: BTreeMap<String, String> = members
            .iter()
            .map(|(n, k)| (n.to_string(), k.public_key()))
            .collect();
        // A rogue claims a member's name with its own key: its own view
        // lists that key under the name.
        listed.insert(node.to_string(), me.public_key());
        let keys = Keys {
            seed,
            members: listed,
        };
        Trust::load(node, 7, Some(&keys)).unwrap()
    }

    fn sealed(t: &Trust, receiver: &str, to: u64) -> Vec<u8> {
        let mut f = b"call".to_vec();
        t.seal("s", "r", &mut f, to, receiver);
        f
    }

    /// Every way a sealed frame can be tampered with is refused.
    fn only_whole(b: &Trust, f: &[u8]) {
        assert_eq!(b.open("s2", "r", f), Err(Refusal::Forged), "moved");
        assert_eq!(b.open("s", "r2", f), Err(Refusal::Forged), "redirected");
        for i in 0..f.len() {
            let mut bad = f.to_vec();
            bad[i] ^= 1;
            assert!(b.open("s", "r", &bad).is_err(), "byte {i} altered");
        }
        for cut in 0..f.len() {
            assert!(b.open("s", "r", &f[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn seals_verify_only_whole_and_in_place() {
        let (ka, kb, kc, kr) = (
            nkeys::KeyPair::new_server(),
            nkeys::KeyPair::new_server(),
            nkeys::KeyPair::new_server(),
            nkeys::KeyPair::new_server(),
        );
        let members = [("a", &ka), ("b", &kb), ("c", &kc)];
        let (a, b, c) = (
            keyed("a", &ka, &members),
            keyed("b", &kb, &members),
            keyed("c", &kc, &members),
        );
        let want = |seq| Seal {
            signer: "a",
            instance: 7,
            seq,
            to: 9,
        };
        // Signed for anyone: every member checks it.
        let f = sealed(&a, "", 9);
        assert_eq!(f.len(), 4 + 1 + 1 + 24 + 64 + 1);
        assert_eq!(b.open("s", "r", &f), Ok((&b"call"[..], Some(want(1)))));
        assert_eq!(c.open("s", "r", &f), Ok((&b"call"[..], Some(want(1)))));
        only_whole(&b, &f);
        // Tagged for b with the key a and b share: b checks it, c cannot,
        // and a refuses it back as its own.
        let f = sealed(&a, "b", 9);
        assert_eq!(f.len(), 4 + 1 + 1 + 24 + 32 + 1);
        assert_eq!(b.open("s", "r", &f), Ok((&b"call"[..], Some(want(2)))));
        assert_eq!(c.open("s", "r", &f), Err(Refusal::Forged));
        assert_eq!(a.open("s", "r", &f), Err(Refusal::Forged));
        only_whole(&b, &f);
        // b's answer, tagged for a, checks at a.
        let f = sealed(&b, "a", 0);
        assert!(matches!(a.open("s", "r", &f), Ok((_, Some(s))) if s.signer == "b"));
        // A stranger's key, under a member's name or its own, either way.
        for receiver in ["", "b"] {
            let rogue_as_a = keyed("a", &kr, &members);
            let f = sealed(&rogue_as_a, receiver, 0);
            assert_eq!(b.open("s", "r", &f), Err(Refusal::Forged), "{receiver:?}");
            let rogue = keyed("r", &kr, &members);
            let f = sealed(&rogue, receiver, 0);
            assert_eq!(b.open("s", "r", &f), Err(Refusal::Stranger));
        }
        assert_eq!(b.open("s", "r", b"call"), Err(Refusal::Unsealed));
        // An open cluster neither seals nor checks.
        let f = sealed(&Trust::Open, "b", 0);
        assert_eq!(Trust::Open.open("s", "r", &f), Ok((&b"call"[..], None)));
    }

    #[test]
    fn pair_keys_agree_on_both_sides_and_differ_between_pairs() {
        let keys: Vec<_> = (0..3).map(|_| nkeys::KeyPair::new_server()).collect();
        let agree = |i: usize| Agreement::of(&keys[i].seed().unwrap()).unwrap();
        let tag = |k: ring::hmac::Key| ring::hmac::sign(&k, b"x").as_ref().to_vec();
        let pub_of = |i: usize| keys[i].public_key();
        let ab = tag(agree(0).pair_key("a", "b", &pub_of(1)).unwrap());
        let ba = tag(agree(1).pair_key("b", "a", &pub_of(0)).unwrap());
        let ac = tag(agree(0).pair_key("a", "c", &pub_of(2)).unwrap());
        assert_eq!(ab, ba);
        assert_ne!(ab, ac);
        assert!(agree(0).pair_key("a", "b", "not a key").is_none());
    }
}
