//! Line numbers for manifest errors.
//!
//! Validation errors name where they are as a path of entries and a key:
//! `task[2] ("web"): memory_limit: …`, `http[0] ("…"): route[1] ("/kv/*"):
//! timeout: …`, `runtime.workers: …`. [`line_of`] finds that entry's
//! header in the manifest text — the third `[[task]]`, the second
//! `[[http.route]]` after the first `[[http]]` — and the key's line
//! within it (the header's, if the key is not written there). Entries
//! written as inline tables are not found, and such errors keep no line.

/// The 1-based line an error message points at, if it can be found.
pub(crate) fn line_of(text: &str, error: &str) -> Option<usize> {
    let lines: Vec<&str> = text.lines().collect();
    let (entry, rest) = entry_of(&lines, error)?;
    let key = leading_key(rest);
    Some(key_line(&lines, entry, key).unwrap_or(entry) + 1)
}

/// The index of the header line the error's entry path leads to, and the
/// message after the path.
fn entry_of<'a>(lines: &[&str], error: &'a str) -> Option<(usize, &'a str)> {
    if let Some(rest) = error.strip_prefix("runtime.") {
        return Some((header(lines, "runtime", 0, 0, lines.len())?, rest));
    }
    let (table, i, rest) = indexed(error)?;
    if table == "http" {
        let start = header(lines, "http", i, 0, lines.len())?;
        let end = header(lines, "http", 0, start + 1, lines.len()).unwrap_or(lines.len());
        if let Some((_, j, rest)) = indexed(rest).filter(|(t, _, _)| *t == "route") {
            return Some((header(lines, "http.route", j, start + 1, end)?, rest));
        }
        return Some((start, rest));
    }
    Some((header(lines, table, i, 0, lines.len())?, rest))
}

/// Splits `table[i] ("name"): rest` (the name is optional).
fn indexed(s: &str) -> Option<(&str, usize, &str)> {
    let open = s.find('[')?;
    let table = &s[..open];
    if table.is_empty() || !table.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
        return None;
    }
    let close = open + s[open..].find(']')?;
    let i = s[open + 1..close].parse().ok()?;
    let mut rest = &s[close + 1..];
    if let Some(quoted) = rest.strip_prefix(" (\"") {
        rest = skip_quoted(quoted)?.strip_prefix(')')?;
    }
    Some((table, i, rest.strip_prefix(": ")?))
}

/// What follows a Rust debug string's closing quote.
fn skip_quoted(s: &str) -> Option<&str> {
    let mut escaped = false;
    for (at, c) in s.char_indices() {
        match c {
            '\\' if !escaped => escaped = true,
            '"' if !escaped => return Some(&s[at + 1..]),
            _ => escaped = false,
        }
    }
    None
}

/// The key a message starts with (`memory_limit: …`, `dirs."/x": …`).
fn leading_key(rest: &str) -> &str {
    let end = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(rest.len());
    &rest[..end]
}

/// The index of the `n`th header `[[name]]` (or `[name]`) in
/// `lines[from..to]`.
fn header(lines: &[&str], name: &str, n: usize, from: usize, to: usize) -> Option<usize> {
    (from..to)
        .filter(|&l| header_name(lines[l]) == Some(name))
        .nth(n)
}

/// The table a header line opens: `[[ task ]]` → `task`.
pub(super) fn header_name(line: &str) -> Option<&str> {
    let line = line.split('#').next()?.trim();
    let inner = line.strip_prefix("[[").and_then(|l| l.strip_suffix("]]"));
    let inner = inner.or_else(|| line.strip_prefix('[').and_then(|l| l.strip_suffix(']')))?;
    Some(inner.trim())
}

/// The line within the entry starting at `entry` that sets `key`.
fn key_line(lines: &[&str], entry: usize, key: &str) -> Option<usize> {
    if key.is_empty() {
        return None;
    }
    (entry + 1..lines.len())
        .take_while(|&l| !lines[l].trim_start().starts_with('['))
        .find(|&l| {
            let t = lines[l].trim_start();
            t.strip_prefix(key)
                .is_some_and(|after| after.trim_start().starts_with(['=', '.']))
        })
}

#[cfg(test)]
mod tests {
    use super::line_of;

    const TEXT: &str = "\
[runtime]
workers = 2

[[task]]
name = \"a\"
module = \"a.wasm\"

[[ task ]]   # the second
name = \"b\"
memory_limit = \"lots\"

[[http]]
listen = \"x\"

[[http]]
listen = \"127.0.0.1:0\"
[[http.route]]
path = \"/\"
[[http.route]]
path = \"/kv/*\"
timeout = \"0s\"
";

    #[test]
    fn finds_the_entry_and_its_key() {
        let at = |e: &str| line_of(TEXT, e);
        assert_eq!(at("task[1] (\"b\"): memory_limit: bad size"), Some(10));
        assert_eq!(at("task[1] (\"b\"): group: no [[group]]"), Some(8));
        assert_eq!(at("task[0] (\"a\"): module: file not found"), Some(6));
        assert_eq!(at("runtime.workers: must be at least 1"), Some(2));
        assert_eq!(at("http[0] (\"x\"): listen: not an address"), Some(13));
        assert_eq!(
            at("http[1] (\"127.0.0.1:0\"): route[1] (\"/kv/*\"): timeout: must be more than 0"),
            Some(21)
        );
        assert_eq!(at("http[1] (\"1\"): route[0] (\"/\"): name: bad"), Some(17));
    }

    #[test]
    fn unknown_paths_have_no_line() {
        assert_eq!(line_of(TEXT, "no [[task]] or [[http]] entries"), None);
        assert_eq!(line_of(TEXT, "task[5] (\"z\"): name: bad"), None);
        assert_eq!(line_of(TEXT, "group[0] (\"g\"): name: bad"), None);
        // A name with a quote and a parenthesis in it.
        let text = "[[task]]\nname = 'x\") y'\ncap = 2.0\n";
        assert_eq!(line_of(text, "task[0] (\"x\\\") y\"): cap: 2"), Some(3));
    }
}
