//! `warden top`: the live tasks, refreshed every second.
//!
//! On a terminal the screen is redrawn in place and a key press is read
//! at once: `q` (or Ctrl-C) quits, any other key refreshes. Piped, each
//! refresh follows the last as plain text, with no escape sequences.

use crate::client::ok;
use crate::tables;
use serde_json::Value;
use std::io::{IsTerminal, Write};
use std::time::Duration;

/// How often the table is refreshed.
const EVERY: Duration = Duration::from_secs(1);

pub fn top(addr: &str, sort: &str, iterations: Option<u32>, wide: bool) -> Result<(), String> {
    let screen = std::io::stdout().is_terminal();
    let keys = Keys::take();
    let mut n = 0;
    loop {
        let frame = frame(addr, sort, wide, keys.is_some())?;
        let mut out = std::io::stdout().lock();
        let _ = match screen {
            true => write!(out, "\x1b[H\x1b[2J{frame}"),
            false => writeln!(out, "{frame}"),
        };
        let _ = out.flush();
        n += 1;
        if iterations.is_some_and(|max| n >= max) {
            return Ok(());
        }
        match &keys {
            Some(k) if k.quit_within(EVERY) => return Ok(()),
            Some(_) => {}
            None => std::thread::sleep(EVERY),
        }
    }
}

/// One refresh: a title, the root budget, the live tasks, groups, routes.
fn frame(addr: &str, sort: &str, wide: bool, keys: bool) -> Result<String, String> {
    let tasks = ok(addr, "GET", "/api/tasks", None)?;
    let live: Vec<Value> = tasks
        .as_array()
        .map(|a| a.iter().filter(|t| !tables::is_ended(t)).cloned().collect())
        .unwrap_or_default();
    let quit = if keys { "q quits" } else { "Ctrl-C quits" };
    Ok(format!(
        "warden top: {addr}, {} live tasks, sorted by {sort} ({quit})\n\n{}{}{}{}",
        live.len(),
        tables::memory_line(&ok(addr, "GET", "/api/memory", None)?),
        tables::tasks(&Value::Array(live), Some(sort), wide),
        tables::groups(&ok(addr, "GET", "/api/groups", None)?),
        tables::routes(&ok(addr, "GET", "/api/routes", None)?),
    ))
}

/// The terminal on standard input, read a key at a time (no echo, no
/// line editing, Ctrl-C read as a key) until dropped, when its settings
/// are put back.
struct Keys {
    saved: libc::termios,
}

impl Keys {
    /// `None` if standard input is not a terminal.
    fn take() -> Option<Keys> {
        if !std::io::stdin().is_terminal() {
            return None;
        }
        // SAFETY: tcgetattr and tcsetattr on descriptor 0 with termios
        // structures owned here.
        unsafe {
            let mut saved: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(0, &mut saved) != 0 {
                return None;
            }
            let mut raw = saved;
            raw.c_lflag &= !(libc::ICANON | libc::ECHO | libc::ISIG);
            raw.c_cc[libc::VMIN] = 1;
            raw.c_cc[libc::VTIME] = 0;
            (libc::tcsetattr(0, libc::TCSANOW, &raw) == 0).then_some(Keys { saved })
        }
    }

    /// Waits up to `wait` for a key: true if it says quit (`q`, Ctrl-C),
    /// false after any other key or none.
    fn quit_within(&self, wait: Duration) -> bool {
        let mut fd = libc::pollfd {
            fd: 0,
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = i32::try_from(wait.as_millis()).unwrap_or(i32::MAX);
        // SAFETY: one valid pollfd; the read fills at most `buf`'s length.
        unsafe {
            if libc::poll(&mut fd, 1, ms) <= 0 {
                return false;
            }
            let mut buf = [0u8; 16];
            let n = libc::read(0, buf.as_mut_ptr().cast(), buf.len());
            // End of input (a closed terminal) quits as well.
            n <= 0
                || buf[..n as usize]
                    .iter()
                    .any(|b| matches!(b, b'q' | b'Q' | 3))
        }
    }
}

impl Drop for Keys {
    fn drop(&mut self) {
        // SAFETY: puts back the settings read in `take`.
        unsafe {
            libc::tcsetattr(0, libc::TCSANOW, &self.saved);
        }
    }
}
