//! HTTP serving shared by the web servers and the control API: the
//! accept loop and each connection's rules (`conn`: head and body
//! bounds, timeouts, HTTP/1 and HTTP/2 by their preface), the connection
//! gate that admits and evicts connections (`gate`), the memory budget
//! every connection's bytes are charged to (`budget`), and the protocol
//! preface (`preface`), and TLS (`tls`). It knows nothing of tasks or
//! routes.

pub mod budget;
pub mod conn;
mod gate;
mod preface;
pub mod tls;

/// The bytes `s` stands for with its `%XX` escapes decoded (a `%` not
/// followed by two hex digits stays as it is).
pub fn percent_decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match (
            b[i],
            b.get(i + 1).and_then(|&c| hex(c)),
            b.get(i + 2).and_then(|&c| hex(c)),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (c, _, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    out
}
