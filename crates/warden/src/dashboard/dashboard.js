// The Warden dashboard: polls the control API every second.
"use strict";
let selected = null;      // task id whose charts and output are shown
let logFrom = 0;
const charts = {};        // name -> uPlot
const ENDED = ["exited", "trapped", "killed"];

// The control token (from `warden dashboard`: it arrives in the address's
// fragment, which is never sent to a server), kept for this tab only.
const fragment = new URLSearchParams(location.hash.slice(1));
if (fragment.get("token")) {
  sessionStorage.setItem("wardenToken", fragment.get("token"));
  history.replaceState(null, "", location.pathname);
}
const token = sessionStorage.getItem("wardenToken");

// Sent with every request: off loopback, reads need the token too.
const headers = token ? { Authorization: `Bearer ${token}` } : {};

async function post(path) {
  const r = await fetch(path, { method: "POST", headers });
  if (r.status === 401) alert("Killing tasks needs the control token: open the address `warden dashboard` prints.");
}

async function get(path) {
  const r = await fetch(path, { headers });
  return r.json();
}

// A byte count as `warden ps` writes it (units::format_size): binary
// units, one decimal ("512 B", "64.0 MiB", "1.5 GiB").
function size(b) {
  if (b == null) return "-";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = b, i = 0;
  while (v >= 1024 && i + 1 < units.length) { v /= 1024; i++; }
  return i == 0 ? `${b} B` : `${v.toFixed(1)} ${units[i]}`;
}

// A rate in bytes per second, short.
function rate(b) {
  if (b == null) return "-";
  if (b >= 1e6) return (b / 1e6).toFixed(1) + " MB";
  if (b >= 1e3) return (b / 1e3).toFixed(1) + " kB";
  return b.toFixed(0) + " B";
}

// The group tree: each group with its members and what its subtree uses.
function renderGroups(tree) {
  const body = document.querySelector("#groups tbody");
  body.textContent = "";
  document.getElementById("link").textContent =
    tree.link_rate ? `— link ${rate(tree.link_rate)}/s shared by weight` : "— link unlimited";
  const add = (parent, depth) => {
    for (const g of tree.groups.filter(g => (g.parent ?? null) === parent)) {
      const tr = document.createElement("tr");
      tr.className = "group";
      const members = g.members.map(m => m.name).join(", ") || "\u2014";
      const cells = ["\u00a0\u00a0".repeat(depth) + g.name, members, g.cpu_pct.toFixed(1),
        size(g.memory_bytes), g.sockets, rate(g.net_tx_rate), rate(g.net_rx_rate),
        g.bandwidth_share, g.bandwidth_limit ? rate(g.bandwidth_limit) + "/s" : "none"];
      for (const c of cells) { const td = document.createElement("td"); td.textContent = c; tr.appendChild(td); }
      body.appendChild(tr);
      add(g.name, depth + 1);
    }
  };
  add(null, 0);
}

// The web server's routes: requests, status codes, latency, handlers now.
function renderRoutes(routes) {
  const body = document.querySelector("#routes tbody");
  body.textContent = "";
  const ms = v => v == null ? "-" : v < 0 ? "> 10 s" : v.toString();
  for (const r of routes) {
    const tr = document.createElement("tr");
    tr.className = "route";
    const codes = Object.entries(r.codes).map(([c, n]) => `${c}: ${n}`).join(", ") || "\u2014";
    const cells = [r.name, r.path, r.server, r.kind, r.requests, codes, r.in_flight, r.queued,
      r.tasks, ms(r.p50_ms), ms(r.p99_ms)];
    for (const c of cells) { const td = document.createElement("td"); td.textContent = c; tr.appendChild(td); }
    body.appendChild(tr);
  }
}

// Rows of plain cells into the table `id`.
function renderRows(id, rows) {
  const body = document.querySelector(`#${id} tbody`);
  body.textContent = "";
  for (const cells of rows) {
    const tr = document.createElement("tr");
    for (const c of cells) { const td = document.createElement("td"); td.textContent = c; tr.appendChild(td); }
    body.appendChild(tr);
  }
}

// Block devices, and the file services tasks' directories are served by:
// their operations and bytes.
function renderStorage(devices, services) {
  renderRows("devices", devices.map(d => [d.name, size(d.sectors * 512), d.claimed ? "yes" : "no",
    d.reads, size(d.read_bytes), d.writes, size(d.written_bytes), d.syncs, d.errors]));
  renderRows("fileservices", services.map(f => [f.name, f.clients, f.ops, size(f.read_bytes),
    size(f.written_bytes), f.errors]));
}

function renderTasks(tasks) {
  const body = document.querySelector("#tasks tbody");
  body.textContent = "";
  const byParent = {};
  for (const t of tasks) (byParent[t.parent ?? "root"] ??= []).push(t);
  const add = (t, depth) => {
    const tr = document.createElement("tr");
    tr.className = "task" + (ENDED.includes(t.state) ? " ended" : "") + (t.id === selected ? " selected" : "");
    tr.dataset.id = t.id;
    // An ended task says how it ended, and its memory column its peak.
    const ended = ENDED.includes(t.state);
    const state = t.exit_code != null ? `${t.state} ${t.exit_code}`
      : t.reason ? `${t.state}: ${t.reason}` : t.state;
    // A supervised task says how often it was restarted, and why last.
    const restarts = t.restarts ? `${t.restarts}` : "";
    const memory = ended ? `peak ${size(t.peak_memory_bytes)}` : size(t.memory_bytes);
    // Objects mapped into its memory (charged to their creators).
    const mapped = t.mapped ? `${t.mapped} (${size(t.mapped_bytes)})` : "0";
    const cells = [t.id, "\u00a0\u00a0".repeat(depth) + t.name, state, t.cpu_pct.toFixed(1),
      t.cpu_ms.toFixed(1), memory, size(t.memory_limit_bytes),
      size(t.memory_guarantee_bytes), size(t.surplus_bytes), t.ipc_calls,
      t.sockets, mapped, rate(t.net_bytes_sent), rate(t.net_bytes_received),
      rate(t.net_tx_rate), rate(t.net_rx_rate), restarts];
    for (const c of cells) { const td = document.createElement("td"); td.textContent = c; tr.appendChild(td); }
    if (t.last_restart_reason) tr.lastChild.title = `last restarted after: ${t.last_restart_reason}`;
    // The WIT interfaces a typed server serves.
    const serves = document.createElement("td");
    serves.textContent = (t.serves ?? []).join(", ");
    tr.appendChild(serves);
    const td = document.createElement("td");
    if (!ENDED.includes(t.state)) {
      const b = document.createElement("button");
      b.textContent = "kill";
      b.className = "kill";
      b.onclick = async (e) => { e.stopPropagation(); await post(`/api/tasks/${t.id}/kill`); };
      td.appendChild(b);
    }
    tr.appendChild(td);
    tr.onclick = () => { selected = t.id; logFrom = 0; document.getElementById("logs").textContent = ""; tick(); };
    body.appendChild(tr);
    for (const c of byParent[t.id] ?? []) add(c, depth + 1);
  };
  for (const t of byParent.root ?? []) add(t, 0);
  const live = tasks.filter(t => !ENDED.includes(t.state)).length;
  document.getElementById("summary").textContent = `${live} live, ${tasks.length - live} ended`;
}

function renderBudget(tasks) {
  const byParent = {};
  for (const t of tasks) (byParent[t.parent ?? "root"] ??= []).push(t);
  const list = (parent) => {
    const kids = byParent[parent] ?? [];
    if (!kids.length) return null;
    const ul = document.createElement("ul");
    for (const t of kids) {
      const li = document.createElement("li");
      li.textContent = `${t.name}: memory ${size(t.memory_bytes)} of ${size(t.memory_limit_bytes)}` +
        ` (guaranteed ${size(t.memory_guarantee_bytes)}, surplus ${size(t.surplus_bytes)}), CPU ${t.cpu_ms.toFixed(0)} ms`;
      const sub = list(t.id);
      if (sub) li.appendChild(sub);
      ul.appendChild(li);
    }
    return ul;
  };
  const el = document.getElementById("budget");
  el.textContent = "";
  const tree = list("root");
  if (tree) el.appendChild(tree);
}

function chart(name, title, series) {
  if (!charts[name]) {
    const div = document.createElement("div");
    div.className = "chart";
    div.id = "chart-" + name;
    document.getElementById("charts").appendChild(div);
    charts[name] = new uPlot({
      title, width: 380, height: 180,
      scales: { x: { time: true } },
      series: [{}, { label: title, stroke: "#3366cc", width: 1.5 }],
    }, series, div);
  } else {
    charts[name].setData(series);
  }
}

function renderCharts(history) {
  const h = history[selected];
  if (!h) return;
  const t = h.map(s => s.t);
  chart("cpu", "CPU %", [t, h.map(s => s.cpu_pct)]);
  chart("memory", "memory MiB", [t, h.map(s => s.memory_bytes / 1048576)]);
  chart("ipc", "IPC calls/s", [t, h.map(s => s.ipc_rate)]);
  chart("net_tx", "sent MB/s", [t, h.map(s => s.net_tx_rate / 1e6)]);
  chart("net_rx", "received MB/s", [t, h.map(s => s.net_rx_rate / 1e6)]);
}

async function renderLogs() {
  const r = await get(`/api/tasks/${selected}/logs?from=${logFrom}`);
  if (r.data) {
    const el = document.getElementById("logs");
    el.textContent += r.data;
    el.scrollTop = el.scrollHeight;
  }
  if (r.next != null) logFrom = r.next;
}

// The machine's budget, the root of the budget tree, above the tasks.
function renderRoot(root) {
  const limit = root.limit_bytes == null ? "no limit" : size(root.limit_bytes);
  document.getElementById("root").textContent =
    `root memory budget: ${size(root.charged_bytes)} charged of ${limit}: ` +
    `${size(root.guaranteed_bytes)} guaranteed, ${size(root.surplus_bytes)} surplus` +
    ` (peak ${size(root.peak_bytes)}, ${root.refusals} refused)`;
}

async function tick() {
  try {
    const tasks = await get("/api/tasks");
    if (selected == null || !tasks.some(t => t.id === selected)) {
      // Start with the busiest live task.
      const live = tasks.filter(t => !ENDED.includes(t.state))
        .sort((a, b) => b.cpu_pct - a.cpu_pct)[0] ?? tasks[0];
      selected = live ? live.id : null;
    }
    renderTasks(tasks);
    renderRoot(await get("/api/memory"));
    renderBudget(tasks);
    renderGroups(await get("/api/groups"));
    renderRoutes(await get("/api/routes"));
    renderStorage(await get("/api/devices"), await get("/api/file-services"));
    if (selected != null) {
      const sel = tasks.find(t => t.id === selected);
      document.getElementById("selected").textContent = sel ? `— ${sel.name}` : "";
      document.getElementById("logname").textContent = sel ? `— ${sel.name}` : "";
      renderCharts(await get("/api/history"));
      await renderLogs();
    }
  } catch (e) {
    document.getElementById("summary").textContent = "(no connection to warden)";
  }
}

tick();
setInterval(tick, 1000);
