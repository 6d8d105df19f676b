//! The module graph's layers, checked: a module may name modules of its
//! own layer or lower ones, never a higher one. The test reads every
//! source file and the paths it names (`crate::m::…`, `use crate::{m::…}`,
//! and the crate root's re-exports, by the module they come from).
//!
//! Exceptions would be listed in [`KNOWN_UPWARD`] (none are): a new
//! upward edge fails the test, and so does a listed one that is gone, so
//! that the list only shrinks.

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
    ],
    &["task", "output"],
    &["cpu", "limiter", "net", "report", "cache"],
    &["executor", "ipc"],
    &["host", "module", "cluster"],
    &["runtime"],
    &["manifest", "http", "control", "dashboard"],
    &["system"],
];

/// Upward edges tolerated for now, `(from, to)`: each one a knot to cut.
const KNOWN_UPWARD: &[(&str, &str)] = &[];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|l| l.contains(&module))
}

/// The top-level module a root re-export (`crate::Runtime`) comes from,
/// read from `lib.rs`'s `pub use m::{…}` lines.
fn root_exports(lib: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for item in lib.split(';') {
        let Some(rest) = item.trim().strip_prefix("pub use ") else {
            continue;
        };
        let Some((module, names)) = rest.split_once("::") else {
            continue;
        };
        for name in names.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
            if name.starts_with(|c: char| c.is_ascii_uppercase()) {
                out.insert(name.to_string(), module.to_string());
            }
        }
    }
    out
}

/// The code of a source file: without its inline test module (tests may
/// use anything) and its comment lines (a doc link is not a dependency).
fn code(src: &str) -> String {
    let src = match src.find("#[cfg(test)]\nmod tests") {
        Some(i) => &src[..i],
        None => src,
    };
    src.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top-level modules a file's code names.
fn named(src: &str, exports: &BTreeMap<String, String>) -> BTreeSet<String> {
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
    for piece in src.split("crate::").skip(1) {
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

/// Every `(from, to)` edge between top-level modules.
fn edges(src: &Path) -> BTreeSet<(String, String)> {
    let lib = std::fs::read_to_string(src.join("lib.rs")).unwrap();
    let exports = root_exports(&lib);
    let mut out = BTreeSet::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let rel = path.strip_prefix(src).unwrap();
            let top = rel.iter().next().unwrap().to_string_lossy();
            let top = top.trim_end_matches(".rs").to_string();
            let is_test = path.file_name().is_some_and(|n| n == "tests.rs");
            if top == "lib"
                || top == "layers"
                || is_test
                || path.extension().is_none_or(|e| e != "rs")
            {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            for to in named(&code(&text), &exports) {
                if to != top {
                    out.insert((top.clone(), to));
                }
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
    let exports = root_exports("pub use runtime::{Error, Runtime};\npub use task::TaskSpec;");
    let src = "use crate::{net::x, sched::{a, b}, Runtime};\nfn f() { crate::ipc::call(); }\n\
               let t: crate::TaskSpec;";
    let got: Vec<String> = named(src, &exports).into_iter().collect();
    assert_eq!(got, ["ipc", "net", "runtime", "sched", "task"]);
}
