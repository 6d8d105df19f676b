//! The operator commands that talk to a running `warden run` through its
//! control API (see the library's `control` module).

use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// One HTTP request to the control API; the status and JSON body.
fn request(
    addr: &str,
    method: &str,
    path: &str,
    body: Option<&str>,
) -> Result<(u16, Value), String> {
    let mut s = TcpStream::connect(addr).map_err(|e| {
        format!("no warden running at {addr} ({e}); start one with `warden run`, or pass --control")
    })?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok();
    let body = body.unwrap_or("");
    let auth = warden::control::find_token(addr)
        .map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    let req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Connection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes())
        .map_err(|e| format!("control API at {addr}: {e}"))?;
    let mut text = String::new();
    s.read_to_string(&mut text)
        .map_err(|e| format!("control API at {addr}: {e}"))?;
    let (head, payload) = text
        .split_once("\r\n\r\n")
        .ok_or("control API: malformed answer")?;
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or("control API: malformed status")?;
    let json = if payload.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(payload).unwrap_or(Value::String(payload.to_string()))
    };
    Ok((status, json))
}

fn ok(addr: &str, method: &str, path: &str, body: Option<&str>) -> Result<Value, String> {
    let (status, json) = request(addr, method, path, body)?;
    if status == 200 {
        Ok(json)
    } else {
        Err(json["error"]
            .as_str()
            .map_or_else(|| json.to_string(), str::to_string))
    }
}

fn is_ended(t: &Value) -> bool {
    matches!(t["state"].as_str(), Some("exited" | "trapped" | "killed"))
}

/// `warden dashboard`: the dashboard's address with the token in its
/// fragment (which browsers do not send to the server).
pub fn dashboard(addr: &str) -> Result<(), String> {
    ok(addr, "GET", "/api/tasks", None)?;
    match warden::control::find_token(addr) {
        Some(token) => println!("http://{addr}/#token={token}"),
        None => {
            println!("http://{addr}/");
            eprintln!("warden: no control token found for {addr}: the dashboard will show tasks but not kill them");
        }
    }
    Ok(())
}

/// `warden ps`: live tasks, or with `all` ended ones too.
pub fn ps(addr: &str, as_json: bool, all: bool) -> Result<(), String> {
    let mut tasks = ok(addr, "GET", "/api/tasks", None)?;
    if let (Value::Array(list), false) = (&mut tasks, all) {
        list.retain(|t| !is_ended(t));
    }
    if as_json {
        println!("{}", serde_json::to_string_pretty(&tasks).unwrap());
        return Ok(());
    }
    print!("{}", memory_line(&ok(addr, "GET", "/api/memory", None)?));
    print!("{}", table(&tasks, None));
    print!("{}", group_table(&ok(addr, "GET", "/api/groups", None)?));
    print!("{}", route_table(&ok(addr, "GET", "/api/routes", None)?));
    Ok(())
}

/// `warden ps --cluster`: every node of the system's cluster with its
/// live tasks (or with `all` ended ones too).
pub fn ps_cluster(addr: &str, as_json: bool, all: bool) -> Result<(), String> {
    let mut nodes = ok(addr, "GET", "/api/cluster", None)?;
    for node in nodes.as_array_mut().into_iter().flatten() {
        if let (Value::Array(list), false) = (&mut node["tasks"], all) {
            list.retain(|t| !is_ended(t));
        }
    }
    if as_json {
        println!("{}", serde_json::to_string_pretty(&nodes).unwrap());
        return Ok(());
    }
    for (i, node) in nodes.as_array().into_iter().flatten().enumerate() {
        let tasks = node["tasks"].as_array().map_or(0, Vec::len);
        let sep = if i > 0 { "\n" } else { "" };
        println!(
            "{sep}NODE {} ({tasks} tasks)",
            node["node"].as_str().unwrap_or("?")
        );
        print!("{}", table(&node["tasks"], None));
    }
    Ok(())
}

/// The web server's routes, each with its requests, status codes,
/// latency and the tasks handling its requests now. Empty without routes.
fn route_table(routes: &Value) -> String {
    let empty = vec![];
    let routes = routes.as_array().unwrap_or(&empty);
    if routes.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "\n{:<16} {:<16} {:<8} {:>8} {:>6} {:>6} {:>6} {:>8} {:>8}  CODES\n",
        "ROUTE", "PATH", "KIND", "REQS", "INFL", "QUEUED", "TASKS", "P50(ms)", "P99(ms)"
    );
    let ms = |v: &Value| match v.as_f64() {
        None => "-".to_string(),
        Some(x) if x < 0.0 => ">10s".to_string(),
        Some(x) => format!("{x}"),
    };
    for r in routes {
        let codes: Vec<String> = r["codes"]
            .as_object()
            .map(|m| m.iter().map(|(c, n)| format!("{c}:{n}")).collect())
            .unwrap_or_default();
        out.push_str(&format!(
            "{:<16} {:<16} {:<8} {:>8} {:>6} {:>6} {:>6} {:>8} {:>8}  {}\n",
            r["name"].as_str().unwrap_or("?"),
            r["path"].as_str().unwrap_or("?"),
            r["kind"].as_str().unwrap_or("?"),
            r["requests"],
            r["in_flight"],
            r["queued"],
            r["tasks"],
            ms(&r["p50_ms"]),
            ms(&r["p99_ms"]),
            codes.join(" ")
        ));
    }
    out
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

/// The scheduling groups as a tree, each with what its subtree's live
/// tasks use: CPU, memory, sockets and bandwidth. Empty without groups.
fn group_table(tree: &Value) -> String {
    let empty = vec![];
    let groups = tree["groups"].as_array().unwrap_or(&empty);
    if groups.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "\n{:<28} {:>5} {:>6} {:>8} {:>6} {:>8} {:>8} {:>7}  MEMBERS\n",
        "GROUP", "TASKS", "CPU%", "MEM(MiB)", "SOCKS", "TX/s", "RX/s", "BW-SHR"
    );
    fn rows(groups: &[Value], parent: &Value, depth: usize, out: &mut String) {
        for g in groups.iter().filter(|g| &g["parent"] == parent) {
            let members: Vec<&str> = g["members"]
                .as_array()
                .map(|m| m.iter().filter_map(|t| t["name"].as_str()).collect())
                .unwrap_or_default();
            out.push_str(&format!(
                "{:<28} {:>5} {:>6.1} {:>8} {:>6} {:>8} {:>8} {:>7}  {}\n",
                format!("{}{}", "  ".repeat(depth), g["name"].as_str().unwrap_or("")),
                g["tasks"],
                g["cpu_pct"].as_f64().unwrap_or(0.0),
                mib(&g["memory_bytes"]),
                g["sockets"],
                rate(&g["net_tx_rate"]),
                rate(&g["net_rx_rate"]),
                g["bandwidth_share"],
                members.join(" "),
            ));
            rows(groups, &g["name"], depth + 1, out);
        }
    }
    rows(groups, &Value::Null, 0, &mut out);
    out
}

/// The machine's budget (the root) in one line, above the task table.
fn memory_line(root: &Value) -> String {
    let size = |v: &Value| v.as_u64().map_or("-".into(), warden::units::format_size);
    let limit = match root["limit_bytes"].as_u64() {
        Some(l) => warden::units::format_size(l),
        None => "no limit".into(),
    };
    format!(
        "memory: {} charged to all tasks of the root budget's {limit}: {} guaranteed, {} surplus (peak {}, {} refused)\n\n",
        size(&root["charged_bytes"]),
        size(&root["guaranteed_bytes"]),
        size(&root["surplus_bytes"]),
        size(&root["peak_bytes"]),
        root["refusals"].as_u64().unwrap_or(0)
    )
}

fn mib(v: &Value) -> String {
    match v.as_f64() {
        Some(b) => format!("{:.1}", b / (1 << 20) as f64),
        None => "-".into(),
    }
}

/// The task table: the tree (children under their parent), sorted within
/// each level by `sort` ("cpu" or "memory") if given.
fn table(tasks: &Value, sort: Option<&str>) -> String {
    let empty = vec![];
    let list = tasks.as_array().unwrap_or(&empty);
    let mut out = format!(
        "{:>5} {:<28} {:>6} {:<9} {:>6} {:>10} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>5} {:>8} {:>8} {:>7} {:>7}\n",
        "ID",
        "NAME",
        "PARENT",
        "STATE",
        "CPU%",
        "CPU(ms)",
        "MEM(MiB)",
        "LIMIT",
        "GUAR",
        "SURPLUS",
        "PEAK",
        "CALLS",
        "SENT",
        "RECV",
        "SOCKS",
        "NET-TX",
        "NET-RX",
        "TX/s",
        "RX/s"
    );
    fn rows(list: &[Value], parent: &Value, depth: usize, sort: Option<&str>, out: &mut String) {
        let mut kids: Vec<&Value> = list.iter().filter(|t| &t["parent"] == parent).collect();
        match sort {
            Some("cpu") => kids.sort_by(|a, b| {
                b["cpu_pct"]
                    .as_f64()
                    .partial_cmp(&a["cpu_pct"].as_f64())
                    .unwrap()
            }),
            Some("memory") => kids.sort_by_key(|t| std::cmp::Reverse(t["memory_bytes"].as_u64())),
            _ => {}
        }
        for t in kids {
            let name = format!("{}{}", "  ".repeat(depth), t["name"].as_str().unwrap_or(""));
            let parent = t["parent"].as_u64().map_or("-".into(), |p| p.to_string());
            out.push_str(&format!(
                "{:>5} {:<28} {:>6} {:<9} {:>6.1} {:>10.1} {:>8} {:>8} {:>8} {:>8} {:>8} {:>8} {:>9} {:>9} {:>5} {:>8} {:>8} {:>7} {:>7}\n",
                t["id"].to_string(),
                name,
                parent,
                t["state"].as_str().unwrap_or(""),
                t["cpu_pct"].as_f64().unwrap_or(0.0),
                t["cpu_ms"].as_f64().unwrap_or(0.0),
                mib(&t["memory_bytes"]),
                mib(&t["memory_limit_bytes"]),
                mib(&t["memory_guarantee_bytes"]),
                mib(&t["surplus_bytes"]),
                mib(&t["peak_memory_bytes"]),
                t["ipc_calls"].to_string(),
                t["bytes_sent"].to_string(),
                t["bytes_received"].to_string(),
                t["sockets"].to_string(),
                rate(&t["net_bytes_sent"]),
                rate(&t["net_bytes_received"]),
                rate(&t["net_tx_rate"]),
                rate(&t["net_rx_rate"]),
            ));
            rows(list, &t["id"], depth + 1, sort, out);
        }
    }
    rows(list, &Value::Null, 0, sort, &mut out);
    out
}

/// `warden top`: the table, refreshed every second, until interrupted.
pub fn top(addr: &str, sort: &str, iterations: Option<u32>) -> Result<(), String> {
    let mut n = 0;
    loop {
        let tasks = ok(addr, "GET", "/api/tasks", None)?;
        let live: Vec<Value> = tasks
            .as_array()
            .map(|a| {
                a.iter()
                    .filter(|t| {
                        !matches!(t["state"].as_str(), Some("exited" | "trapped" | "killed"))
                    })
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        print!("\x1b[2J\x1b[H");
        println!(
            "warden top — {addr} — {} live tasks — sorted by {sort} (Ctrl-C quits)\n",
            live.len()
        );
        print!("{}", memory_line(&ok(addr, "GET", "/api/memory", None)?));
        print!("{}", table(&Value::Array(live), Some(sort)));
        print!("{}", group_table(&ok(addr, "GET", "/api/groups", None)?));
        print!("{}", route_table(&ok(addr, "GET", "/api/routes", None)?));
        std::io::stdout().flush().ok();
        n += 1;
        if iterations.is_some_and(|max| n >= max) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_secs(1));
    }
}

/// `warden kill|suspend|resume <task>`.
pub fn act(addr: &str, action: &str, task: &str) -> Result<(), String> {
    let r = ok(
        addr,
        "POST",
        &format!("/api/tasks/{}/{action}", encode(task)),
        None,
    )?;
    println!("{action}: task {}", r["id"]);
    Ok(())
}

/// `warden logs <task> [--follow]`.
pub fn logs(addr: &str, task: &str, follow: bool) -> Result<(), String> {
    let mut from = 0u64;
    loop {
        let r = ok(
            addr,
            "GET",
            &format!("/api/tasks/{}/logs?from={from}", encode(task)),
            None,
        )?;
        print!("{}", r["data"].as_str().unwrap_or(""));
        std::io::stdout().flush().ok();
        from = r["next"].as_u64().unwrap_or(from);
        if !follow {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// `warden spawn <module> …`.
pub fn spawn(
    addr: &str,
    module: &str,
    memory: Option<&str>,
    cpu: Option<&str>,
    args: &[String],
) -> Result<(), String> {
    let path = std::fs::canonicalize(module).map_err(|e| format!("module {module}: {e}"))?;
    let body = serde_json::json!({
        "module": path, "args": args, "memory_limit": memory, "cpu_limit": cpu,
    });
    let r = ok(addr, "POST", "/api/spawn", Some(&body.to_string()))?;
    println!("spawned task {}", r["id"]);
    Ok(())
}

/// Percent-encodes a task name for a URL path segment.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
