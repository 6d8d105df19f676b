//! The module graph's layers, checked: a module may name modules of its
//! own layer or lower ones, never a higher one. The test reads every
//! source file and the paths it names (`crate::m::…`, `use crate::{m::…}`,
//! and the crate root's re-exports, by the module they come from).
//!
//! Exceptions would be listed in [`KNOWN_UPWARD`] (none are): a new
//! upward edge fails the test, and so does a listed one that is gone, so
//! that the list only shrinks.
//!
//! Inside `host/`, a second test holds the import groups apart: a group's
//! folder names no other group, the shared files name none, and the files
//! form no cycle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Lowest first. Pure policy and plumbing at the bottom, then what a
/// task is, the resources it holds, the executor and IPC, the host
/// functions, the runtime, what is built on it, and the assembled system.
const LAYERS: &[&[&str]] = &[
    &[
        "units",
        "idmap",
        "fifo",
        "trim",
        "clock",
        "events",
        "descriptors",
        "sched",
        "test_waker",
        "timing_safe",
        "mapping",
    ],
    &["task", "output", "pipe"],
    &["cpu", "limiter", "net", "serving", "report", "cache", "dev"],
    &["executor", "ipc"],
    &["host", "module", "cluster"],
    &["runtime"],
    &["manifest", "http", "control"],
    &["system"],
];

/// Upward edges tolerated for now, `(from, to)`: each one a knot to cut.
const KNOWN_UPWARD: &[(&str, &str)] = &[];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

/// The top-level module each root re-export comes from (`crate::Runtime`
/// and `crate::machine` alike), read from `lib.rs`'s `pub use m::{…}`
/// lines. A name re-exported from a crate below the library (`pub use
/// warden_policy::units`) stands for itself: `units` is in a layer.
fn root_exports(lib: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for item in lib.split(';') {
        let item = item.trim();
        let Some(rest) = item
            .strip_prefix("pub use ")
            .or_else(|| item.strip_prefix("pub(crate) use "))
            .or_else(|| item.strip_prefix("use "))
        else {
            continue;
        };
        let Some((module, names)) = rest.split_once("::") else {
            continue;
        };
        if module.starts_with("warden_") || module == "std" {
            continue;
        }
        for name in names.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
            if !name.is_empty() && name != "self" && name != "as" && name != module {
                out.insert(name.to_string(), module.to_string());
            }
        }
    }
    out
}

/// A source file's code without its test modules (`#[cfg(test)] mod
/// tests { … }`, wherever they stand: code after one is still read) and
/// its comment lines (a doc link is not a dependency).
fn code(src: &str) -> String {
    let mut src = src.to_string();
    while let Some(i) = src.find("#[cfg(test)]\nmod tests {") {
        let body = i + src[i..].find('{').unwrap();
        let mut depth = 0;
        let mut end = src.len();
        for (j, c) in src[body..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = body + j + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        src.replace_range(i..end, "");
    }
    src.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every path a file's code names, as text starting at the first word
/// after `crate::`, or after a chain of `super::` that climbs out of the
/// file's top-level module (`module`: the file's module path, as
/// [`module_path`] gives it).
fn crate_paths<'a>(src: &'a str, module: &[String]) -> Vec<&'a str> {
    let mut out: Vec<&str> = src.split("crate::").skip(1).collect();
    let mut rest = src;
    while let Some(i) = rest.find("super::") {
        // Not the middle of a longer chain, which the first one handles.
        let (mut depth, mut tail) = (module.len(), &rest[i..]);
        while let Some(t) = tail.strip_prefix("super::") {
            depth = depth.saturating_sub(1);
            tail = t;
        }
        if depth == 0 {
            out.push(tail);
        }
        rest = tail;
    }
    out
}

/// The top-level modules a file's code names (`module`: its module path).
fn named(src: &str, module: &[String], exports: &BTreeMap<String, String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut add = |word: &str| {
        let word: String = word
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if let Some(m) = exports.get(&word) {
            out.insert(m.clone());
        } else if !word.is_empty() && layer_of(&word).is_some() {
            out.insert(word);
        }
    };
    for piece in crate_paths(src, module) {
        match piece.strip_prefix('{') {
            // `use crate::{a::x, b::{y, z}, C}`: the first word of each
            // top-level item.
            Some(group) => {
                let (mut depth, mut start) = (0, true);
                for (i, c) in group.char_indices() {
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => break,
                        '}' => depth -= 1,
                        ',' if depth == 0 => start = true,
                        c if start && !c.is_whitespace() => {
                            add(&group[i..]);
                            start = false;
                        }
                        _ => {}
                    }
                }
            }
            None => add(piece),
        }
    }
    out
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut files = vec![];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files
}

/// Whether the file at `path` is a test module: a `tests.rs` that its
/// parent declares under `#[cfg(test)]` (tests may use anything).
fn is_test_module(path: &Path) -> bool {
    if path.file_name().is_none_or(|n| n != "tests.rs") {
        return false;
    }
    let dir = path.parent().unwrap();
    let parent = [
        dir.join("mod.rs"),
        dir.with_extension("rs"),
        dir.join("lib.rs"),
    ]
    .into_iter()
    .find_map(|p| std::fs::read_to_string(p).ok())
    .unwrap_or_default();
    parent.contains("#[cfg(test)]\nmod tests;")
}

/// Every `(from, to)` edge between top-level modules.
fn edges(src: &Path) -> BTreeSet<(String, String)> {
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let exports = root_exports(&lib);
    let mut out = BTreeSet::new();
    for path in rust_files(src) {
        let rel = path.strip_prefix(src).unwrap();
        let module = module_path(rel);
        let top = module[0].clone();
        if top == "lib" || top == "layers" || is_test_module(&path) {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        for to in named(&code(&text), &module, &exports) {
            if to != top {
                out.insert((top.clone(), to));
            }
        }
    }
    out
}

#[test]
fn no_module_names_a_higher_one() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut unknown = vec![];
    let mut upward = BTreeSet::new();
    for (from, to) in edges(&src) {
        match (layer_of(&from), layer_of(&to)) {
            (Some(a), Some(b)) if b > a => {
                upward.insert((from, to));
            }
            (None, _) => unknown.push(from),
            _ => {}
        }
    }
    assert!(unknown.is_empty(), "modules in no layer: {unknown:?}");
    let known: BTreeSet<(String, String)> = KNOWN_UPWARD
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    let new: Vec<_> = upward.difference(&known).collect();
    assert!(new.is_empty(), "modules that name a higher layer: {new:?}");
    let mended: Vec<_> = known.difference(&upward).collect();
    assert!(
        mended.is_empty(),
        "take these out of KNOWN_UPWARD, they are mended: {mended:?}"
    );
}

#[test]
fn the_reader_finds_paths_in_every_form() {
    let exports = root_exports(
        "pub use runtime::{Error, Runtime};\npub use task::TaskSpec;\n\
         pub use runtime::machine;\npub use warden_policy::units;",
    );
    let src = "use crate::{net::x, sched::{a, b}, Runtime};\nfn f() { crate::ipc::call(); }\n\
               let t: crate::TaskSpec; let m = crate::machine::x(); crate::units::y();\n\
               #[cfg(test)]\nmod tests { use crate::system::Z; }\n\
               use super::super::control::Api; use super::cpu::X;";
    let module = ["executor", "worker"].map(String::from);
    let got: Vec<String> = named(&code(src), &module, &exports).into_iter().collect();
    assert_eq!(
        got,
        ["control", "ipc", "net", "runtime", "sched", "task", "units"]
    );
    // At crate level, one `super::` leaves the module.
    let got: Vec<String> = named("use super::cpu::X;", &["limiter".into()], &exports)
        .into_iter()
        .collect();
    assert_eq!(got, ["cpu"]);
}

/// A file of `host/` as a module path: `host/warden/ipc.rs` is
/// `["host", "warden", "ipc"]`, `host/warden/mod.rs` `["host", "warden"]`.
fn module_path(rel: &Path) -> Vec<String> {
    let mut path: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if path.last().is_some_and(|l| l == "mod") {
        path.pop();
    }
    path
}

/// The first words of the paths a file's code names through `super::`
/// (any number of times) or `crate::host::`, each resolved against
/// `module` (the file's module path) to a module path plus a name.
fn host_paths(src: &str, module: &[String]) -> Vec<(Vec<String>, String)> {
    let mut out = vec![];
    let mut rest = src;
    while let Some(i) = rest.find("super::").or_else(|| rest.find("crate::host::")) {
        let j = rest
            .find("crate::host::")
            .filter(|&j| j <= i)
            .unwrap_or(usize::MAX);
        let (mut base, mut tail) = if j <= i {
            (vec!["host".to_string()], &rest[j + "crate::host::".len()..])
        } else {
            (module.to_vec(), &rest[i..])
        };
        while let Some(t) = tail.strip_prefix("super::") {
            base.pop();
            tail = t;
        }
        let words: Vec<&str> = match tail.strip_prefix('{') {
            Some(group) => group[..group.find('}').unwrap_or(group.len())]
                .split(',')
                .collect(),
            None => vec![tail],
        };
        for w in words {
            let w: String = w
                .trim()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !w.is_empty() {
                out.push((base.clone(), w));
            }
        }
        rest = tail;
    }
    out
}

/// The file-level edges among `host/`'s files other than the `mod.rs`
/// files (which assemble their folders: declaring, re-exporting, adding
/// to linkers). A name that is no file is an item of a `mod.rs` (such as
/// `TaskData`, the composed store data) and makes no edge.
fn host_edges(src: &Path) -> BTreeSet<(String, String)> {
    let files = rust_files(&src.join("host"));
    let unit = |m: &[String]| m.join("/");
    let is_file = |m: &[String]| {
        let p = src.join(m.join("/"));
        p.with_extension("rs").is_file() || p.join("mod.rs").is_file()
    };
    let mut out = BTreeSet::new();
    for path in files {
        if path.file_name().is_some_and(|n| n == "mod.rs") {
            continue;
        }
        let from = module_path(path.strip_prefix(src).unwrap());
        let text = std::fs::read_to_string(&path).unwrap();
        for (mut base, name) in host_paths(&code(&text), &from) {
            base.push(name);
            if is_file(&base) && base != from && base.len() > 1 {
                out.insert((unit(&from), unit(&base)));
            }
        }
    }
    out
}

/// The host functions are one folder per import group (`host/warden`,
/// `host/wasi`, `host/component`, `host/teavm.rs`) on shared files (`host/guest.rs`,
/// `host/sockets.rs`, …): a group names no other group, a shared file
/// names no group, and the files form no cycle.
#[test]
fn host_groups_name_no_other_group() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let edges = host_edges(&src);
    assert!(edges.len() > 20, "the reader found too little: {edges:?}");
    let group = |u: &str| {
        let g = u.split('/').nth(1).unwrap_or("").to_string();
        ["warden", "wasi", "teavm", "component"]
            .contains(&g.as_str())
            .then_some(g)
    };
    let crossing: Vec<_> = edges
        .iter()
        .filter(|(a, b)| group(b).is_some() && group(a) != group(b))
        .collect();
    assert!(
        crossing.is_empty(),
        "edges into another group: {crossing:?}"
    );
    let mut left = edges.clone();
    // Peel off files nothing left names; what remains is on a cycle.
    loop {
        let named: BTreeSet<&String> = left.iter().map(|(_, b)| b).collect();
        let leaves: BTreeSet<String> = left
            .iter()
            .map(|(a, _)| a.clone())
            .filter(|a| !named.contains(a))
            .collect();
        if leaves.is_empty() {
            break;
        }
        left.retain(|(a, _)| !leaves.contains(a));
    }
    assert!(left.is_empty(), "files of host/ on a cycle: {left:?}");
}

#[test]
fn the_host_reader_resolves_relative_paths() {
    let module: Vec<String> = ["host", "warden", "ipc"].map(String::from).to_vec();
    let got = host_paths(
        "use super::active::{a, b};\nuse super::{state::S, message::M};\n\
         let x = super::super::guest::range(); use crate::host::sockets::D;",
        &module,
    );
    let names: Vec<String> = got
        .iter()
        .map(|(b, n)| format!("{}/{n}", b.join("/")))
        .collect();
    assert_eq!(
        names,
        [
            "host/warden/active",
            "host/warden/state",
            "host/warden/message",
            "host/guest",
            "host/sockets"
        ]
    );
}

/// The functions of `src` (a crate's source folder) longer than `limit`
/// lines, test code aside: `(file:line name, lines)`.
fn long_functions(src: &Path, limit: usize) -> Vec<(String, usize)> {
    let mut out = vec![];
    for path in rust_files(src) {
        if is_test_module(&path) {
            continue;
        }
        let text = code(&std::fs::read_to_string(&path).unwrap());
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let trimmed = line.trim_start();
            let indent = &line[..line.len() - trimmed.len()];
            let Some(name) = fn_name(trimmed) else {
                continue;
            };
            let close = format!("{indent}}}");
            if let Some(end) = lines[i + 1..].iter().position(|l| *l == close) {
                if end + 2 > limit {
                    let at = format!("{}:{} {name}", path.display(), i + 1);
                    out.push((at, end + 2));
                }
            }
        }
    }
    out
}

/// The name of the function a line declares, if it declares one.
fn fn_name(line: &str) -> Option<&str> {
    let mut rest = line;
    for prefix in [
        "pub(crate) ",
        "pub(super) ",
        "pub ",
        "const ",
        "async ",
        "unsafe ",
    ] {
        rest = rest.strip_prefix(prefix).unwrap_or(rest);
    }
    let rest = rest.strip_prefix("fn ")?;
    rest.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .next()
}

/// Functions short enough to see whole, in the library and the two
/// crates below it.
#[test]
fn no_function_is_longer_than_60_lines() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut long = vec![];
    for krate in [".", "../warden-policy", "../warden-sync"] {
        long.extend(long_functions(&root.join(krate).join("src"), 60));
    }
    assert!(long.is_empty(), "functions over 60 lines: {long:#?}");
}

#[test]
fn the_length_reader_counts_a_function_from_its_line_to_its_brace() {
    let dir = tempfile::tempdir().unwrap();
    let body = "    x();\n".repeat(60);
    let text = format!("fn short() {{\n}}\n\npub(crate) fn long() {{\n{body}}}\n");
    std::fs::write(dir.path().join("a.rs"), text).unwrap();
    let long = long_functions(dir.path(), 60);
    assert_eq!(long.len(), 1, "{long:?}");
    assert!(
        long[0].0.ends_with("a.rs:4 long") && long[0].1 == 62,
        "{long:?}"
    );
}
