//! Warden's own endpoints, which no task grant reaches by accident.
//!
//! The control API, every `[[http]]` server and the cluster's broker are
//! the runtime's own: a task that could connect to them could read other
//! tasks' output, answer their calls or pose as the operator. So a task's
//! `connect` that would reach one of them is refused with `denied`, unless
//! one of its grants names that endpoint exactly (one host address, one
//! port): `127.0.0.1:*` or `*:*` do not.
//!
//! Reaching is judged as the host kernel routes: a listener on a
//! specific address is reached by that address; one on an unspecified
//! address (`0.0.0.0`, `[::]`) by any address of this machine — loopback,
//! the unspecified address itself (Linux connects it to loopback), or any
//! address assigned to one of its interfaces (found by binding a UDP
//! socket to it, only when the port matches). IPv4-mapped addresses are
//! IPv4 (see [`super::grant::canonical`]).
//!
//! The registry is process-wide: a task of one runtime may not reach the
//! servers of another in the same process either. Entries are removed
//! when their [`OwnEndpoint`] guard is dropped.

use super::grant::{allowed, canonical, Grant};
use std::net::{IpAddr, SocketAddr};
use std::sync::RwLock;

/// The endpoints registered now, each with a number its guard removes.
static ENDPOINTS: RwLock<Vec<(u64, SocketAddr)>> = RwLock::new(Vec::new());

/// Keeps an endpoint registered until dropped.
#[derive(Debug)]
pub struct OwnEndpoint(u64);

/// Registers `addr` (a listener's local address, or a peer the runtime
/// connects to) as Warden's own.
pub fn register(addr: SocketAddr) -> OwnEndpoint {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut all = ENDPOINTS.write().unwrap_or_else(|e| e.into_inner());
    all.push((n, canonical(addr)));
    OwnEndpoint(n)
}

impl Drop for OwnEndpoint {
    fn drop(&mut self) {
        let mut all = ENDPOINTS.write().unwrap_or_else(|e| e.into_inner());
        all.retain(|&(n, _)| n != self.0);
    }
}

/// Whether a task with `grants` may connect to `addr`: a grant covers
/// it, and if it is one of Warden's own endpoints, a grant names it
/// exactly.
pub fn may_connect(grants: &[Grant], addr: &SocketAddr) -> bool {
    allowed(grants, addr)
        && match reached(addr) {
            None => true,
            Some(_) => grants.iter().any(|g| g.names_exactly(addr)),
        }
}

/// The own endpoint a connection to `target` would reach, if any.
pub fn reached(target: &SocketAddr) -> Option<SocketAddr> {
    let target = canonical(*target);
    let all = ENDPOINTS.read().unwrap_or_else(|e| e.into_inner());
    all.iter()
        .map(|&(_, e)| e)
        .filter(|e| e.port() == target.port())
        .find(|e| reaches(target.ip(), e.ip()))
}

/// Whether connecting to `to` reaches an endpoint bound to `bound`.
fn reaches(to: IpAddr, bound: IpAddr) -> bool {
    if to == bound {
        return true;
    }
    if !bound.is_unspecified() {
        // A specific address is reached only by itself, or by the
        // unspecified address when it is loopback's.
        return to.is_unspecified() && bound.is_loopback();
    }
    to.is_loopback() || to.is_unspecified() || assigned_here(to)
}

/// Whether `ip` is an address of one of this machine's interfaces.
fn assigned_here(ip: IpAddr) -> bool {
    std::net::UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_registered_endpoint_is_reached_by_the_addresses_that_route_to_it() {
        let lo = register(a("127.0.0.1:1"));
        let any = register(a("0.0.0.0:2"));
        let v6 = register(a("[::]:3"));
        assert_eq!(reached(&a("127.0.0.1:1")), Some(a("127.0.0.1:1")));
        assert_eq!(reached(&a("[::ffff:127.0.0.1]:1")), Some(a("127.0.0.1:1")));
        assert_eq!(reached(&a("0.0.0.0:1")), Some(a("127.0.0.1:1")));
        assert_eq!(reached(&a("127.0.0.2:1")), None);
        assert_eq!(reached(&a("127.0.0.1:4")), None);
        for to in ["127.0.0.1:2", "127.9.9.9:2", "0.0.0.0:2"] {
            assert_eq!(reached(&a(to)), Some(a("0.0.0.0:2")), "{to}");
        }
        assert_eq!(reached(&a("192.0.2.1:2")), None, "not this machine's");
        for to in ["[::1]:3", "127.0.0.1:3", "[::]:3"] {
            assert_eq!(reached(&a(to)), Some(a("[::]:3")), "{to}");
        }
        drop((lo, any, v6));
        assert_eq!(reached(&a("127.0.0.1:1")), None, "gone with its guard");
    }

    #[test]
    fn own_endpoints_need_a_grant_that_names_them() {
        let own = register(a("127.0.0.1:47"));
        let wide = [
            Grant::parse("127.0.0.1:*").unwrap(),
            Grant::parse("*:*").unwrap(),
        ];
        assert!(!may_connect(&wide, &a("127.0.0.1:47")));
        assert!(!may_connect(&wide, &a("[::ffff:127.0.0.1]:47")));
        assert!(may_connect(&wide, &a("127.0.0.1:48")));
        let exact = [Grant::parse("127.0.0.1:47").unwrap()];
        assert!(may_connect(&exact, &a("127.0.0.1:47")));
        drop(own);
        assert!(may_connect(&wide, &a("127.0.0.1:47")));
    }
}
