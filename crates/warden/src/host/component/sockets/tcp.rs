//! `wasi:sockets/tcp` and `tcp-create-socket`: a component's TCP socket
//! through WASI's life of one (created, bound, listening or connecting,
//! connected), on Warden's listeners and connections (`crate::net::socket`).
//!
//! The socket lives in the task's resource table as a [`Socket`]; the
//! bindings name it by Wasmtime's `TcpSocket`, whose table entries this
//! implementation alone makes and reads, so a handle's number is taken
//! over to this type ([`mine`]). The component model checks a handle's
//! type before the host sees it, and the table checks the entry's.

use super::streams::{self, Account};
use super::View;
use crate::host::sockets::{return_wasi_socket, take_wasi_socket};
use crate::ipc::Errno;
use crate::net::grant::allowed;
use crate::net::own::may_connect;
use crate::net::socket::{Bound, Conn, Listener};
use crate::task::TaskShared;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::task::Poll;
use wasmtime::component::Resource;
use wasmtime_wasi::p2::bindings::sockets::network::{ErrorCode, IpAddressFamily, IpSocketAddress};
use wasmtime_wasi::p2::bindings::sockets::{tcp, tcp_create_socket};
use wasmtime_wasi::p2::{DynInputStream, DynOutputStream, DynPollable, Network, Pollable};
use wasmtime_wasi::p2::{SocketResult, TcpSocket};

/// Bytes charged for a socket beyond its host-kernel buffers: what its
/// streams may hold (one write, one read in flight).
pub(super) const CHARGE_EXTRA: u64 = (streams::MAX_WRITE + streams::MAX_READ) as u64;

/// A component's TCP socket.
pub(super) struct Socket {
    family: IpAddressFamily,
    state: State,
    /// The operation begun (`start-…`) and not yet finished.
    begun: Option<Op>,
    options: Options,
    account: Account,
    /// What its streams share with it, once it is connected.
    ends: Option<Arc<streams::Ends>>,
    /// Its slot and bytes; shared with a send still draining after
    /// `shutdown(send)`, which holds them as long.
    charge: Arc<Charge>,
}

enum State {
    Fresh,
    Bound(Bound),
    Listening(Arc<Listener>),
    Connecting(Arc<Conn>),
    Connected(Arc<Conn>),
    /// A connection or a listen that failed (or, briefly, a socket
    /// being accepted): the socket is spent.
    Closed,
}

#[derive(Clone, Copy, PartialEq)]
enum Op {
    Bind,
    Connect,
    Listen,
}

/// The options a program may set and read back.
#[derive(Clone)]
struct Options {
    keep_alive: bool,
    keep_alive_idle_ns: u64,
    keep_alive_interval_ns: u64,
    keep_alive_count: u32,
    hop_limit: u8,
    /// The task's `socket_buffer`: each way at most.
    buffer: u64,
    /// What the program asked for each way, within `buffer`.
    send_buffer: u64,
    receive_buffer: u64,
}

/// A socket slot and its bytes, given back when the socket goes.
struct Charge {
    shared: Arc<TaskShared>,
    bytes: u64,
}

impl Charge {
    fn take(shared: &Arc<TaskShared>, buffer: usize) -> SocketResult<Charge> {
        // The host kernel doubles each buffer for its bookkeeping.
        let bytes = 4 * buffer as u64 + CHARGE_EXTRA;
        match take_wasi_socket(shared, bytes) {
            Ok(()) => Ok(Charge {
                shared: shared.clone(),
                bytes,
            }),
            Err(Errno::NoMem) => Err(ErrorCode::OutOfMemory.into()),
            Err(_) => Err(ErrorCode::NewSocketLimit.into()),
        }
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        return_wasi_socket(&self.shared, self.bytes);
    }
}

/// Wasmtime's handle for a socket, as this implementation's.
fn mine(r: &Resource<TcpSocket>) -> Resource<Socket> {
    Resource::new_borrow(r.rep())
}

impl View<'_> {
    fn socket(&mut self, r: &Resource<TcpSocket>) -> SocketResult<&mut Socket> {
        Ok(self.table.get_mut(&mine(r))?)
    }

    /// A new socket, charged to the task (the caller puts it in the
    /// table).
    fn new_socket(&mut self, family: IpAddressFamily, state: State) -> SocketResult<Socket> {
        let buffer = self.net.buffer;
        Ok(Socket {
            family,
            state,
            begun: None,
            options: Options {
                keep_alive: false,
                keep_alive_idle_ns: 7200 * 1_000_000_000,
                keep_alive_interval_ns: 75 * 1_000_000_000,
                keep_alive_count: 9,
                hop_limit: 64,
                buffer: buffer as u64,
                send_buffer: buffer as u64,
                receive_buffer: buffer as u64,
            },
            account: Account::of(self.net, self.shared),
            ends: None,
            charge: Arc::new(Charge::take(self.shared, buffer)?),
        })
    }

    /// A connection's streams in the table, children of its socket
    /// (numbered `parent`), which keeps what they share.
    fn streams(
        &mut self,
        conn: &Arc<Conn>,
        parent: u32,
    ) -> SocketResult<(Resource<DynInputStream>, Resource<DynOutputStream>)> {
        let parent = Resource::<Socket>::new_borrow(parent);
        let socket = self.table.get_mut(&parent)?;
        let (input, output, ends) = streams::pair(conn, &socket.account);
        socket.ends = Some(ends);
        let input = self.table.push_child(input, &parent)?;
        let output = self.table.push_child(output, &parent)?;
        self.shared.net.count_connection();
        Ok((input, output))
    }
}

impl tcp_create_socket::Host for View<'_> {
    fn create_tcp_socket(&mut self, family: IpAddressFamily) -> SocketResult<Resource<TcpSocket>> {
        let socket = self.new_socket(family, State::Fresh)?;
        let r = self.table.push(socket)?;
        Ok(Resource::new_own(r.rep()))
    }
}

impl tcp::Host for View<'_> {}

/// The address `a`, if a socket of `family` may use it (as Wasmtime's
/// own implementation judges): of the socket's family, an IPv6 socket
/// taking neither IPv4-mapped nor IPv4-compatible addresses, and not a
/// multicast or broadcast address.
fn address(family: IpAddressFamily, a: IpSocketAddress) -> SocketResult<SocketAddr> {
    let addr = SocketAddr::from(a);
    let fits = match (family, addr.ip()) {
        (IpAddressFamily::Ipv4, IpAddr::V4(v4)) => !v4.is_broadcast(),
        (IpAddressFamily::Ipv6, IpAddr::V6(v6)) => {
            let compatible =
                v6.segments()[..6] == [0; 6] && !v6.is_unspecified() && !v6.is_loopback();
            v6.to_ipv4_mapped().is_none() && !compatible
        }
        _ => false,
    };
    if !fits || addr.ip().is_multicast() {
        return Err(ErrorCode::InvalidArgument.into());
    }
    Ok(addr)
}

/// The address a connection may be made to: a port, a host, and a grant.
fn remote(
    view: &View<'_>,
    family: IpAddressFamily,
    a: IpSocketAddress,
) -> SocketResult<SocketAddr> {
    let addr = address(family, a)?;
    if addr.port() == 0 || addr.ip().is_unspecified() {
        return Err(ErrorCode::InvalidArgument.into());
    }
    if !may_connect(&view.net.connect, &crate::net::grant::canonical(addr)) {
        return Err(ErrorCode::AccessDenied.into());
    }
    Ok(addr)
}

/// Ends the operation `op` begun on `s`, or says it was not.
fn finish(s: &mut Socket, op: Op) -> SocketResult<()> {
    if s.begun != Some(op) {
        return Err(ErrorCode::NotInProgress.into());
    }
    s.begun = None;
    Ok(())
}

/// `s` if nothing is under way on it.
fn idle(s: &mut Socket) -> SocketResult<&mut Socket> {
    if s.begun.is_some() {
        return Err(ErrorCode::ConcurrencyConflict.into());
    }
    Ok(s)
}

impl tcp::HostTcpSocket for View<'_> {
    async fn start_bind(
        &mut self,
        this: Resource<TcpSocket>,
        network: Resource<Network>,
        local: IpSocketAddress,
    ) -> SocketResult<()> {
        self.table.get(&network)?;
        let listen = self.net.listen.clone();
        let s = idle(self.socket(&this)?)?;
        if !matches!(s.state, State::Fresh) {
            return Err(ErrorCode::InvalidState.into());
        }
        let addr = address(s.family, local)?;
        if !allowed(&listen, &crate::net::grant::canonical(addr)) {
            return Err(ErrorCode::AccessDenied.into());
        }
        s.state = State::Bound(Bound::new(&addr, s.options.buffer as usize)?);
        s.apply_buffers()?;
        s.begun = Some(Op::Bind);
        Ok(())
    }

    fn finish_bind(&mut self, this: Resource<TcpSocket>) -> SocketResult<()> {
        finish(self.socket(&this)?, Op::Bind)
    }

    fn start_connect(
        &mut self,
        this: Resource<TcpSocket>,
        network: Resource<Network>,
        to: IpSocketAddress,
    ) -> SocketResult<()> {
        self.table.get(&network)?;
        // The state first, then the address, then the grant.
        let s = idle(self.socket(&this)?)?;
        if !matches!(s.state, State::Fresh | State::Bound(_)) {
            return Err(ErrorCode::InvalidState.into());
        }
        let family = s.family;
        let addr = remote(self, family, to)?;
        let s = self.socket(&this)?;
        let conn = match std::mem::replace(&mut s.state, State::Fresh) {
            // From the address it was bound to (under a listen grant); a
            // failure spends the bound socket.
            State::Bound(b) => b.connect(&addr).inspect_err(|_| s.state = State::Closed)?,
            _ => Conn::start_connect(&addr, s.options.buffer as usize)?,
        };
        s.state = State::Connecting(Arc::new(conn));
        s.apply_buffers()?;
        s.begun = Some(Op::Connect);
        Ok(())
    }

    fn finish_connect(
        &mut self,
        this: Resource<TcpSocket>,
    ) -> SocketResult<(Resource<DynInputStream>, Resource<DynOutputStream>)> {
        let s = self.socket(&this)?;
        let (State::Connecting(conn), Some(Op::Connect)) = (&s.state, s.begun) else {
            return Err(ErrorCode::NotInProgress.into());
        };
        let conn = conn.clone();
        match conn.try_connected() {
            Poll::Pending => return Err(ErrorCode::WouldBlock.into()),
            Poll::Ready(Err(e)) => {
                s.state = State::Closed;
                s.begun = None;
                return Err(e.into());
            }
            Poll::Ready(Ok(())) => {}
        }
        s.state = State::Connected(conn.clone());
        s.begun = None;
        if s.options.keep_alive {
            conn.set_keepalive(true)?;
        }
        self.streams(&conn, this.rep())
    }

    async fn start_listen(&mut self, this: Resource<TcpSocket>) -> SocketResult<()> {
        let s = idle(self.socket(&this)?)?;
        match std::mem::replace(&mut s.state, State::Closed) {
            // A listen that fails leaves the socket spent.
            State::Bound(b) => {
                s.state = State::Listening(Arc::new(b.listen()?));
                s.begun = Some(Op::Listen);
                Ok(())
            }
            other => {
                s.state = other;
                Err(ErrorCode::InvalidState.into())
            }
        }
    }

    fn finish_listen(&mut self, this: Resource<TcpSocket>) -> SocketResult<()> {
        finish(self.socket(&this)?, Op::Listen)
    }

    fn accept(
        &mut self,
        this: Resource<TcpSocket>,
    ) -> SocketResult<(
        Resource<TcpSocket>,
        Resource<DynInputStream>,
        Resource<DynOutputStream>,
    )> {
        let s = self.socket(&this)?;
        let State::Listening(l) = &s.state else {
            return Err(ErrorCode::InvalidState.into());
        };
        let (l, family, options) = (l.clone(), s.family, s.options.clone());
        // The slot first: past the task's sockets the connection stays in
        // the listener's queue.
        let mut accepted = self.new_socket(family, State::Closed)?;
        let conn = Arc::new(l.try_accept()?);
        // An accepted socket takes the listener's options, as set now.
        if options.keep_alive {
            conn.set_keepalive(true)?;
        }
        accepted.state = State::Connected(conn.clone());
        accepted.options = options;
        accepted.apply_buffers()?;
        let r = self.table.push(accepted)?;
        let (input, output) = self.streams(&conn, r.rep())?;
        Ok((Resource::new_own(r.rep()), input, output))
    }

    fn local_address(&mut self, this: Resource<TcpSocket>) -> SocketResult<IpSocketAddress> {
        let addr = match &self.socket(&this)?.state {
            State::Bound(b) => b.local(),
            State::Listening(l) => l.local(),
            State::Connecting(c) | State::Connected(c) => c.local(),
            State::Fresh | State::Closed => return Err(ErrorCode::InvalidState.into()),
        };
        Ok(addr.into())
    }

    fn remote_address(&mut self, this: Resource<TcpSocket>) -> SocketResult<IpSocketAddress> {
        match &self.socket(&this)?.state {
            State::Connected(c) => Ok(c.peer().into()),
            _ => Err(ErrorCode::InvalidState.into()),
        }
    }

    fn is_listening(&mut self, this: Resource<TcpSocket>) -> wasmtime::Result<bool> {
        let s = self.table.get(&mine(&this))?;
        Ok(matches!(s.state, State::Listening(_)))
    }

    fn address_family(&mut self, this: Resource<TcpSocket>) -> wasmtime::Result<IpAddressFamily> {
        Ok(self.table.get(&mine(&this))?.family)
    }

    fn set_listen_backlog_size(
        &mut self,
        this: Resource<TcpSocket>,
        size: u64,
    ) -> SocketResult<()> {
        let s = self.socket(&this)?;
        if size == 0 {
            return Err(ErrorCode::InvalidArgument.into());
        }
        match s.state {
            State::Connecting(_) | State::Connected(_) => Err(ErrorCode::InvalidState.into()),
            // The backlog is the runtime's (1024) and does not change.
            _ => Ok(()),
        }
    }

    fn keep_alive_enabled(&mut self, this: Resource<TcpSocket>) -> SocketResult<bool> {
        Ok(self.socket(&this)?.options.keep_alive)
    }

    fn set_keep_alive_enabled(&mut self, this: Resource<TcpSocket>, on: bool) -> SocketResult<()> {
        let s = self.socket(&this)?;
        if let State::Connected(c) = &s.state {
            c.set_keepalive(on)?;
        }
        s.options.keep_alive = on;
        Ok(())
    }

    fn keep_alive_idle_time(&mut self, this: Resource<TcpSocket>) -> SocketResult<u64> {
        Ok(self.socket(&this)?.options.keep_alive_idle_ns)
    }

    fn set_keep_alive_idle_time(&mut self, this: Resource<TcpSocket>, ns: u64) -> SocketResult<()> {
        positive(ns)?;
        self.socket(&this)?.options.keep_alive_idle_ns = ns;
        Ok(())
    }

    fn keep_alive_interval(&mut self, this: Resource<TcpSocket>) -> SocketResult<u64> {
        Ok(self.socket(&this)?.options.keep_alive_interval_ns)
    }

    fn set_keep_alive_interval(&mut self, this: Resource<TcpSocket>, ns: u64) -> SocketResult<()> {
        positive(ns)?;
        self.socket(&this)?.options.keep_alive_interval_ns = ns;
        Ok(())
    }

    fn keep_alive_count(&mut self, this: Resource<TcpSocket>) -> SocketResult<u32> {
        Ok(self.socket(&this)?.options.keep_alive_count)
    }

    fn set_keep_alive_count(&mut self, this: Resource<TcpSocket>, n: u32) -> SocketResult<()> {
        positive(n.into())?;
        self.socket(&this)?.options.keep_alive_count = n;
        Ok(())
    }

    fn hop_limit(&mut self, this: Resource<TcpSocket>) -> SocketResult<u8> {
        Ok(self.socket(&this)?.options.hop_limit)
    }

    fn set_hop_limit(&mut self, this: Resource<TcpSocket>, n: u8) -> SocketResult<()> {
        positive(n.into())?;
        self.socket(&this)?.options.hop_limit = n;
        Ok(())
    }

    fn receive_buffer_size(&mut self, this: Resource<TcpSocket>) -> SocketResult<u64> {
        Ok(self.socket(&this)?.options.receive_buffer)
    }

    fn set_receive_buffer_size(&mut self, this: Resource<TcpSocket>, n: u64) -> SocketResult<()> {
        positive(n)?;
        let s = self.socket(&this)?;
        s.options.receive_buffer = n.min(s.options.buffer);
        s.apply_buffers()
    }

    fn send_buffer_size(&mut self, this: Resource<TcpSocket>) -> SocketResult<u64> {
        Ok(self.socket(&this)?.options.send_buffer)
    }

    fn set_send_buffer_size(&mut self, this: Resource<TcpSocket>, n: u64) -> SocketResult<()> {
        positive(n)?;
        let s = self.socket(&this)?;
        s.options.send_buffer = n.min(s.options.buffer);
        s.apply_buffers()
    }

    fn subscribe(&mut self, this: Resource<TcpSocket>) -> wasmtime::Result<Resource<DynPollable>> {
        wasmtime_wasi::p2::subscribe(self.table, mine(&this))
    }

    fn shutdown(&mut self, this: Resource<TcpSocket>, how: tcp::ShutdownType) -> SocketResult<()> {
        let shared = self.shared.clone();
        let s = self.socket(&this)?;
        let (State::Connected(c), Some(ends)) = (&s.state, &s.ends) else {
            return Err(ErrorCode::InvalidState.into());
        };
        use tcp::ShutdownType::{Both, Receive, Send};
        if matches!(how, Receive | Both) {
            ends.shut_receive(c)?;
        }
        if matches!(how, Send | Both) {
            ends.shut_send(c, &shared, s.charge.clone())?;
        }
        Ok(())
    }

    fn drop(&mut self, this: Resource<TcpSocket>) -> wasmtime::Result<()> {
        self.table.delete(Resource::<Socket>::new_own(this.rep()))?;
        Ok(())
    }
}

/// `invalid-argument` for 0.
fn positive(n: u64) -> SocketResult<()> {
    if n == 0 {
        return Err(ErrorCode::InvalidArgument.into());
    }
    Ok(())
}

impl Socket {
    /// Its descriptor, if it has one yet.
    fn fd(&self) -> Option<i32> {
        match &self.state {
            State::Bound(b) => Some(b.fd()),
            State::Listening(l) => Some(l.fd()),
            State::Connecting(c) | State::Connected(c) => Some(c.fd()),
            State::Fresh | State::Closed => None,
        }
    }

    /// Gives its descriptor the buffer sizes asked for, where they are
    /// below the task's (which the socket was made with, and charged).
    fn apply_buffers(&self) -> SocketResult<()> {
        let (Some(fd), o) = (self.fd(), &self.options) else {
            return Ok(());
        };
        // SAFETY: `fd` is the socket's own, open while `self` is.
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
        let sock = socket2::SockRef::from(&fd);
        if o.send_buffer < o.buffer {
            sock.set_send_buffer_size(o.send_buffer as usize)?;
        }
        if o.receive_buffer < o.buffer {
            sock.set_recv_buffer_size(o.receive_buffer as usize)?;
        }
        Ok(())
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for Socket {
    /// Ready when a connection begun has been made or has failed, or a
    /// listener may have one to accept; at once otherwise.
    async fn ready(&mut self) {
        match &self.state {
            State::Connecting(c) if self.begun == Some(Op::Connect) => {
                if c.try_connected().is_pending() {
                    let _ = c.writable().await;
                }
            }
            State::Listening(l) => {
                if !streams::ready_now(l.fd(), libc::POLLIN) {
                    let _ = l.ready().await;
                }
            }
            _ => {}
        }
    }
}
