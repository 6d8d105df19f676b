//! How a run went, and the exit status that says so.
//!
//! A system from a manifest exits 0 when every task it started itself
//! exited 0 (its tasks' children are theirs to judge; a supervised task
//! is its supervisor's, and a supervisor that gives up makes it 1),
//! else 1. A single
//! program's exit status is the program's (its last run's, if it was
//! restarted: `--restart`), as with `wasmtime run`: its
//! exit code (1 if the code does not fit a status byte), 134 if it trapped
//! (128 + SIGABRT, as Wasmtime does), 137 if it was killed (128 + SIGKILL:
//! a limit, an operator, Ctrl-C).

use std::path::Path;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use warden::TaskReport;

#[derive(Default, Clone)]
pub struct Outcome(Arc<Mutex<State>>);

#[derive(Default)]
struct State {
    reports: Vec<TaskReport>,
    /// Whether a task the run started itself did not exit 0.
    failed: bool,
    /// The first such task's exit status.
    first: Option<u8>,
    /// How the first task the run started ended, in one line.
    first_line: Option<String>,
}

/// Which reports a run keeps until its end. A long-running system spawns
/// children without end, so their reports are kept only when asked for
/// (`--report`, `--verbose`).
#[derive(Clone, Copy, PartialEq)]
pub enum Keep {
    All,
    Roots,
    None,
}

/// What the end of a run prints on stderr.
#[derive(Clone, Copy, PartialEq)]
pub enum Shown {
    /// A line per kept report.
    Summaries,
    /// A line if the first task did not exit (trapped, killed).
    Failure,
}

impl Outcome {
    pub fn sink(&self, keep: Keep) -> warden::ReportSink {
        let outcome = self.0.clone();
        warden::ReportSink(Arc::new(move |r: &TaskReport| {
            // Per-request handlers are the servers' business, not the run's.
            let root = r.parent.is_none() && r.route.is_none();
            let mut o = outcome.lock().unwrap_or_else(|e| e.into_inner());
            if root {
                // A supervised task's end is its supervisor's to judge;
                // a supervisor that gives up fails the run (`fail`).
                // So is the end of a task a live upgrade replaced.
                o.failed |= !r.succeeded() && !r.supervised && !r.replaced;
                // A supervised program's status is its last run's.
                if o.first.is_none() || r.supervised {
                    o.first = Some(status_of(r));
                    o.first_line = r.exit_code.is_none().then(|| summary(r));
                }
            }
            if keep == Keep::All || (keep == Keep::Roots && root) {
                o.reports.push(r.clone());
            }
        }))
    }

    /// Marks the run failed: a top supervisor gave up.
    pub fn fail(&self) {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).failed = true;
    }

    /// Prints and writes what was asked for; the exit status is the single
    /// program's own if `single`, else 0 or 1.
    pub fn finish(
        self,
        report: Option<&Path>,
        shown: Shown,
        single: bool,
    ) -> Result<ExitCode, String> {
        let mut o = self.0.lock().unwrap_or_else(|e| e.into_inner());
        o.reports.sort_by_key(|r| r.id);
        match shown {
            Shown::Summaries => o.reports.iter().for_each(|r| say!("{}", summary(r))),
            Shown::Failure => o.first_line.iter().for_each(|l| say!("{l}")),
        }
        if let Some(path) = report {
            write_report(path, &o.reports)?;
        }
        Ok(ExitCode::from(match (single, o.failed) {
            (true, _) => o.first.unwrap_or(1),
            (false, true) => 1,
            (false, false) => 0,
        }))
    }
}

/// A single program's exit status (see the module docs).
fn status_of(r: &TaskReport) -> u8 {
    match (r.status, r.exit_code) {
        (_, Some(code)) => u8::try_from(code).unwrap_or(1),
        ("trapped", None) => 134,
        _ => 137,
    }
}

fn summary(r: &TaskReport) -> String {
    let how = match (r.status, r.exit_code, &r.reason) {
        ("exited", Some(c), _) => format!("exited {c}"),
        (s, _, Some(reason)) => format!("{s}: {reason}"),
        (s, _, _) => s.to_string(),
    };
    format!(
        "warden: task {} ({}) {how}; cpu {:.1} ms, peak memory {}",
        r.id,
        r.name,
        r.cpu_ms,
        warden::units::format_size(r.peak_memory_bytes)
    )
}

fn write_report(path: &Path, reports: &[TaskReport]) -> Result<(), String> {
    let json = serde_json::to_string_pretty(reports).map_err(|e| e.to_string())?;
    std::fs::write(path, json + "\n")
        .map_err(|e| format!("cannot write report {}: {e}", path.display()))
}
