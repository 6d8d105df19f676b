//! Network grants: the addresses a task may listen on and connect to.
//!
//! A grant is `host:port`, as a manifest writes it in `listen` or
//! `connect`:
//!
//! - host: an IPv4 address (`127.0.0.1`), an IPv6 address in brackets
//!   (`[::1]`), either with a prefix length for a whole network
//!   (`10.0.0.0/8`, `[fd00::]/8`), or `*` for any address;
//! - port: a number, a range `8000-8099`, or `*` for any port (a request
//!   for port 0, "any free port", needs a grant that covers 0).
//!
//! Checking is pure and happens before any system call: a request outside
//! every grant is refused with `denied`. Names are not resolved: a task
//! gives addresses as numbers, so a grant cannot be escaped through DNS.
//! An IPv4-mapped IPv6 address (`[::ffff:127.0.0.1]`) reaches the IPv4
//! host it names, so it is that IPv4 address, in grants and requests
//! alike ([`canonical`]): an IPv6 grant never lets a task reach IPv4.

use std::net::{IpAddr, SocketAddr};

/// One grant: a network and a port range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    net: Option<(IpAddr, u8)>,
    ports: (u16, u16),
}

impl Grant {
    /// Parses a manifest grant.
    pub fn parse(text: &str) -> Result<Grant, String> {
        let bad = |why: &str| format!("bad address grant {text:?}: {why}");
        let (host, port) = text
            .trim()
            .rsplit_once(':')
            .ok_or_else(|| bad("expected host:port, such as \"127.0.0.1:8080\""))?;
        let ports = match port {
            "*" => (0, u16::MAX),
            p => match p.split_once('-') {
                Some((lo, hi)) => (parse_port(lo).map_err(|e| bad(&e))?, {
                    parse_port(hi).map_err(|e| bad(&e))?
                }),
                None => {
                    let n = parse_port(p).map_err(|e| bad(&e))?;
                    (n, n)
                }
            },
        };
        if ports.0 > ports.1 {
            return Err(bad("the port range is empty"));
        }
        let net = match host {
            "*" => None,
            h => Some(parse_net(h).map_err(|e| bad(&e))?),
        };
        Ok(Grant { net, ports })
    }

    /// Whether the grant covers `addr`.
    pub fn covers(&self, addr: &SocketAddr) -> bool {
        let addr = canonical(*addr);
        let port = addr.port();
        if port < self.ports.0 || port > self.ports.1 {
            return false;
        }
        match self.net {
            None => true,
            Some((net, len)) => in_net(addr.ip(), net, len),
        }
    }

    /// Whether the grant names `addr` alone: one host address and one
    /// port, as a grant to one of Warden's own endpoints must.
    pub fn names_exactly(&self, addr: &SocketAddr) -> bool {
        let addr = canonical(*addr);
        let host = match self.net {
            Some((ip, len)) => ip == addr.ip() && len == if ip.is_ipv4() { 32 } else { 128 },
            None => false,
        };
        host && self.ports == (addr.port(), addr.port())
    }
}

/// Whether any of `grants` covers `addr`.
pub fn allowed(grants: &[Grant], addr: &SocketAddr) -> bool {
    grants.iter().any(|g| g.covers(addr))
}

/// Parses a socket address as a task gives it: numbers only, IPv6 in
/// brackets; at most 64 bytes (longer text is no address). An
/// IPv4-mapped address comes back as the IPv4 address it is.
pub fn parse_addr(text: &[u8]) -> Option<SocketAddr> {
    if text.len() > 64 {
        return None;
    }
    std::str::from_utf8(text).ok()?.parse().ok().map(canonical)
}

/// `addr` with an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) made the
/// IPv4 address it reaches; any other address as it is.
pub fn canonical(addr: SocketAddr) -> SocketAddr {
    match addr {
        SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(IpAddr::V4(v4), v6.port()),
            None => addr,
        },
        v4 => v4,
    }
}

fn parse_port(p: &str) -> Result<u16, String> {
    p.parse()
        .map_err(|_| format!("port {p:?} is not a number from 0 to 65535"))
}

fn parse_net(host: &str) -> Result<(IpAddr, u8), String> {
    let (ip, len) = match host.strip_prefix('[') {
        // [v6] or [v6]/len: the prefix length follows the bracket.
        Some(rest) => {
            let (v6, after) = rest
                .split_once(']')
                .ok_or_else(|| format!("{host:?} lacks its closing bracket"))?;
            let len = match after {
                "" => None,
                a => Some(
                    a.strip_prefix('/')
                        .ok_or_else(|| format!("{host:?} is not an address"))?,
                ),
            };
            (&host[..v6.len() + 2], len)
        }
        None => match host.rsplit_once('/') {
            Some((ip, len)) => (ip, Some(len)),
            None => (host, None),
        },
    };
    let ip = ip
        .strip_prefix('[')
        .and_then(|i| i.strip_suffix(']'))
        .map_or_else(
            || {
                ip.parse::<std::net::Ipv4Addr>()
                    .map(IpAddr::V4)
                    .map_err(|_| format!("{ip:?} is not an IPv4 address (write IPv6 in brackets)"))
            },
            |v6| {
                v6.parse::<std::net::Ipv6Addr>()
                    .map(IpAddr::V6)
                    .map_err(|_| format!("{v6:?} is not an IPv6 address"))
            },
        )?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    let len = match len {
        None => max,
        Some(l) => match l.parse::<u8>() {
            Ok(n) if n <= max => n,
            _ => return Err(format!("prefix length {l:?} is not 0 to {max}")),
        },
    };
    // A network inside ::ffff:0:0/96 is the IPv4 network it maps.
    match ip {
        IpAddr::V6(v6) if len >= 96 => match v6.to_ipv4_mapped() {
            Some(v4) => Ok((IpAddr::V4(v4), len - 96)),
            None => Ok((ip, len)),
        },
        _ => Ok((ip, len)),
    }
}

fn in_net(ip: IpAddr, net: IpAddr, len: u8) -> bool {
    let (a, b, bits) = match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(b)) => (u32::from(a) as u128, u32::from(b) as u128, 32),
        (IpAddr::V6(a), IpAddr::V6(b)) => (u128::from(a), u128::from(b), 128),
        _ => return false,
    };
    let shift = bits - u32::from(len);
    shift >= bits || (a >> shift) == (b >> shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn exact_addresses_and_ports() {
        let g = Grant::parse("127.0.0.1:8080").unwrap();
        assert!(g.covers(&addr("127.0.0.1:8080")));
        assert!(!g.covers(&addr("127.0.0.1:8081")));
        assert!(!g.covers(&addr("127.0.0.2:8080")));
        assert!(!g.covers(&addr("[::1]:8080")));
        let g = Grant::parse("[::1]:0").unwrap();
        assert!(g.covers(&addr("[::1]:0")));
        assert!(!g.covers(&addr("[::1]:80")));
    }

    #[test]
    fn networks_ranges_and_wildcards() {
        let g = Grant::parse("10.0.0.0/8:8000-8099").unwrap();
        assert!(g.covers(&addr("10.200.3.4:8000")));
        assert!(g.covers(&addr("10.0.0.1:8099")));
        assert!(!g.covers(&addr("10.0.0.1:8100")));
        assert!(!g.covers(&addr("11.0.0.1:8000")));
        let any = Grant::parse("*:*").unwrap();
        assert!(any.covers(&addr("[2001:db8::1]:1")));
        let all4 = Grant::parse("0.0.0.0/0:443").unwrap();
        assert!(all4.covers(&addr("8.8.8.8:443")));
        assert!(!all4.covers(&addr("[::1]:443")));
        let v6 = Grant::parse("[fd00::]/8:*").unwrap();
        assert!(v6.covers(&addr("[fd12::1]:9")));
        assert!(!v6.covers(&addr("[fe80::1]:9")));
        assert!(allowed(&[g, any], &addr("1.2.3.4:5")));
        assert!(!allowed(&[], &addr("127.0.0.1:80")));
    }

    #[test]
    fn ipv4_mapped_addresses_are_ipv4() {
        let all6 = Grant::parse("[::]/0:*").unwrap();
        let mapped = addr("[::ffff:127.0.0.1]:80");
        assert!(!all6.covers(&mapped), "all IPv6 is not IPv4 loopback");
        assert!(all6.covers(&addr("[::1]:80")));
        assert_eq!(
            parse_addr(b"[::ffff:127.0.0.1]:80"),
            Some(addr("127.0.0.1:80"))
        );
        let lo = Grant::parse("127.0.0.1:80").unwrap();
        assert!(lo.covers(&mapped), "the same host, spelled as IPv6");
        let mapped_net = Grant::parse("[::ffff:10.0.0.0]/104:*").unwrap();
        assert!(mapped_net.covers(&addr("10.1.2.3:5")));
        assert!(!mapped_net.covers(&addr("11.1.2.3:5")));
        assert!(!mapped_net.covers(&addr("[::1]:5")));
    }

    #[test]
    fn bad_grants_say_why() {
        for (text, why) in [
            ("localhost:80", "not an IPv4"),
            ("127.0.0.1", "host:port"),
            ("127.0.0.1:70000", "0 to 65535"),
            ("127.0.0.1:9-1", "empty"),
            ("10.0.0.0/33:1", "prefix length"),
            ("[::1/8]:1", "not an IPv6"),
        ] {
            let e = Grant::parse(text).unwrap_err();
            assert!(e.contains(why), "{text}: {e}");
        }
    }

    #[test]
    fn task_addresses_are_numbers_and_short() {
        assert_eq!(parse_addr(b"127.0.0.1:80"), Some(addr("127.0.0.1:80")));
        assert_eq!(parse_addr(b"[::1]:0"), Some(addr("[::1]:0")));
        assert_eq!(parse_addr(b"localhost:80"), None);
        assert_eq!(parse_addr(b"127.0.0.1:65536"), None);
        assert_eq!(parse_addr(b"127.0.0.1"), None);
        assert_eq!(parse_addr(&[b'1'; 1_000_000]), None);
        assert_eq!(parse_addr(b"\xff\xfe"), None);
    }
}
