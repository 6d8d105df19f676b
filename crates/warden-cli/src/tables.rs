//! The tables `warden ps` and `warden top` print, from the control API's
//! JSON. Every column is as wide as its widest cell, so long names and
//! large ids keep the columns aligned.

use serde_json::Value;

/// How a column's cells line up.
#[derive(Clone, Copy)]
enum Align {
    Left,
    Right,
}
use Align::{Left, Right};

/// A table: a header row, then rows of cells, rendered with every column
/// as wide as its widest cell (the last column is not padded).
struct Grid {
    columns: Vec<(&'static str, Align)>,
    rows: Vec<Vec<String>>,
}

impl Grid {
    fn new(columns: &[(&'static str, Align)]) -> Grid {
        Grid {
            columns: columns.to_vec(),
            rows: Vec::new(),
        }
    }

    /// Adds a row. Control characters become `?`: a name or a reason may
    /// come from a guest (a trap's message names its functions), and must
    /// not move the operator's cursor or colour their terminal.
    fn push(&mut self, row: Vec<String>) {
        debug_assert_eq!(row.len(), self.columns.len());
        let plain = |c: String| c.replace(|ch: char| ch.is_control(), "?");
        self.rows.push(row.into_iter().map(plain).collect());
    }

    fn render(&self) -> String {
        let width = |i: usize| {
            let cells = self.rows.iter().map(|r| r[i].chars().count());
            cells.chain([self.columns[i].0.len()]).max().unwrap_or(0)
        };
        let widths: Vec<usize> = (0..self.columns.len()).map(width).collect();
        let heads: Vec<String> = self.columns.iter().map(|c| c.0.to_string()).collect();
        let mut out = String::new();
        for row in std::iter::once(&heads).chain(&self.rows) {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                let last = i + 1 == row.len();
                let pad = widths[i].saturating_sub(cell.chars().count());
                let sep = if i == 0 { "" } else { " " };
                match (self.columns[i].1, last) {
                    (Left, true) => line.push_str(&format!("{sep}{cell}")),
                    (Left, false) => line.push_str(&format!("{sep}{cell}{}", " ".repeat(pad))),
                    (Right, _) => line.push_str(&format!("{sep}{}{cell}", " ".repeat(pad))),
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// A byte count or rate, short (k = 1,000, M = 1,000,000).
fn rate(v: &Value) -> String {
    let b = v.as_f64().unwrap_or(0.0);
    if b >= 1e6 {
        format!("{:.1}M", b / 1e6)
    } else if b >= 1e3 {
        format!("{:.1}k", b / 1e3)
    } else {
        format!("{b:.0}")
    }
}

fn mib(v: &Value) -> String {
    match v.as_f64() {
        Some(b) => format!("{:.1}", b / (1 << 20) as f64),
        None => "-".into(),
    }
}

/// A JSON number as written, "-" if absent.
fn num(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        v => v.to_string(),
    }
}

pub fn is_ended(t: &Value) -> bool {
    matches!(t["state"].as_str(), Some("exited" | "trapped" | "killed"))
}

/// How an ended task ended: its exit code, or why it trapped or was
/// killed; empty for a live task.
fn ending(t: &Value) -> String {
    let first = |why: &str| why.lines().next().unwrap_or("").to_string();
    match (t["exit_code"].as_i64(), t["reason"].as_str()) {
        (Some(code), _) => format!("exit {code}"),
        (None, Some(why)) => first(why),
        // A live task its supervisor restarted: how often, and why last.
        _ => match t["last_restart_reason"].as_str() {
            Some(why) => format!(
                "restarted {}x, last after {}",
                num(&t["restarts"]),
                first(why)
            ),
            None => String::new(),
        },
    }
}

/// The machine's budget (the root) in two lines, above the task table.
pub fn memory_line(root: &Value) -> String {
    let size = |v: &Value| v.as_u64().map_or("-".into(), warden::units::format_size);
    let limit = match root["limit_bytes"].as_u64() {
        Some(l) => warden::units::format_size(l),
        None => "no limit".into(),
    };
    format!(
        "memory: {} of the root budget's {limit} charged (peak {}), {} refused\n        {} guaranteed, {} surplus\n\n",
        size(&root["charged_bytes"]),
        size(&root["peak_bytes"]),
        root["refusals"].as_u64().unwrap_or(0),
        size(&root["guaranteed_bytes"]),
        size(&root["surplus_bytes"]),
    )
}

/// The task table's columns: all of them, or (`wide` false) those that
/// fit 100 columns with names of up to 20 characters.
fn task_columns(wide: bool) -> Vec<(&'static str, Align)> {
    let all = [
        ("ID", Right),
        ("NAME", Left),
        ("PARENT", Right),
        ("STATE", Left),
        ("CPU%", Right),
        ("CPU(ms)", Right),
        ("MEM(MiB)", Right),
        ("LIMIT", Right),
        ("GUAR", Right),
        ("SURPLUS", Right),
        ("PEAK", Right),
        ("CALLS", Right),
        ("SENT", Right),
        ("RECV", Right),
        ("SOCKS", Right),
        ("MAPPED", Right),
        ("NET-TX", Right),
        ("NET-RX", Right),
        ("TX/s", Right),
        ("RX/s", Right),
        ("RESTARTS", Right),
        ("SERVES", Left),
        ("ENDED", Left),
    ];
    let narrow = [
        "ID", "NAME", "STATE", "CPU%", "CPU(ms)", "MEM(MiB)", "PEAK", "CALLS", "TX/s", "RX/s",
        "ENDED",
    ];
    all.into_iter()
        .filter(|(name, _)| wide || narrow.contains(name))
        .collect()
}

/// One task's cells, by column name.
fn task_cell(t: &Value, column: &str, depth: usize) -> String {
    let ended = is_ended(t);
    match column {
        "ID" => num(&t["id"]),
        "NAME" => format!("{}{}", "  ".repeat(depth), t["name"].as_str().unwrap_or("")),
        "PARENT" => num(&t["parent"]),
        "STATE" => t["state"].as_str().unwrap_or("").to_string(),
        "CPU%" if ended => "-".into(),
        "CPU%" => format!("{:.1}", t["cpu_pct"].as_f64().unwrap_or(0.0)),
        "CPU(ms)" => format!("{:.1}", t["cpu_ms"].as_f64().unwrap_or(0.0)),
        // An ended task holds nothing: its PEAK says what it used.
        "MEM(MiB)" | "SURPLUS" | "SOCKS" | "MAPPED" | "TX/s" | "RX/s" if ended => "-".into(),
        "MEM(MiB)" => mib(&t["memory_bytes"]),
        "LIMIT" => mib(&t["memory_limit_bytes"]),
        "GUAR" => mib(&t["memory_guarantee_bytes"]),
        "SURPLUS" => mib(&t["surplus_bytes"]),
        "PEAK" => mib(&t["peak_memory_bytes"]),
        "CALLS" => num(&t["ipc_calls"]),
        "SENT" => num(&t["bytes_sent"]),
        "RECV" => num(&t["bytes_received"]),
        "SOCKS" => num(&t["sockets"]),
        "MAPPED" => mapped(t),
        "NET-TX" => rate(&t["net_bytes_sent"]),
        "NET-RX" => rate(&t["net_bytes_received"]),
        "TX/s" => rate(&t["net_tx_rate"]),
        "RX/s" => rate(&t["net_rx_rate"]),
        "RESTARTS" => num(&t["restarts"]),
        "SERVES" => serves(t),
        "ENDED" => ending(t),
        _ => String::new(),
    }
}

/// The WIT interfaces a typed server serves ("-" for any other task).
fn serves(t: &Value) -> String {
    let list: Vec<&str> = (t["serves"].as_array().into_iter().flatten())
        .filter_map(Value::as_str)
        .collect();
    match list.is_empty() {
        true => "-".into(),
        false => list.join(","),
    }
}

/// A task's mappings: how many, their size (and revocations, if any).
fn mapped(t: &Value) -> String {
    let n = t["mapped"].as_u64().unwrap_or(0);
    let revoked = t["mappings_revoked"].as_u64().unwrap_or(0);
    let mut s = match n {
        0 => "0".to_string(),
        _ => format!("{n}/{}M", mib(&t["mapped_bytes"])),
    };
    if revoked > 0 {
        s.push_str(&format!(" r{revoked}"));
    }
    s
}

/// The task table: the tree (children under their parent), sorted within
/// each level by `sort` ("cpu" or "memory") if given; every column, or
/// (`wide` false) those that fit 100 columns.
pub fn tasks(tasks: &Value, sort: Option<&str>, wide: bool) -> String {
    let columns = task_columns(wide);
    let mut grid = Grid::new(&columns);
    let list = tasks.as_array().map_or(&[][..], Vec::as_slice);
    let mut stack: Vec<(&Value, usize)> = children(list, &Value::Null, sort)
        .into_iter()
        .rev()
        .map(|t| (t, 0))
        .collect();
    while let Some((t, depth)) = stack.pop() {
        grid.push(columns.iter().map(|c| task_cell(t, c.0, depth)).collect());
        let kids = children(list, &t["id"], sort);
        stack.extend(kids.into_iter().rev().map(|k| (k, depth + 1)));
    }
    grid.render()
}

/// The tasks of `list` whose parent is `parent`, in `sort`'s order.
fn children<'a>(list: &'a [Value], parent: &Value, sort: Option<&str>) -> Vec<&'a Value> {
    let mut kids: Vec<&Value> = list.iter().filter(|t| &t["parent"] == parent).collect();
    let key = |t: &Value, k: &str| t[k].as_f64().unwrap_or(0.0);
    match sort {
        Some("cpu") => kids.sort_by(|a, b| key(b, "cpu_pct").total_cmp(&key(a, "cpu_pct"))),
        Some("memory") => {
            kids.sort_by(|a, b| key(b, "memory_bytes").total_cmp(&key(a, "memory_bytes")))
        }
        _ => {}
    }
    kids
}

/// The scheduling groups as a tree, each with what its subtree's live
/// tasks use: CPU, memory, sockets and bandwidth. Empty without groups.
pub fn groups(tree: &Value) -> String {
    let groups = tree["groups"].as_array().map_or(&[][..], Vec::as_slice);
    if groups.is_empty() {
        return String::new();
    }
    let mut grid = Grid::new(&[
        ("GROUP", Left),
        ("TASKS", Right),
        ("CPU%", Right),
        ("MEM(MiB)", Right),
        ("SOCKS", Right),
        ("TX/s", Right),
        ("RX/s", Right),
        ("BW-SHR", Right),
        ("MEMBERS", Left),
    ]);
    fn rows(groups: &[Value], parent: &Value, depth: usize, grid: &mut Grid) {
        for g in groups.iter().filter(|g| &g["parent"] == parent) {
            let members: Vec<&str> = g["members"]
                .as_array()
                .map(|m| m.iter().filter_map(|t| t["name"].as_str()).collect())
                .unwrap_or_default();
            grid.push(vec![
                format!("{}{}", "  ".repeat(depth), g["name"].as_str().unwrap_or("")),
                num(&g["tasks"]),
                format!("{:.1}", g["cpu_pct"].as_f64().unwrap_or(0.0)),
                mib(&g["memory_bytes"]),
                num(&g["sockets"]),
                rate(&g["net_tx_rate"]),
                rate(&g["net_rx_rate"]),
                num(&g["bandwidth_share"]),
                members.join(" "),
            ]);
            rows(groups, &g["name"], depth + 1, grid);
        }
    }
    rows(groups, &Value::Null, 0, &mut grid);
    format!("\n{}", grid.render())
}

/// The web server's routes, each with its requests, status codes,
/// latency percentiles of its latest requests and the tasks handling its
/// requests now. Empty without routes.
pub fn routes(routes: &Value) -> String {
    let routes = routes.as_array().map_or(&[][..], Vec::as_slice);
    if routes.is_empty() {
        return String::new();
    }
    let mut grid = Grid::new(&[
        ("ROUTE", Left),
        ("PATH", Left),
        ("KIND", Left),
        ("REQS", Right),
        ("INFL", Right),
        ("QUEUED", Right),
        ("TASKS", Right),
        ("P50(ms)", Right),
        ("P99(ms)", Right),
        ("CODES", Left),
    ]);
    let ms = |v: &Value| v.as_f64().map_or("-".into(), |x| format!("{x:.3}"));
    for r in routes {
        let codes: Vec<String> = r["codes"]
            .as_object()
            .map(|m| m.iter().map(|(c, n)| format!("{c}:{n}")).collect())
            .unwrap_or_default();
        grid.push(vec![
            r["name"].as_str().unwrap_or("?").to_string(),
            r["path"].as_str().unwrap_or("?").to_string(),
            r["kind"].as_str().unwrap_or("?").to_string(),
            num(&r["requests"]),
            num(&r["in_flight"]),
            num(&r["queued"]),
            num(&r["tasks"]),
            ms(&r["p50_ms"]),
            ms(&r["p99_ms"]),
            codes.join(" "),
        ]);
    }
    format!("\n{}", grid.render())
}

/// The block devices, each with who holds it and what was done to it.
/// Empty without devices.
pub fn devices(devices: &Value) -> String {
    let devices = devices.as_array().map_or(&[][..], Vec::as_slice);
    if devices.is_empty() {
        return String::new();
    }
    let mut grid = Grid::new(&[
        ("DEVICE", Left),
        ("SIZE", Right),
        ("HELD", Left),
        ("READS", Right),
        ("READ", Right),
        ("WRITES", Right),
        ("WRITTEN", Right),
        ("SYNCS", Right),
        ("ERRORS", Right),
    ]);
    let size = |v: &Value| v.as_u64().map_or("-".into(), warden::units::format_size);
    for d in devices {
        let sectors = d["sectors"].as_u64().unwrap_or(0);
        grid.push(vec![
            d["name"].as_str().unwrap_or("?").to_string(),
            warden::units::format_size(sectors * warden::DEVICE_SECTOR),
            if d["claimed"] == true { "yes" } else { "no" }.to_string(),
            num(&d["reads"]),
            size(&d["read_bytes"]),
            num(&d["writes"]),
            size(&d["written_bytes"]),
            num(&d["syncs"]),
            num(&d["errors"]),
        ]);
    }
    format!("\n{}", grid.render())
}

/// The file services tasks' directories are served by, each with what
/// the directories carried. Empty without any.
pub fn file_services(services: &Value) -> String {
    let services = services.as_array().map_or(&[][..], Vec::as_slice);
    if services.is_empty() {
        return String::new();
    }
    let mut grid = Grid::new(&[
        ("FILE SERVICE", Left),
        ("CLIENTS", Right),
        ("OPS", Right),
        ("READ", Right),
        ("WRITTEN", Right),
        ("ERRORS", Right),
    ]);
    let size = |v: &Value| v.as_u64().map_or("-".into(), warden::units::format_size);
    for f in services {
        grid.push(vec![
            f["name"].as_str().unwrap_or("?").to_string(),
            num(&f["clients"]),
            num(&f["ops"]),
            size(&f["read_bytes"]),
            size(&f["written_bytes"]),
            num(&f["errors"]),
        ]);
    }
    format!("\n{}", grid.render())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Columns stay aligned whatever the widths of ids and names; ended
    /// tasks say how they ended and hold no memory.
    #[test]
    fn columns_line_up() {
        let list = json!([
            {"id": 1, "name": "a", "state": "running", "memory_bytes": 1048576,
             "peak_memory_bytes": 2097152},
            {"id": 123456, "name": "a-much-longer-name-than-the-header", "parent": 1,
             "state": "exited", "exit_code": 3, "memory_bytes": 0,
             "peak_memory_bytes": 3145728},
            {"id": 7, "name": "k", "state": "killed", "reason": "memory limit"},
        ]);
        let out = tasks(&list, None, false);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 4, "{out}");
        let state_at = lines[0].find("STATE").unwrap();
        for l in &lines[1..] {
            let s = &l[state_at..];
            assert!(
                s.starts_with("running") || s.starts_with("exited") || s.starts_with("killed"),
                "{out}"
            );
        }
        assert!(
            lines[2].contains("  a-much-longer-name") && lines[2].ends_with("exit 3"),
            "{out}"
        );
        assert!(lines[3].ends_with("memory limit"), "{out}");
        // The ended task's memory column is "-", its peak 3.0.
        assert!(
            lines[2].contains(" - ") && lines[2].contains(" 3.0 "),
            "{out}"
        );
    }

    /// What a guest may put in a name or a trap's reason reaches the
    /// terminal as text: no escape sequences, one line per task.
    #[test]
    fn cells_carry_no_control_characters() {
        let list = json!([{"id": 1, "name": "x\u{1b}[2Jy", "state": "trapped",
            "reason": "wasm trap: \u{1b}]0;owned\u{7} in f\nbacktrace: 0: f"}]);
        let out = tasks(&list, None, true);
        assert!(!out.chars().any(|c| c.is_control() && c != '\n'), "{out:?}");
        assert_eq!(out.lines().count(), 2, "{out}");
        assert!(
            out.contains("x?[2Jy") && out.contains("?]0;owned? in f"),
            "{out}"
        );
    }

    #[test]
    fn narrow_table_fits_100_columns() {
        // Six-digit ids, a 20-character name, 20 minutes of CPU, 4 GiB,
        // millions of calls, 100 MB/s each way.
        let list = json!([{"id": 999999, "name": "twenty-chars-long-xx", "state": "suspended",
            "cpu_pct": 100.0, "cpu_ms": 1234567.8, "memory_bytes": 4294967296u64,
            "memory_limit_bytes": 4294967296u64, "peak_memory_bytes": 4294967296u64,
            "ipc_calls": 1234567, "sockets": 1000, "net_tx_rate": 1.5e8, "net_rx_rate": 1.5e8}]);
        for l in tasks(&list, Some("cpu"), false).lines() {
            assert!(l.len() <= 100, "{} columns: {l}", l.len());
        }
        assert!(tasks(&list, None, true).lines().any(|l| l.len() > 100));
    }
}
