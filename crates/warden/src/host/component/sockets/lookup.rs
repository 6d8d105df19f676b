//! `wasi:sockets/ip-name-lookup`: a component's name lookups.
//!
//! An address written as text (`127.0.0.1`, `::1`, `[::1]`) resolves to
//! itself at once, for every task. A host name is looked up by the host's
//! resolver only for a task with at least one `connect` grant (a lookup
//! sends the name to the host's DNS servers: a task that may reach
//! nothing may not send that either; it gets `access-denied`), at most
//! [`MAX_IN_FLIGHT`] at a time per task (more: `temporary-resolver-failure`),
//! each given up after [`TIMEOUT`]. What a lookup returns grants nothing:
//! a connection is checked against the grants as any other.

use super::View;
use std::future::Future;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::task::JoinHandle;
use wasmtime::component::Resource;
use wasmtime_wasi::p2::bindings::sockets::ip_name_lookup::ResolveAddressStream;
use wasmtime_wasi::p2::bindings::sockets::ip_name_lookup::{Host, HostResolveAddressStream};
use wasmtime_wasi::p2::bindings::sockets::network::{ErrorCode, IpAddress};
use wasmtime_wasi::p2::{DynPollable, Network, Pollable, SocketResult};

/// Lookups of host names a task may have under way at once.
pub(super) const MAX_IN_FLIGHT: u32 = 4;

/// The longest a lookup is waited for.
pub(super) const TIMEOUT: Duration = Duration::from_secs(10);

/// A task's lookups under way.
#[derive(Default)]
pub(crate) struct InFlight(AtomicU32);

/// One lookup: under way, or its addresses.
pub(super) struct Lookup {
    running: Option<JoinHandle<Result<Vec<IpAddr>, ErrorCode>>>,
    found: Result<std::vec::IntoIter<IpAddr>, ErrorCode>,
}

/// A place among a task's lookups under way, given back when the
/// host's resolver has answered (or the wait for it has ended).
struct Slot(Arc<InFlight>);

impl Slot {
    fn take(all: &Arc<InFlight>) -> Option<Slot> {
        let taken = all
            .0
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < MAX_IN_FLIGHT).then_some(n + 1)
            });
        taken.ok().map(|_| Slot(all.clone()))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0 .0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// `name` as an address written as text, if it is one.
fn literal(name: &str) -> Option<IpAddr> {
    let bare = name
        .strip_prefix('[')
        .and_then(|n| n.strip_suffix(']'))
        .unwrap_or(name);
    bare.parse().ok()
}

/// Whether `name` is a host name the resolver may be asked for.
fn host_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 253
        && name.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        })
}

/// Looks `name` up. The slot is given back when the host's resolver
/// answers, even after the wait for it has ended: a lookup the guest
/// gave up on still holds a resolver thread until then.
async fn resolve(name: String, slot: Slot) -> Result<Vec<IpAddr>, ErrorCode> {
    use std::net::ToSocketAddrs;
    let blocking = tokio::task::spawn_blocking(move || {
        let found = (name.as_str(), 0).to_socket_addrs();
        drop(slot);
        found
    });
    match tokio::time::timeout(TIMEOUT, blocking).await {
        Err(_) | Ok(Err(_)) => Err(ErrorCode::TemporaryResolverFailure),
        Ok(Ok(Err(_))) => Err(ErrorCode::NameUnresolvable),
        Ok(Ok(Ok(addrs))) => Ok(addrs.map(|a| a.ip().to_canonical()).collect()),
    }
}

impl View<'_> {
    /// The lookup of `name`, begun or done.
    fn lookup(&mut self, name: String) -> Result<Lookup, ErrorCode> {
        if let Some(ip) = literal(&name) {
            return Ok(Lookup {
                running: None,
                found: Ok(vec![ip.to_canonical()].into_iter()),
            });
        }
        if !host_name(&name) {
            return Err(ErrorCode::InvalidArgument);
        }
        if self.net.connect.is_empty() {
            return Err(ErrorCode::AccessDenied);
        }
        let slot = Slot::take(self.lookups).ok_or(ErrorCode::TemporaryResolverFailure)?;
        Ok(Lookup {
            running: Some(tokio::spawn(resolve(name, slot))),
            found: Ok(Vec::new().into_iter()),
        })
    }
}

/// Wasmtime's handle for a lookup, as this implementation's.
fn mine(r: &Resource<ResolveAddressStream>) -> Resource<Lookup> {
    Resource::new_borrow(r.rep())
}

impl Host for View<'_> {
    fn resolve_addresses(
        &mut self,
        network: Resource<Network>,
        name: String,
    ) -> SocketResult<Resource<ResolveAddressStream>> {
        self.table.get(&network)?;
        let lookup = self.lookup(name)?;
        let r = self.table.push(lookup)?;
        Ok(Resource::new_own(r.rep()))
    }
}

impl Lookup {
    /// Takes the lookup's answer if it has come.
    fn poll_answer(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Some(running) = &mut self.running else {
            return Poll::Ready(());
        };
        let Poll::Ready(answer) = std::pin::Pin::new(running).poll(cx) else {
            return Poll::Pending;
        };
        self.running = None;
        self.found = match answer {
            Ok(found) => found.map(Vec::into_iter),
            Err(_) => Err(ErrorCode::PermanentResolverFailure),
        };
        Poll::Ready(())
    }
}

impl HostResolveAddressStream for View<'_> {
    fn resolve_next_address(
        &mut self,
        this: Resource<ResolveAddressStream>,
    ) -> SocketResult<Option<IpAddress>> {
        let lookup = self.table.get_mut(&mine(&this))?;
        let mut cx = Context::from_waker(std::task::Waker::noop());
        if lookup.poll_answer(&mut cx).is_pending() {
            return Err(ErrorCode::WouldBlock.into());
        }
        match &mut lookup.found {
            Ok(addrs) => Ok(addrs.next().map(IpAddress::from)),
            Err(e) => Err((*e).into()),
        }
    }

    fn subscribe(
        &mut self,
        this: Resource<ResolveAddressStream>,
    ) -> wasmtime::Result<Resource<DynPollable>> {
        wasmtime_wasi::p2::subscribe(self.table, mine(&this))
    }

    fn drop(&mut self, this: Resource<ResolveAddressStream>) -> wasmtime::Result<()> {
        self.table.delete(Resource::<Lookup>::new_own(this.rep()))?;
        Ok(())
    }
}

impl Drop for Lookup {
    fn drop(&mut self) {
        if let Some(running) = &self.running {
            running.abort();
        }
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for Lookup {
    async fn ready(&mut self) {
        std::future::poll_fn(|cx| self.poll_answer(cx)).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_and_host_names() {
        assert_eq!(literal("127.0.0.1"), Some("127.0.0.1".parse().unwrap()));
        assert_eq!(literal("[::1]"), Some("::1".parse().unwrap()));
        assert_eq!(literal("::1"), Some("::1".parse().unwrap()));
        assert_eq!(literal("localhost"), None);
        assert!(host_name("db.example.org"));
        assert!(host_name("localhost"));
        assert!(!host_name(""));
        assert!(!host_name("a..b"));
        assert!(!host_name("bad name"));
        assert!(!host_name(&"a".repeat(64)));
        assert!(!host_name(&["a"; 200].join(".")));
    }

    #[test]
    fn at_most_so_many_lookups_at_once() {
        let all = Arc::new(InFlight::default());
        let held: Vec<Slot> = (0..MAX_IN_FLIGHT)
            .map(|_| Slot::take(&all).unwrap())
            .collect();
        assert!(Slot::take(&all).is_none());
        drop(held);
        assert!(Slot::take(&all).is_some());
    }
}
