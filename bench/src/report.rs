//! The Markdown report: the machine, the method, then every table with the
//! paper's figures beside the peers' and Warden's, the Warden/peer ratios
//! and the plot.

use crate::model::{Cell, Kind, Run, Table};
use std::fmt::Write;
use std::path::Path;

/// Three significant figures (whole numbers from 100 up), no exponent.
pub fn num(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 || !a.is_finite() {
        return format!("{v}");
    }
    let decimals = (2 - a.log10().floor() as i32).clamp(0, 12) as usize;
    format!("{v:.decimals$}")
}

fn cell(t: &Table, i: usize, c: &Option<Cell>, kind: Kind) -> String {
    match (c, kind) {
        (None, _) => "–".into(),
        (Some(c), Kind::Warden | Kind::Peer) if t.below_resolution(i, c) => {
            "below resolution".into()
        }
        (Some(c), Kind::Paper) => num(c.median),
        (Some(c), _) if c.samples.len() < 2 => num(c.median),
        (Some(c), _) => format!(
            "{} ({}–{}){}",
            num(c.median),
            num(c.min),
            num(c.max),
            if c.noisy() { " ⚠" } else { "" }
        ),
    }
}

fn table(out: &mut String, i: usize, t: &Table, plots: &Path) {
    let _ = writeln!(out, "## {}. {}\n", i + 1, t.title);
    let _ = writeln!(out, "Reproduces: {}.\n", t.source);
    let _ = writeln!(out, "How: {}\n", t.method);
    let header: Vec<String> = t
        .columns
        .iter()
        .map(|c| {
            if c.unit.is_empty() {
                c.name.clone()
            } else {
                format!("{} ({})", c.name, c.unit)
            }
        })
        .collect();
    let _ = writeln!(out, "| system | {} |", header.join(" | "));
    let _ = writeln!(out, "|---|{}", "---|".repeat(t.columns.len()));
    for r in &t.rows {
        let name = match r.kind {
            Kind::Warden => format!("**{}**", r.system),
            Kind::Peer => r.system.clone(),
            Kind::Paper => format!("*{}*", r.system),
        };
        let cells: Vec<String> = (r.cells.iter().enumerate())
            .map(|(i, c)| cell(t, i, c, r.kind))
            .collect();
        let _ = writeln!(out, "| {name} | {} |", cells.join(" | "));
    }
    let _ = writeln!(out);
    let notes: Vec<String> = t
        .rows
        .iter()
        .filter_map(|r| r.note.as_ref().map(|n| format!("{}: {n}", r.system)))
        .chain(t.notes.iter().cloned())
        .chain(placement_note(t))
        .collect();
    let mut wardens: Vec<&String> = t.ratios.iter().map(|r| &r.warden).collect();
    wardens.dedup();
    for w in wardens {
        ratio_block(out, t, w);
    }
    for n in notes {
        let _ = writeln!(out, "- {n}");
    }
    let plot = plots.join(format!("{}.png", t.id));
    if plot.exists() {
        let _ = writeln!(out, "\n![{}](plots/{}.png)", t.title, t.id);
    }
    let _ = writeln!(out);
}

/// The whole report. `plots` is the directory the plots were written to;
/// the report links those that exist.
pub fn render(run: &Run, json_name: &str, plots: &Path) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# Warden benchmark report\n");
    let _ = writeln!(
        out,
        "Written by `scripts/bench{}` on {} in {:.0} s. Every figure below was measured in that run, \
         except rows in *italics*, which the papers printed for their own hardware. Raw samples: \
         [`results/{json_name}`](results/{json_name}).\n",
        if run.quick { " --quick" } else { "" },
        run.date,
        run.seconds
    );
    let _ = writeln!(out, "## Machine\n");
    let _ = writeln!(out, "| | |\n|---|---|");
    for (k, v) in &run.machine {
        let _ = writeln!(out, "| {k} | {v} |");
    }
    let _ = writeln!(out, "\n## Method\n");
    let _ = writeln!(
        out,
        "- Each table's contestants run in interleaved rounds (A B C …, the order rotating each \
         round, and its stride changing, so that no contestant always runs right after the same \
         one) so that drift in the machine, and what one contestant leaves behind, falls on all of \
         them alike.\n\
         - One warm-up round runs first and is discarded; then {} counted rounds{}. Each figure is \
         given as median (min–max) over the rounds; ⚠ marks a figure whose spread exceeds a quarter \
         of its median. (The web server's tables measure in bursts instead: see their method.)\n\
         - Ratios are Warden's median over the peer's, per column.\n\
         - Warden and raw Wasmtime run in this process; every other peer is a child process, built \
         or installed by the harness (C with the host's cc, Java with javac, Erlang with erlc). \
         This process allocates with mimalloc with transparent huge pages off, as the `warden` \
         command does (the in-process peers, raw Wasmtime and hyper, share both).",
        run.rounds,
        if run.quick { " (quick mode: fewer iterations and smaller N; figures are rougher)" } else { "" }
    );
    if !run.missing.is_empty() {
        let _ = writeln!(out, "\nPeers that could not be run:\n");
        for m in &run.missing {
            let _ = writeln!(out, "- {m}");
        }
    }
    let _ = writeln!(out);
    for (i, t) in run.tables.iter().enumerate() {
        table(&mut out, i, t, plots);
    }
    out
}

/// The ratios of Warden row `warden` to each peer, as a table.
fn ratio_block(out: &mut String, t: &Table, warden: &str) {
    let ratios: Vec<_> = t.ratios.iter().filter(|r| r.warden == warden).collect();
    // Rates (calls/s, MB/s) are better higher; times and sizes lower.
    let rates = t.columns.iter().all(|c| c.unit.ends_with("/s"));
    let reading = match rates {
        true => "above 1: Warden does more",
        false => "below 1: Warden takes less",
    };
    let _ = writeln!(out, "Ratio {warden} / peer ({reading}):\n");
    let cols: Vec<&String> = t
        .columns
        .iter()
        .map(|c| &c.name)
        .filter(|c| ratios.iter().any(|r| &r.column == *c))
        .collect();
    let names: Vec<&str> = cols.iter().map(|c| c.as_str()).collect();
    let _ = writeln!(out, "| peer | {} |", names.join(" | "));
    let _ = writeln!(out, "|---|{}", "---|".repeat(cols.len()));
    let mut peers: Vec<&String> = ratios.iter().map(|r| &r.peer).collect();
    peers.dedup();
    for p in peers {
        let cells: Vec<String> = cols
            .iter()
            .map(|c| {
                ratios
                    .iter()
                    .find(|r| &r.peer == p && &r.column == *c)
                    .map_or("–".into(), |r| ratio_cell(r))
            })
            .collect();
        let _ = writeln!(out, "| {p} | {} |", cells.join(" | "));
    }
    let _ = writeln!(out);
}

/// A ratio, and where the placement varied, the same in the near and in
/// the far rounds.
fn ratio_cell(r: &crate::model::Ratio) -> String {
    match (r.near, r.far) {
        (Some(n), Some(f)) => format!("{}× ({}× near, {}× far)", num(r.value), num(n), num(f)),
        _ => format!("{}×", num(r.value)),
    }
}

/// What the table's rounds saw of the machine's placement.
fn placement_note(t: &Table) -> Option<String> {
    if t.placement.is_empty() {
        return None;
    }
    let each: Vec<String> = t.placement.iter().map(|ns| format!("{ns:.0}")).collect();
    let mut note = format!(
        "Core-to-core round trip at the start of each counted round: {} ns.",
        each.join(", ")
    );
    if let Some(at) = t.placement_split() {
        note += &format!(
            " It varied, so each ratio is also given within the rounds at or below {at:.0} ns \
             (near) and within those above (far); a target holds only if it holds in both."
        );
    }
    Some(note)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Table;

    #[test]
    fn numbers() {
        assert_eq!(num(12345.6), "12346");
        assert_eq!(num(123.45), "123");
        assert_eq!(num(12.345), "12.3");
        assert_eq!(num(1.2345), "1.23");
        assert_eq!(num(0.12345), "0.123");
        assert_eq!(num(0.0012), "0.00120");
        assert_eq!(num(0.0), "0");
    }

    #[test]
    fn renders_rows_ratios_and_notes() {
        let mut t = Table::new("x", "X", "seed", &[("a", "µs")]);
        t.row("Warden", Kind::Warden, vec![Cell::of(vec![1.0, 2.0, 3.0])]);
        t.row("Peer", Kind::Peer, vec![Cell::of(vec![4.0])]);
        t.paper("Old", &[Some(9.0)]);
        t.notes.push("a note".into());
        t.compute_ratios();
        let run = Run {
            date: "2026-01-01".into(),
            quick: true,
            rounds: 3,
            seconds: 1.0,
            machine: Default::default(),
            tables: vec![t],
            missing: vec![],
        };
        let md = render(&run, "r.json", Path::new("/nonexistent"));
        assert!(md.contains("| **Warden** | 2.00 (1.00–3.00) ⚠ |"), "{md}");
        assert!(md.contains("| *Old* | 9.00 |"), "{md}");
        assert!(md.contains("| Peer | 0.500× |"), "{md}");
        assert!(md.contains("- a note"), "{md}");
    }
}
