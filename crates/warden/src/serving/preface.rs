//! Telling HTTP/2 from HTTP/1.1 on a fresh connection: a client that
//! knows the server speaks HTTP/2 ("prior knowledge", RFC 9113 §3.3)
//! opens with a fixed 24-byte preface; anything else is HTTP/1.1. The
//! bytes read to decide are handed back to the protocol's parser by
//! [`Rewind`].

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// What an HTTP/2 client with prior knowledge sends first.
const PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The protocol a connection opened with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Http1,
    Http2,
}

/// Reads from `stream` until its first bytes either are the HTTP/2
/// preface or cannot be (an HTTP/1.1 request line differs at its first
/// byte, so it costs one read). `None` if the client closes the
/// connection or sends nothing decisive within `patience`.
pub async fn sniff(mut stream: TcpStream, patience: Duration) -> Option<(Protocol, Rewind)> {
    let mut head = [0u8; PREFACE.len()];
    let mut len = 0;
    let decide = async {
        loop {
            match stream.read(&mut head[len..]).await {
                Ok(0) | Err(_) => return None,
                Ok(n) => len += n,
            }
            if head[..len] != PREFACE[..len] {
                return Some(Protocol::Http1);
            }
            if len == PREFACE.len() {
                return Some(Protocol::Http2);
            }
        }
    };
    let protocol = tokio::time::timeout(patience, decide).await.ok()??;
    Some((
        protocol,
        Rewind {
            head,
            at: 0,
            len,
            stream: Conn::Tcp(stream),
        },
    ))
}

/// A connection over TLS, in the protocol its handshake agreed on (ALPN:
/// `h2`, else HTTP/1.1); nothing was read past the handshake.
pub fn over_tls(stream: tokio_rustls::server::TlsStream<TcpStream>) -> (Protocol, Rewind) {
    let protocol = match stream.get_ref().1.alpn_protocol() {
        Some(b"h2") => Protocol::Http2,
        _ => Protocol::Http1,
    };
    let rewind = Rewind {
        head: [0; PREFACE.len()],
        at: 0,
        len: 0,
        stream: Conn::Tls(Box::new(stream)),
    };
    (protocol, rewind)
}

/// A client's connection: plain TCP or TLS over it.
pub enum Conn {
    Tcp(TcpStream),
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

/// `$call` on whichever stream `$conn` (pinned) holds.
macro_rules! either {
    ($conn:expr, $s:ident => $call:expr) => {
        match $conn.get_mut() {
            Conn::Tcp($s) => $call,
            Conn::Tls($s) => $call,
        }
    };
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        either!(self, s => Pin::new(s).poll_read(cx, buf))
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        either!(self, s => Pin::new(s).poll_write(cx, buf))
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        either!(self, s => Pin::new(s).poll_write_vectored(cx, bufs))
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Conn::Tcp(s) => s.is_write_vectored(),
            Conn::Tls(s) => s.is_write_vectored(),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        either!(self, s => Pin::new(s).poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        either!(self, s => Pin::new(s).poll_shutdown(cx))
    }
}

/// A connection whose first `len` bytes, already read, are read again.
pub struct Rewind {
    head: [u8; PREFACE.len()],
    at: usize,
    len: usize,
    stream: Conn,
}

impl Rewind {
    /// The connection (its first bytes are gone).
    pub fn into_inner(self) -> Conn {
        self.stream
    }
}

impl AsyncRead for Rewind {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = &mut *self;
        if me.at < me.len {
            let n = (me.len - me.at).min(buf.remaining());
            buf.put_slice(&me.head[me.at..me.at + n]);
            me.at += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut me.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Rewind {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    /// Sends `parts` (one write each) and sniffs the server's end.
    async fn sniffed(parts: &[&[u8]]) -> Option<(Protocol, Vec<u8>)> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        for p in parts {
            client.write_all(p).await.unwrap();
        }
        client.shutdown().await.unwrap();
        let (protocol, mut rewind) = sniff(server, Duration::from_secs(10)).await?;
        let mut all = Vec::new();
        rewind.read_to_end(&mut all).await.unwrap();
        Some((protocol, all))
    }

    #[tokio::test]
    async fn the_bytes_read_to_decide_are_read_again() {
        let get = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
        assert_eq!(sniffed(&[get]).await, Some((Protocol::Http1, get.to_vec())));
        // The preface split over writes, and what follows it.
        let mut h2 = PREFACE.to_vec();
        h2.extend_from_slice(b"frames");
        assert_eq!(
            sniffed(&[&h2[..3], &h2[3..20], &h2[20..]]).await,
            Some((Protocol::Http2, h2.clone()))
        );
        // Differing only after the preface's first bytes: HTTP/1.1.
        assert_eq!(
            sniffed(&[b"PRI * HTTP/1.1\r\n"]).await,
            Some((Protocol::Http1, b"PRI * HTTP/1.1\r\n".to_vec()))
        );
        // Closed before anything decisive.
        assert_eq!(sniffed(&[]).await, None);
        assert_eq!(sniffed(&[&PREFACE[..10]]).await, None);
    }

    #[tokio::test]
    async fn a_client_that_sends_nothing_is_given_up_on() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let _client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        assert!(sniff(server, Duration::from_millis(50)).await.is_none());
    }
}
