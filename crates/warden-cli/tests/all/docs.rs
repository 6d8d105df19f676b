//! The documentation kept true to the code: the manifest reference
//! (`doc/manifest.md`) names every key the parser accepts, in the
//! section of its table, and every relative link in the README and
//! `doc/` leads to a file (and heading) that exists.

use crate::util::*;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The keys `warden check` says a table accepts: its answer to a bogus
/// key at the end of `manifest`.
fn accepted_keys(manifest: &str) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.toml");
    std::fs::write(&path, format!("{manifest}\nno_such_key = 1\n")).unwrap();
    let out = warden().arg("check").arg(&path).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    let list = err
        .split_once("expected one of ")
        .or_else(|| err.split_once(", expected "))
        .unwrap_or_else(|| panic!("no key list for {manifest:?}: {err}"))
        .1
        .lines()
        .next()
        .unwrap_or("");
    // "`a`, `b`" or "`a` or `b`": the words in backticks.
    list.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_string)
        .collect()
}

/// The text of `## heading` in `page`, up to the next `## `.
fn section<'a>(page: &'a str, heading: &str) -> &'a str {
    let start = page
        .find(&format!("\n## {heading}\n"))
        .unwrap_or_else(|| panic!("doc/manifest.md has no \"## {heading}\""));
    let rest = &page[start + 4..];
    &rest[..rest.find("\n## ").unwrap_or(rest.len())]
}

#[test]
fn the_manifest_reference_names_every_key() {
    let page = std::fs::read_to_string(root().join("doc/manifest.md")).unwrap();
    let task = "[[task]]\nname = 'a'\nmodule = 'a.wasm'";
    let http = "[[http]]\nlisten = '127.0.0.1:0'";
    let tables = [
        ("Top level", String::new()),
        ("[runtime]", "[runtime]".into()),
        ("[[group]]", "[[group]]\nname = 'g'".into()),
        ("[[task]]", task.into()),
        ("[[http]]", http.into()),
        (
            "[[http.route]]",
            format!("{http}\n[[http.route]]\npath = '/'\nmodule = 'a.wasm'"),
        ),
        (
            "[cluster]",
            "[cluster]\nnats = 'nats://127.0.0.1:4222'\nnode = 'a'".into(),
        ),
        (
            "[telemetry]",
            "[telemetry]\notlp = 'http://127.0.0.1:4318'".into(),
        ),
        (
            "[[device]]",
            "[[device]]\nname = 'd'\nfile = 'd.img'".into(),
        ),
    ];
    let mut missing = Vec::new();
    for (heading, manifest) in tables {
        let keys = accepted_keys(&manifest);
        assert!(keys.len() >= 2, "{heading}: {keys:?}");
        let text = section(&page, heading);
        for key in keys {
            if !text.contains(&format!("`{key}`")) {
                missing.push(format!("{heading} {key}"));
            }
        }
    }
    assert!(missing.is_empty(), "doc/manifest.md lacks: {missing:?}");
}

/// `[text](target)` links in `page` that are relative paths.
fn relative_links(page: &str) -> Vec<String> {
    let mut links = Vec::new();
    let mut rest = page;
    while let Some(i) = rest.find("](") {
        rest = &rest[i + 2..];
        let Some(end) = rest.find(')') else { break };
        let target = &rest[..end];
        if !target.contains("://") && !target.starts_with("mailto:") && !target.is_empty() {
            links.push(target.to_string());
        }
    }
    links
}

/// GitHub's anchor for a heading: lower case, spaces to `-`, and only
/// letters, digits, `-` and `_` kept.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(page: &str) -> Vec<String> {
    let mut in_code = false;
    let mut out = Vec::new();
    for line in page.lines() {
        if line.starts_with("```") {
            in_code = !in_code;
        } else if !in_code && line.starts_with('#') {
            out.push(anchor(line.trim_start_matches('#')));
        }
    }
    out
}

#[test]
fn relative_links_lead_somewhere() {
    let root = root();
    let mut pages = vec![root.join("README.md")];
    for dir in ["doc", "examples"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap().flatten() {
            let p = entry.path();
            if p.extension().map_or(false, |e| e == "md") {
                pages.push(p);
            } else if p.join("README.md").exists() {
                pages.push(p.join("README.md"));
            }
        }
    }
    let mut broken = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        for link in relative_links(&text) {
            let (file, frag) = link.split_once('#').unwrap_or((&link, ""));
            let target = if file.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(file)
            };
            let ok = target.exists()
                && (frag.is_empty()
                    || !target.is_file()
                    || anchors(&std::fs::read_to_string(&target).unwrap_or_default())
                        .iter()
                        .any(|a| a == frag));
            if !ok {
                broken.push(format!("{}: {link}", page.display()));
            }
        }
    }
    assert!(broken.is_empty(), "broken links: {broken:#?}");
}
