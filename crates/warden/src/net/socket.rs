//! TCP listeners and connections as kernel objects.
//!
//! Each wraps a non-blocking host socket registered with the runtime's
//! reactor (Tokio's), so a task waiting on one parks its future and holds
//! no worker thread. Operations try the system call first and wait for
//! readiness only when it would block; many tasks may wait on the same
//! socket (a handle passed or duplicated), each with its own waker.
//!
//! The buffers of every socket are set to its task's `socket_buffer`
//! ([`BUFFER`] by default) each way before it connects or listens
//! (accepted connections inherit the listener's),
//! so the memory a connection can pin in the host kernel is known and is
//! charged to the task that holds it ([`Conn::bytes`]). Each holds a
//! place among the descriptors tasks may have (`crate::descriptors`):
//! past them, `ENFILE` before any system call.

use crate::descriptors::Descriptor;
use socket2::{Domain, Protocol, Socket, Type};
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use tokio::io::unix::AsyncFd;
use tokio::io::Interest;

/// Default requested send and receive buffer of a socket, bytes (the host
/// kernel doubles it for its bookkeeping); a task's `socket_buffer`.
pub const BUFFER: usize = crate::task::net::DEFAULT_SOCKET_BUFFER;

/// Smallest and largest `socket_buffer` accepted.
pub const BUFFER_RANGE: std::ops::RangeInclusive<usize> = 4096..=(16 << 20);

/// Bytes charged for a listener: its object and accept queue.
pub const LISTENER_BYTES: u64 = 4096;

/// Backlog of a listener.
const BACKLOG: i32 = 1024;

/// A listening socket.
#[derive(Debug)]
pub struct Listener {
    io: AsyncFd<TcpListener>,
    local: SocketAddr,
    _place: Descriptor,
}

/// A connected socket.
#[derive(Debug)]
pub struct Conn {
    io: AsyncFd<TcpStream>,
    local: SocketAddr,
    peer: SocketAddr,
    bytes: u64,
    _place: Descriptor,
}

fn socket(addr: &SocketAddr, buffer: usize) -> io::Result<Socket> {
    let s = Socket::new(
        Domain::for_address(*addr),
        Type::STREAM,
        Some(Protocol::TCP),
    )?;
    s.set_nonblocking(true)?;
    s.set_cloexec(true)?;
    s.set_send_buffer_size(buffer)?;
    s.set_recv_buffer_size(buffer)?;
    Ok(s)
}

/// A socket bound to an address and not yet listening: WASI 0.2 binds
/// and listens in two steps, and a program expects `address in use` from
/// the first.
#[derive(Debug)]
pub struct Bound {
    socket: Socket,
    local: SocketAddr,
    place: Descriptor,
}

impl Bound {
    /// Binds a socket to `addr`, its connections with `buffer` bytes each
    /// way.
    pub fn new(addr: &SocketAddr, buffer: usize) -> io::Result<Bound> {
        let place = Descriptor::take()?;
        let s = socket(addr, buffer)?;
        s.set_reuse_address(true)?;
        if addr.is_ipv6() {
            s.set_only_v6(true)?;
        }
        s.bind(&(*addr).into())?;
        let local = s
            .local_addr()?
            .as_socket()
            .ok_or(io::ErrorKind::InvalidInput)?;
        Ok(Bound {
            socket: s,
            local,
            place,
        })
    }

    /// Its address (with the port the host kernel chose for port 0).
    pub fn local(&self) -> SocketAddr {
        self.local
    }

    /// The raw descriptor, for socket options.
    pub fn fd(&self) -> i32 {
        use std::os::fd::AsRawFd;
        self.socket.as_raw_fd()
    }

    /// Starts connecting from its address to `addr`, without waiting
    /// (see [`Conn::start_connect`]).
    pub fn connect(self, addr: &SocketAddr) -> io::Result<Conn> {
        Conn::connecting(self.socket, addr, self.place)
    }

    /// Listens. Must run inside the runtime's reactor.
    pub fn listen(self) -> io::Result<Listener> {
        self.socket.listen(BACKLOG)?;
        let l: TcpListener = self.socket.into();
        Ok(Listener {
            // SAFETY: the listener owns its descriptor for as long as the
            // `AsyncFd` that owns the listener lives.
            io: unsafe { AsyncFd::register_with_interest(l, Interest::READABLE)? },
            local: self.local,
            _place: self.place,
        })
    }
}

impl Listener {
    /// Binds and listens on `addr`, its connections with `buffer` bytes
    /// each way. Must run inside the runtime's reactor.
    pub fn bind(addr: &SocketAddr, buffer: usize) -> io::Result<Listener> {
        Bound::new(addr, buffer)?.listen()
    }

    /// Its address.
    pub fn local(&self) -> SocketAddr {
        self.local
    }

    /// Accepts a connection if one is waiting, without waiting.
    pub fn try_accept(&self) -> io::Result<Conn> {
        let place = Descriptor::take()?;
        let (s, peer) = self.io.get_ref().accept()?;
        Conn::new(s, Some(peer), place)
    }

    /// Waits until a connection may be waiting.
    pub async fn ready(&self) -> io::Result<()> {
        let mut g = self.io.readable().await?;
        // Clear, so the next wait waits for news; the caller retries the
        // accept and only comes back here if it would block.
        g.clear_ready();
        Ok(())
    }

    /// Accepts the next connection, waiting for one.
    pub async fn accept(&self) -> io::Result<Conn> {
        loop {
            match self.try_accept() {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.ready().await?,
                r => return r,
            }
        }
    }

    /// The raw descriptor, for readiness checks.
    pub fn fd(&self) -> i32 {
        use std::os::fd::AsRawFd;
        self.io.as_raw_fd()
    }
}

impl Conn {
    fn new(s: TcpStream, peer: Option<SocketAddr>, place: Descriptor) -> io::Result<Conn> {
        s.set_nonblocking(true)?;
        let local = s.local_addr()?;
        let peer = match peer {
            Some(p) => p,
            None => s.peer_addr()?,
        };
        let sock = socket2::SockRef::from(&s);
        let bytes = (sock.send_buffer_size()? + sock.recv_buffer_size()?) as u64;
        Ok(Conn {
            // SAFETY: the stream owns its descriptor for as long as the
            // `AsyncFd` that owns the stream lives.
            io: unsafe { AsyncFd::register(s)? },
            local,
            peer,
            bytes,
            _place: place,
        })
    }

    /// Starts connecting to `addr` with `buffer` bytes each way, without
    /// waiting; finish with
    /// [`Conn::connected`]. Must run inside the runtime's reactor.
    pub fn start_connect(addr: &SocketAddr, buffer: usize) -> io::Result<Conn> {
        let place = Descriptor::take()?;
        Conn::connecting(socket(addr, buffer)?, addr, place)
    }

    /// Starts connecting `s` to `addr`.
    fn connecting(s: Socket, addr: &SocketAddr, place: Descriptor) -> io::Result<Conn> {
        match s.connect(&(*addr).into()) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
            Err(e) => return Err(e),
        }
        let s: TcpStream = s.into();
        let local = s.local_addr()?;
        let sock = socket2::SockRef::from(&s);
        let bytes = (sock.send_buffer_size()? + sock.recv_buffer_size()?) as u64;
        Ok(Conn {
            // SAFETY: the stream owns its descriptor for as long as the
            // `AsyncFd` that owns the stream lives.
            io: unsafe { AsyncFd::register(s)? },
            local,
            peer: *addr,
            bytes,
            _place: place,
        })
    }

    /// Waits until a connection begun by [`Conn::start_connect`] is made,
    /// or has failed.
    pub async fn connected(&self) -> io::Result<()> {
        loop {
            let mut g = self.io.writable().await?;
            let sock = socket2::SockRef::from(self.io.get_ref());
            if let Some(e) = sock.take_error()? {
                return Err(e);
            }
            match self.io.get_ref().peer_addr() {
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::NotConnected => g.clear_ready(),
                Err(e) => return Err(e),
            }
        }
    }

    /// Whether a connection begun by [`Conn::start_connect`] is made
    /// (`Ready(Ok)`), has failed (`Ready(Err)`) or is still under way,
    /// without waiting.
    pub fn try_connected(&self) -> std::task::Poll<io::Result<()>> {
        let mut fd = [libc::pollfd {
            fd: self.fd(),
            events: libc::POLLOUT,
            revents: 0,
        }];
        poll_now(&mut fd);
        if fd[0].revents == 0 {
            return std::task::Poll::Pending;
        }
        let sock = socket2::SockRef::from(self.io.get_ref());
        std::task::Poll::Ready(match sock.take_error() {
            Ok(Some(e)) | Err(e) => Err(e),
            Ok(None) => self.io.get_ref().peer_addr().map(|_| ()),
        })
    }

    /// Turns the host kernel's keep-alive probes on or off.
    pub fn set_keepalive(&self, on: bool) -> io::Result<()> {
        socket2::SockRef::from(self.io.get_ref()).set_keepalive(on)
    }

    /// Host-kernel buffer bytes the connection may hold.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Its own address.
    pub fn local(&self) -> SocketAddr {
        self.local
    }

    /// The other end's address.
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// Reads what is there into `len` bytes at `buf`, without waiting
    /// (0: the peer closed).
    ///
    /// # Safety
    ///
    /// `buf` must be valid for writes of `len` bytes during the call (the
    /// host kernel writes them; no Rust reference to them is made).
    pub unsafe fn try_recv(&self, buf: *mut u8, len: usize) -> io::Result<usize> {
        // SAFETY: as the caller promises.
        let n = unsafe { libc::recv(self.fd(), buf.cast(), len, 0) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    /// Writes what fits of `len` bytes at `buf`, without waiting. A peer
    /// that has gone is an error, never a signal.
    ///
    /// # Safety
    ///
    /// `buf` must be valid for reads of `len` bytes during the call.
    pub unsafe fn try_send(&self, buf: *const u8, len: usize) -> io::Result<usize> {
        // SAFETY: as the caller promises.
        let n = unsafe { libc::send(self.fd(), buf.cast(), len, libc::MSG_NOSIGNAL) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }

    /// Waits until the connection may be readable.
    pub async fn readable(&self) -> io::Result<()> {
        self.io.readable().await?.clear_ready();
        Ok(())
    }

    /// Waits until the connection may be writable.
    pub async fn writable(&self) -> io::Result<()> {
        self.io.writable().await?.clear_ready();
        Ok(())
    }

    /// No more sends: the peer reads the end of the stream.
    pub fn shutdown(&self) -> io::Result<()> {
        self.io.get_ref().shutdown(std::net::Shutdown::Write)
    }

    /// Ends reading and sending both (the WASI `shutdown` with `SHUT_RDWR`).
    pub fn shutdown_both(&self) -> io::Result<()> {
        self.io.get_ref().shutdown(std::net::Shutdown::Both)
    }

    /// Ends reading only.
    pub fn shutdown_read(&self) -> io::Result<()> {
        self.io.get_ref().shutdown(std::net::Shutdown::Read)
    }

    /// The raw descriptor, for readiness checks.
    pub fn fd(&self) -> i32 {
        use std::os::fd::AsRawFd;
        self.io.as_raw_fd()
    }
}

/// Readiness of descriptors now, without waiting: `fds` holds each
/// descriptor with the `poll(2)` events asked; returns the events found
/// (`POLLIN`, `POLLOUT`, `POLLHUP`, `POLLERR`), in order.
pub fn poll_now(fds: &mut [libc::pollfd]) {
    if fds.is_empty() {
        return;
    }
    // SAFETY: `fds` is a valid array of `fds.len()` entries; timeout 0.
    let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 0) };
    if n < 0 {
        for f in fds {
            f.revents = 0;
        }
    }
}
