//! Every shape problem of a manifest in one pass.
//!
//! Deserializing stops at the first key that is unknown, mistyped or
//! missing. To report them all, [`raw`] parses, notes the problem, blanks
//! the lines it points at and parses again, until the text parses or no
//! progress is made. Blanking keeps every other line where it was, so
//! line numbers stay true. A key that is unknown or of the wrong type
//! loses its line (its entry is then checked without it); an entry that
//! lacks a required key loses all its lines, and [`Dropped`] renumbers
//! later messages about its table so they still name the entries as
//! written.

/// At most this many shape problems are collected from one manifest.
const MAX_PROBLEMS: usize = 64;

/// Entries removed for lacking a required key: `(table, index)` in the
/// text as written, in the order found.
#[derive(Default)]
pub(super) struct Dropped(Vec<(String, usize, usize)>);

impl Dropped {
    /// `task[i] ("x"): …` about the entries that remained, with `i` as
    /// the manifest's own numbering.
    pub(super) fn renumber(&self, message: String) -> String {
        let Some(open) = message.find('[') else {
            return message;
        };
        let table = &message[..open];
        let Some(close) = message[open..].find(']').map(|c| open + c) else {
            return message;
        };
        let Ok(mut i) = message[open + 1..close].parse::<usize>() else {
            return message;
        };
        let mut gone: Vec<usize> = self
            .0
            .iter()
            .filter(|(t, _, _)| t == table)
            .map(|(_, at, _)| *at)
            .collect();
        gone.sort_unstable();
        for at in gone {
            if at <= i {
                i += 1;
            }
        }
        format!("{table}[{i}]{}", &message[close + 1..])
    }
}

/// The manifest's raw form with every problem's lines blanked, the
/// problems (each `line L, column C (`source`): what`), and the entries
/// dropped. An `Err` holds the problems when no part of it parses.
pub(super) fn raw<T: serde::de::DeserializeOwned>(
    text: &str,
) -> Result<(T, Vec<String>, Dropped), Vec<String>> {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut problems = Vec::new();
    let mut dropped = Dropped::default();
    loop {
        let work = lines.join("\n");
        let e = match toml::from_str::<T>(&work) {
            Ok(raw) => return Ok((raw, problems, dropped)),
            Err(e) => e,
        };
        problems.push(
            super::toml_error(&work, &e)
                .replace("unknown field", "unknown key")
                .replace("missing field", "missing key"),
        );
        let last = problems.last_mut().expect("just pushed");
        *last = suggest(last);
        let Some(span) = e.span() else {
            return Err(problems);
        };
        let first = line_at(&work, span.start);
        let end = line_at(&work, span.end.saturating_sub(1).max(span.start));
        let blanked = if e.message().starts_with("missing field") {
            drop_entry(&mut lines, first, end, &mut dropped)
        } else {
            blank(&mut lines, first, end)
        };
        if !blanked || problems.len() >= MAX_PROBLEMS {
            return Err(problems);
        }
    }
}

/// The 0-based line holding byte `at` of `text` (any byte: a span's end
/// may fall inside a character).
fn line_at(text: &str, at: usize) -> usize {
    let bytes = text.as_bytes();
    bytes[..at.min(bytes.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
}

/// Blanks `lines[first..=end]`; false if they were blank already.
fn blank(lines: &mut [String], first: usize, end: usize) -> bool {
    let end = end.min(lines.len().saturating_sub(1));
    let mut changed = false;
    for line in lines.iter_mut().take(end + 1).skip(first) {
        changed |= !line.trim().is_empty();
        line.clear();
    }
    changed
}

/// Blanks the entry whose header is on line `first` (up to the next
/// header), noting which entry of its table it was.
fn drop_entry(lines: &mut [String], first: usize, end: usize, dropped: &mut Dropped) -> bool {
    let Some(table) = header_table(&lines[first]) else {
        // An inline table: only its own lines go.
        return blank(lines, first, end);
    };
    let index = lines[..first]
        .iter()
        .filter(|l| header_table(l).as_deref() == Some(table.as_str()))
        .count()
        + dropped
            .0
            .iter()
            .filter(|(t, _, line)| *t == table && *line < first)
            .count();
    // The entry ends at the next header of any table, `[runtime]` too.
    let next = (first + 1..lines.len())
        .find(|&l| super::locate::header_name(&lines[l]).is_some())
        .unwrap_or(lines.len());
    dropped.0.push((table, index, first));
    blank(lines, first, next.saturating_sub(1).max(end))
}

/// The table an `[[array]]` header line opens (an entry of it).
fn header_table(line: &str) -> Option<String> {
    let array = line.trim_start().starts_with("[[");
    array
        .then(|| super::locate::header_name(line))
        .flatten()
        .map(str::to_string)
}

/// `unknown key `x`, expected one of `a`, `b`` made short: the nearest
/// known key as a suggestion, or the list when none is near.
fn suggest(problem: &str) -> String {
    let Some(at) = problem.find("unknown key `") else {
        return problem.to_string();
    };
    let rest = &problem[at + "unknown key `".len()..];
    let Some(end) = rest.find('`') else {
        return problem.to_string();
    };
    let unknown = &rest[..end];
    let known: Vec<&str> = rest[end + 1..].split('`').skip(1).step_by(2).collect();
    match warden_policy::spelling::nearest(unknown, &known) {
        Some(near) => format!(
            "{}unknown key `{unknown}` (did you mean `{near}`?)",
            &problem[..at]
        ),
        None => problem.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use warden_policy::spelling::nearest;

    #[test]
    fn near_keys_are_suggested_and_far_ones_are_not() {
        let keys = ["memory_limit", "memory_guarantee", "module", "name"];
        assert_eq!(nearest("memory_limt", &keys), Some("memory_limit"));
        assert_eq!(nearest("moduel", &keys), Some("module"));
        assert_eq!(nearest("nmae", &keys), Some("name"));
        assert_eq!(nearest("bandwidth", &keys), None);
        let p = suggest("line 4, column 1 (`x`): unknown key `memroy_limit`, expected one of `name`, `memory_limit`");
        assert_eq!(
            p,
            "line 4, column 1 (`x`): unknown key `memroy_limit` (did you mean `memory_limit`?)"
        );
    }

    #[test]
    fn spans_inside_characters_do_not_panic() {
        #[derive(serde::Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct T {
            a: Option<u32>,
        }
        for text in [
            "a = 1\n\u{feff}b = 2\n",
            "a = '\u{feff}'\n",
            "\u{feff}\u{feff}=\n",
            "a = 1\nb\u{e9} = 2",
        ] {
            let _ = raw::<T>(text);
        }
        let (_, problems, _) = raw::<T>("a = 1\nzz\u{e9} = 2\n").unwrap();
        assert_eq!(problems.len(), 1, "{problems:?}");
    }

    #[test]
    fn a_dropped_entry_ends_at_the_next_table_of_any_kind() {
        #[derive(serde::Deserialize, Debug)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct E {
            name: String,
        }
        #[derive(serde::Deserialize, Debug)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct R {
            workers: u32,
        }
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct M {
            #[serde(default)]
            e: Vec<E>,
            runtime: R,
        }
        // The [[e]] without `name` goes; [runtime] after it stays.
        let (m, problems, _) = raw::<M>("[[e]]\nx = 1\n[runtime]\nworkers = 2\n").unwrap();
        assert_eq!(m.runtime.workers, 2, "{problems:?}");
    }

    #[test]
    fn dropped_entries_keep_later_numbers_true() {
        let d = Dropped(vec![("task".into(), 1, 4), ("task".into(), 3, 9)]);
        assert_eq!(
            d.renumber("task[0] (\"a\"): x".into()),
            "task[0] (\"a\"): x"
        );
        assert_eq!(
            d.renumber("task[1] (\"c\"): x".into()),
            "task[2] (\"c\"): x"
        );
        assert_eq!(
            d.renumber("task[2] (\"e\"): x".into()),
            "task[4] (\"e\"): x"
        );
        assert_eq!(
            d.renumber("http[1] (\"e\"): x".into()),
            "http[1] (\"e\"): x"
        );
    }
}
