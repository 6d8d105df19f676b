//! Frames signed by the node that sends them, for a cluster whose
//! members are listed with their keys.
//!
//! Each node of such a cluster holds an nkey (an Ed25519 key pair, as
//! NATS uses) and the public keys of every member, by node name. Every
//! frame it sends — calls, answers, announcements, questions to every
//! node — gets a *seal*: a trailer naming the sender, its instance, a
//! sequence number, the instance the frame is meant for, and a signature
//! over all that together with the frame's subject and reply subject:
//!
//! ```text
//! [frame][signer][signer len: u8][instance: u64 LE][seq: u64 LE][to: u64 LE][signature: 64]
//! signature = Ed25519(SHA-256("warden-seal-1" subject 0 reply 0 frame signer len instance seq to))
//! ```
//!
//! The receiver checks the signature with the signer's listed key, so a
//! frame is refused if it was forged, altered, moved to another subject or
//! given another reply subject. Replays are refused by a [`Window`] per
//! signer (and per name served): an instance number starts with the
//! process's start time, so a restarted node's frames are newer than its
//! predecessor's, and within an instance each sequence number is
//! accepted once. A call also names the instance of the node it is sent
//! to, so a restarted server refuses the calls sent to its predecessor.
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

/// Bytes of a seal past its signer's name.
const FIXED: usize = 1 + 8 + 8 + 8 + 64;

/// What a seal says about its frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seal<'a> {
    /// The node that signed the frame.
    pub signer: &'a str,
    /// The signer's instance.
    pub instance: u64,
    /// The frame's number among those its signer's instance sent.
    pub seq: u64,
    /// The instance of the node the frame is meant for (0: any).
    pub to: u64,
}

/// How a node's frames are signed and checked.
pub enum Trust {
    /// No keys: nothing is signed or checked.
    Open,
    /// Signed with `me`, checked against `members`.
    Keyed {
        /// This node's name.
        node: String,
        /// This node's key pair.
        me: nkeys::KeyPair,
        /// This node's instance.
        instance: u64,
        /// The last sequence number used.
        seq: AtomicU64,
        /// Every member's public key, by node name.
        members: HashMap<String, nkeys::KeyPair>,
    },
}

/// Why a frame was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No seal, or one out of shape.
    Unsealed,
    /// A signer that is not a member.
    Stranger,
    /// A signature that does not verify.
    Forged,
}

impl Trust {
    /// How node `node`, instance `instance`, signs and checks: open
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
        let mut members = HashMap::new();
        for (name, public) in &keys.members {
            let key = nkeys::KeyPair::from_public_key(public)
                .map_err(|_| format!("cluster.members: {name}'s key is not an nkey public key"))?;
            members.insert(name.clone(), key);
        }
        match keys.members.get(node) {
            Some(k) if *k == me.public_key() => {}
            Some(_) => {
                return Err(format!(
                    "cluster.key: {path} is not the key cluster.members lists for node {node}"
                ))
            }
            None => return Err(format!("cluster.members: node {node} is not listed")),
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
    /// (0: any).
    pub fn seal(&self, subject: &str, reply: &str, frame: &mut Vec<u8>, to: u64) {
        let Trust::Keyed {
            node,
            me,
            instance,
            seq,
            ..
        } = self
        else {
            return;
        };
        let body = frame.len();
        frame.reserve(node.len() + FIXED);
        frame.extend_from_slice(node.as_bytes());
        frame.push(node.len() as u8);
        frame.extend_from_slice(&instance.to_le_bytes());
        let n = seq.fetch_add(1, Ordering::Relaxed) + 1;
        frame.extend_from_slice(&n.to_le_bytes());
        frame.extend_from_slice(&to.to_le_bytes());
        let digest = digest(subject, reply, &frame[..]);
        let signature = me.sign(&digest).unwrap_or_else(|_| vec![0; 64]);
        debug_assert_eq!((signature.len(), frame.len() - body), (64, node.len() + 25));
        frame.extend_from_slice(&signature);
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
        let (body, seal, signature) = split(frame).ok_or(Refusal::Unsealed)?;
        let key = members.get(seal.signer).ok_or(Refusal::Stranger)?;
        let signed = &frame[..frame.len() - 64];
        key.verify(&digest(subject, reply, signed), signature)
            .map_err(|_| Refusal::Forged)?;
        Ok((body, Some(seal)))
    }
}

/// The digest a seal signs.
fn digest(subject: &str, reply: &str, signed: &[u8]) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"warden-seal-1");
    h.update(subject.as_bytes());
    h.update([0]);
    h.update(reply.as_bytes());
    h.update([0]);
    h.update(signed);
    h.finalize().into()
}

/// Splits a sealed frame into the frame, its seal and its signature.
fn split(frame: &[u8]) -> Option<(&[u8], Seal<'_>, &[u8])> {
    let fixed_at = frame.len().checked_sub(FIXED)?;
    let (rest, fixed) = frame.split_at(fixed_at);
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
    Some((&rest[..signer_at], seal, &fixed[25..]))
}

/// Sequence numbers a receiver has seen from one signer, to refuse
/// replays: frames of an instance older than the newest heard are
/// refused, and within the newest each number is taken once. Frames may
/// arrive a little out of order (they are sent from several tasks), so
/// numbers up to [`Window::SPAN`] below the highest are still taken if
/// they were not seen.
#[derive(Debug, Clone, Default)]
pub struct Window {
    instance: u64,
    highest: u64,
    /// Bit `i` set: `highest - i` was seen.
    seen: [u64; Window::WORDS],
}

impl Window {
    const WORDS: usize = 16;
    /// How far below the highest number a frame may arrive.
    pub const SPAN: u64 = 64 * Self::WORDS as u64;

    /// Takes `(instance, seq)` if it was not taken before.
    pub fn take(&mut self, instance: u64, seq: u64) -> bool {
        if instance < self.instance {
            return false;
        }
        if instance > self.instance {
            *self = Window {
                instance,
                highest: seq,
                seen: [0; Self::WORDS],
            };
            self.seen[0] = 1;
            return true;
        }
        if seq > self.highest {
            self.shift(seq - self.highest);
            self.highest = seq;
            self.seen[0] |= 1;
            return true;
        }
        let back = self.highest - seq;
        if back >= Self::SPAN {
            return false;
        }
        let (word, bit) = ((back / 64) as usize, back % 64);
        let fresh = self.seen[word] & (1 << bit) == 0;
        self.seen[word] |= 1 << bit;
        fresh
    }

    /// Moves every seen bit `by` places further from the highest.
    fn shift(&mut self, by: u64) {
        if by >= Self::SPAN {
            self.seen = [0; Self::WORDS];
            return;
        }
        let (words, bits) = ((by / 64) as usize, (by % 64) as u32);
        for i in (0..Self::WORDS).rev() {
            let from = i.checked_sub(words);
            let low = from.map_or(0, |f| self.seen[f]);
            let lower = from
                .and_then(|f| f.checked_sub(1))
                .map_or(0, |f| self.seen[f]);
            self.seen[i] = if bits == 0 {
                low
            } else {
                (low << bits) | (lower >> (64 - bits))
            };
        }
    }
}

/// An instance number: the process's start time in ms, then 16 random
/// bits, so that a restarted node's is the larger.
pub fn instance_number() -> u64 {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    (ms << 16) | u64::from(rand::random::<u16>())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keyed(node: &str, me: &nkeys::KeyPair, members: &[(&str, &nkeys::KeyPair)]) -> Trust {
        let public = |k: &nkeys::KeyPair| nkeys::KeyPair::from_public_key(&k.public_key()).unwrap();
        Trust::Keyed {
            node: node.into(),
            me: nkeys::KeyPair::from_seed(&me.seed().unwrap()).unwrap(),
            instance: 7,
            seq: AtomicU64::new(0),
            members: members
                .iter()
                .map(|(n, k)| (n.to_string(), public(k)))
                .collect(),
        }
    }

    #[test]
    fn seals_verify_only_whole_and_in_place() {
        let (ka, kb, kr) = (
            nkeys::KeyPair::new_server(),
            nkeys::KeyPair::new_server(),
            nkeys::KeyPair::new_server(),
        );
        let members = [("a", &ka), ("b", &kb)];
        let (a, b) = (keyed("a", &ka, &members), keyed("b", &kb, &members));
        let mut f = b"call".to_vec();
        a.seal("s", "r", &mut f, 9);
        let (body, seal) = b.open("s", "r", &f).unwrap();
        let want = Seal {
            signer: "a",
            instance: 7,
            seq: 1,
            to: 9,
        };
        assert_eq!((body, seal), (&b"call"[..], Some(want)));
        assert_eq!(b.open("s2", "r", &f), Err(Refusal::Forged), "moved");
        assert_eq!(b.open("s", "r2", &f), Err(Refusal::Forged), "redirected");
        for i in 0..f.len() {
            let mut bad = f.clone();
            bad[i] ^= 1;
            assert!(b.open("s", "r", &bad).is_err(), "byte {i} altered");
        }
        for cut in 0..f.len() {
            assert!(b.open("s", "r", &f[..cut]).is_err(), "cut at {cut}");
        }
        // A stranger's key, under a member's name or its own.
        let rogue_as_a = keyed("a", &kr, &members);
        let mut f = b"call".to_vec();
        rogue_as_a.seal("s", "r", &mut f, 0);
        assert_eq!(b.open("s", "r", &f), Err(Refusal::Forged));
        let rogue = keyed("r", &kr, &members);
        let mut f = b"call".to_vec();
        rogue.seal("s", "r", &mut f, 0);
        assert_eq!(b.open("s", "r", &f), Err(Refusal::Stranger));
        assert_eq!(b.open("s", "r", b"call"), Err(Refusal::Unsealed));
        // An open cluster neither seals nor checks.
        let mut f = b"call".to_vec();
        Trust::Open.seal("s", "r", &mut f, 0);
        assert_eq!(Trust::Open.open("s", "r", &f), Ok((&b"call"[..], None)));
    }

    #[test]
    fn windows_take_each_number_once_and_no_older_instance() {
        let mut w = Window::default();
        assert!(w.take(5, 10));
        assert!(!w.take(5, 10), "a replay");
        assert!(w.take(5, 8) && w.take(5, 9), "late, not seen");
        assert!(!w.take(5, 8), "late, seen");
        assert!(w.take(5, 10 + Window::SPAN));
        assert!(!w.take(5, 10), "fell out of the window");
        assert!(w.take(5, 11), "just inside it");
        assert!(!w.take(4, 1_000_000), "an older instance");
        assert!(w.take(6, 1), "a newer one starts again");
        assert!(!w.take(5, 1_000_000));
        // Out of order across word boundaries.
        let mut w = Window::default();
        let order: Vec<u64> = (1..=300).rev().step_by(3).chain(1..=300).collect();
        let taken = order.iter().filter(|&&s| w.take(1, s)).count();
        assert_eq!(taken, 300, "each number once");
    }

    #[test]
    fn instances_grow_with_time() {
        let a = instance_number();
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(instance_number() > a);
    }
}
