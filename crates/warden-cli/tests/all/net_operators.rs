//! What operators see of the network: per task and per group bytes,
//! rates and sockets in `warden ps`, `/api/groups` and `/metrics`, from a
//! running system whose task really sends.

use crate::util::*;
use std::time::{Duration, Instant};

#[test]
fn bytes_rates_and_sockets_per_task_and_group() {
    let dir = tempfile::tempdir().unwrap();
    let sink_addr = discarding_sink();
    let m = manifest(
        dir.path(),
        &format!(
            "[runtime]\nlink_rate = '20MB/s'\n\
             [[group]]\nname = 'tenants'\n\
             [[group]]\nname = 'tenant-a'\nparent = 'tenants'\nbandwidth_share = 3\n\
             [[task]]\nname = 'blaster'\nmodule = '{}'\nargs = ['blast', '{sink_addr}']\n\
             group = 'tenant-a'\nconnect = ['127.0.0.1:*']\n",
            guests::NET
        ),
    );
    let sys = Launch::new(&m).args(["--no-cache"]).start();
    // Wait until the samples show it sending (a readiness condition).
    let t = Instant::now();
    let groups = loop {
        let g: serde_json::Value =
            serde_json::from_str(&get_body(sys.control(), "/api/groups")).unwrap();
        if g["groups"][1]["net_tx_rate"].as_f64().unwrap_or(0.0) > 0.0 {
            break g;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "no rate: {g}");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(groups["link_rate"], 20_000_000);
    let (outer, inner) = (&groups["groups"][0], &groups["groups"][1]);
    assert_eq!(
        (outer["name"].as_str(), inner["name"].as_str()),
        (Some("tenants"), Some("tenant-a"))
    );
    assert_eq!(inner["members"][0]["name"], "blaster");
    assert_eq!(inner["bandwidth_share"], 3);
    assert_eq!(
        (outer["tasks"].as_u64(), outer["sockets"].as_u64()),
        (Some(1), Some(1)),
        "subtree totals"
    );
    let rate = inner["net_tx_rate"].as_f64().unwrap();
    assert!(rate < 22e6, "within the link: {rate}");

    let tasks: serde_json::Value =
        serde_json::from_str(&get_body(sys.control(), "/api/tasks")).unwrap();
    let b = &tasks[0];
    assert!(
        b["net_bytes_sent"].as_u64().unwrap() > 0 && b["sockets"] == 1 && b["connections"] == 1,
        "{b}"
    );
    assert_eq!(b["group"], "tenant-a");

    let metrics = get_body(sys.control(), "/metrics");
    let scrape =
        prometheus_parse::Scrape::parse(metrics.lines().map(|l| Ok(l.to_string()))).unwrap();
    let value = |metric: &str, key: &str, label: &str| {
        let s = scrape
            .samples
            .iter()
            .find(|s| s.metric == metric && s.labels.get(key) == Some(label))
            .unwrap_or_else(|| panic!("{metric}{{{key}={label}}} missing"));
        match s.value {
            prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Gauge(v) => v,
            _ => panic!("{metric}: not a number"),
        }
    };
    assert!(value("warden_task_net_sent_bytes_total", "task", "blaster") > 0.0);
    assert_eq!(value("warden_task_sockets", "task", "blaster"), 1.0);
    assert!(value("warden_group_net_sent_bytes_total", "group", "tenants") > 0.0);
    assert_eq!(value("warden_group_sockets", "group", "tenant-a"), 1.0);

    let ps = warden()
        .args(["ps", "--control", sys.control()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&ps.stdout);
    assert!(text.contains("TX/s") && text.contains("GROUP"), "{text}");
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with("tenant-a"))
        .expect("group row");
    assert!(row.ends_with("blaster"), "{row}");
}
