//! The bytes a server holds for its clients' requests, bounded twice:
//! per connection and per server.
//!
//! Everything a request makes the server keep in memory is charged from
//! the moment it arrives until it is gone: its head (names and values,
//! plus [`HEADER_OVERHEAD`] per header), its body as each frame is read,
//! and its answer until the last of it has been handed to the protocol.
//! A charge that would take a connection past its budget, or the server
//! past its own, is refused: the request is answered 503 at once and
//! what it held is released. So one HTTP/2 connection with a hundred
//! streams holds at most its connection's budget, and a thousand
//! connections together at most the server's.
//!
//! A charge is an [`Arc<Held>`]: the request's body, its handler and its
//! answer's body share it, and the bytes are released when the last of
//! them lets go (the request answered, reset, or its connection gone).
//!
//! No lock: each budget is one atomic counter, charged with a
//! compare-and-swap that never takes it past its limit.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Bytes charged per header beside its name and value (the map's entry).
pub const HEADER_OVERHEAD: u64 = 64;

/// One bound: bytes in use against a limit.
#[derive(Debug)]
pub struct Budget {
    used: AtomicU64,
    limit: u64,
}

impl Budget {
    /// A budget of `limit` bytes.
    pub fn new(limit: u64) -> Arc<Budget> {
        Arc::new(Budget {
            used: AtomicU64::new(0),
            limit,
        })
    }

    /// Bytes charged now.
    #[cfg(test)]
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Takes `n` bytes if they fit.
    fn take(&self, n: u64) -> bool {
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                u.checked_add(n).filter(|&t| t <= self.limit)
            })
            .is_ok()
    }

    fn give(&self, n: u64) {
        self.used.fetch_sub(n, Ordering::AcqRel);
    }
}

/// Marks an answer whose bytes its handler already charged (a servlet's
/// reply, charged before it was copied out of the servlet).
#[derive(Debug, Clone, Copy)]
pub struct Charged;

/// What one request holds, charged to its connection and its server.
#[derive(Debug)]
pub struct Held {
    conn: Arc<Budget>,
    server: Arc<Budget>,
    bytes: AtomicU64,
}

/// A charge did not fit: which budget was full.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// The connection's.
    Connection,
    /// The server's.
    Server,
}

impl std::fmt::Display for Full {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Full::Connection => "this connection's requests hold all the memory it may use",
            Full::Server => "the server's requests hold all the memory it may use",
        })
    }
}

impl std::error::Error for Full {}

impl Held {
    /// A request's charge, starting at `n` bytes (its head).
    pub fn new(conn: &Arc<Budget>, server: &Arc<Budget>, n: u64) -> Result<Arc<Held>, Full> {
        let held = Arc::new(Held {
            conn: conn.clone(),
            server: server.clone(),
            bytes: AtomicU64::new(0),
        });
        held.charge(n)?;
        Ok(held)
    }

    /// Charges `n` more bytes to both budgets, or neither.
    pub fn charge(&self, n: u64) -> Result<(), Full> {
        if n == 0 {
            return Ok(());
        }
        if !self.conn.take(n) {
            return Err(Full::Connection);
        }
        if !self.server.take(n) {
            self.conn.give(n);
            return Err(Full::Server);
        }
        self.bytes.fetch_add(n, Ordering::AcqRel);
        Ok(())
    }

    /// Gives back `n` of the bytes charged (a streamed body's piece,
    /// handed to the protocol). At most what is charged is given back.
    pub fn release(&self, n: u64) {
        let given = self
            .bytes
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |b| Some(b - n.min(b)))
            .map_or(0, |b| n.min(b));
        self.conn.give(given);
        self.server.give(given);
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let n = *self.bytes.get_mut();
        self.conn.give(n);
        self.server.give(n);
    }
}

/// A streamed body's bytes are charged to its request while a pipe
/// holds them.
impl crate::pipe::Meter for Held {
    fn charge(&self, n: u64) -> Result<(), String> {
        Held::charge(self, n).map_err(|full| full.to_string())
    }

    fn release(&self, n: u64) {
        Held::release(self, n)
    }
}

/// What a request's head costs: its headers' names and values, each
/// with [`HEADER_OVERHEAD`], and its target.
pub fn head_bytes(parts: &hyper::http::request::Parts) -> u64 {
    let target = parts.uri.path_and_query().map_or(0, |pq| pq.as_str().len()) as u64;
    let headers: u64 = parts
        .headers
        .iter()
        .map(|(k, v)| (k.as_str().len() + v.len()) as u64 + HEADER_OVERHEAD)
        .sum();
    target + headers + HEADER_OVERHEAD
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_charge_fits_both_budgets_or_takes_nothing() {
        let (conn, server) = (Budget::new(100), Budget::new(150));
        let a = Held::new(&conn, &server, 60).unwrap();
        assert_eq!(Held::new(&conn, &server, 50).unwrap_err(), Full::Connection);
        assert_eq!((conn.used(), server.used()), (60, 60));
        let other = Budget::new(100);
        let b = Held::new(&other, &server, 80).unwrap();
        assert_eq!(b.charge(20).unwrap_err(), Full::Server);
        assert_eq!((other.used(), server.used()), (80, 140));
        a.charge(10).unwrap();
        assert_eq!(a.charge(1).unwrap_err(), Full::Server);
        assert_eq!((conn.used(), server.used()), (70, 150));
        drop(a);
        assert_eq!((conn.used(), server.used()), (0, 80));
        let c = Held::new(&conn, &server, 30).unwrap();
        assert_eq!(c.charge(71).unwrap_err(), Full::Connection);
        drop(c);
        b.charge(20).unwrap();
        b.release(30);
        assert_eq!((other.used(), server.used()), (70, 70));
        b.release(1000);
        assert_eq!((other.used(), server.used()), (0, 0));
        b.charge(5).unwrap();
        drop(b);
        assert_eq!((other.used(), server.used()), (0, 0));
    }

    #[test]
    fn concurrent_charges_never_pass_the_limit() {
        let (conn, server) = (Budget::new(u64::MAX), Budget::new(1000));
        let peak = Arc::new(AtomicU64::new(0));
        std::thread::scope(|s| {
            for _ in 0..4 {
                let (conn, server, peak) = (&conn, &server, &peak);
                s.spawn(move || {
                    for i in 0..20_000u64 {
                        if let Ok(h) = Held::new(conn, server, 1 + i % 300) {
                            peak.fetch_max(server.used(), Ordering::Relaxed);
                            let _ = h.charge(i % 100);
                            peak.fetch_max(server.used(), Ordering::Relaxed);
                        }
                    }
                });
            }
        });
        assert!(peak.load(Ordering::Relaxed) <= 1000);
        assert_eq!((conn.used(), server.used()), (0, 0));
    }
}
