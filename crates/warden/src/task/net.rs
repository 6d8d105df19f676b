//! A task's network account: its sockets (bounded in number, their
//! buffers charged to its memory budget) and the bytes it sent and
//! received.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Default for the most sockets (listeners and connections) a task may
/// hold at once.
pub const DEFAULT_MAX_SOCKETS: u32 = 256;

/// Default requested send and receive buffer of a socket, bytes (the host
/// kernel doubles it for its bookkeeping); a task's `socket_buffer`.
pub const DEFAULT_SOCKET_BUFFER: usize = 64 * 1024;

/// Counters and the socket bound of one task.
#[derive(Debug)]
pub struct NetAccount {
    /// Most sockets it may hold at once.
    pub max_sockets: u32,
    sockets: AtomicU32,
    /// Connections it opened or accepted, ever.
    pub connections: AtomicU64,
    /// Bytes it sent.
    pub sent: AtomicU64,
    /// Bytes it received.
    pub received: AtomicU64,
}

impl Default for NetAccount {
    fn default() -> Self {
        NetAccount::new(DEFAULT_MAX_SOCKETS)
    }
}

impl NetAccount {
    /// An account allowing `max_sockets` sockets.
    pub fn new(max_sockets: u32) -> Self {
        NetAccount {
            max_sockets,
            sockets: AtomicU32::new(0),
            connections: AtomicU64::new(0),
            sent: AtomicU64::new(0),
            received: AtomicU64::new(0),
        }
    }

    /// Takes one of the task's socket slots; false if all are held.
    pub fn take_socket(&self) -> bool {
        self.sockets
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < self.max_sockets).then_some(n + 1)
            })
            .is_ok()
    }

    /// Returns a socket slot.
    pub fn return_socket(&self) {
        self.sockets.fetch_sub(1, Ordering::AcqRel);
    }

    /// Sockets held now.
    pub fn sockets(&self) -> u32 {
        self.sockets.load(Ordering::Relaxed)
    }

    /// Counts a connection opened or accepted.
    pub fn count_connection(&self) {
        self.connections.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts bytes sent.
    pub fn count_sent(&self, n: usize) {
        self.sent.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// Counts bytes received.
    pub fn count_received(&self, n: usize) {
        self.received.fetch_add(n as u64, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn socket_slots_are_bounded_and_returned() {
        let a = NetAccount::new(2);
        assert!(a.take_socket() && a.take_socket());
        assert!(!a.take_socket());
        a.return_socket();
        assert!(a.take_socket());
        assert_eq!(a.sockets(), 2);
    }
}
