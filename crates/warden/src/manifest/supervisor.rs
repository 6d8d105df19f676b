//! `[[supervisor]]` entries: supervisors of the system's tasks, checked.
//!
//! ```toml
//! [[supervisor]]
//! name = "storage"
//! strategy = "one_for_one"   # or "one_for_all", "rest_for_one" (member order)
//! max_restarts = 5           # intensity: at most 5 restarts ...
//! within = "10s"             # ... in any 10 s window, else it gives up
//! backoff = "50ms"           # first delay, doubling per restart in the window
//! cpu_limit = "1s"           # CPU its restarts may cost, else it gives up
//! members = ["fs", "nfs"]    # tasks and supervisors, in order
//! ```
//!
//! A task's own `restart` key ("permanent", "transient", "temporary")
//! says whether its end calls for a restart; a task with one other than
//! temporary that no supervisor names is supervised one-for-one by the
//! system's root supervisor (5 restarts in 10 s).

use super::*;
use crate::task::{Intensity, Strategy, SupervisorSpec};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSupervisor {
    name: String,
    strategy: Option<String>,
    max_restarts: Option<u32>,
    within: Option<String>,
    backoff: Option<String>,
    cpu_limit: Option<String>,
    members: Vec<String>,
}

/// The supervisors of `raw`, each checked against the tasks and the
/// others; each bad one is a problem.
pub(super) fn supervisors(
    raw: Vec<RawSupervisor>,
    tasks: &[TaskSpec],
    problems: &mut Vec<String>,
) -> Vec<SupervisorSpec> {
    let names: Vec<&str> = raw.iter().map(|s| s.name.as_str()).collect();
    let mut out = Vec::new();
    let mut claimed: BTreeMap<String, String> = BTreeMap::new();
    for (i, s) in raw.iter().enumerate() {
        let at = format!("supervisor[{i}] ({:?})", s.name);
        let unique = names.iter().filter(|n| **n == s.name).count() == 1
            && !tasks.iter().any(|t| t.name == s.name);
        if s.name.is_empty() || !unique {
            problems.push(format!(
                "{at}: name: must be non-empty and unlike every other supervisor's and task's"
            ));
            continue;
        }
        match supervisor(s, tasks, &names, &mut claimed) {
            Ok(spec) => out.push(spec),
            Err(e) => problems.push(format!("{at}: {e}")),
        }
    }
    if let Some(cycle) = cycle(&out) {
        problems.push(format!(
            "supervisor {cycle:?}: is its own member, through the supervisors it names"
        ));
        out.clear();
    }
    out
}

/// One entry, checked; `claimed` maps each member named so far to its
/// supervisor (a member has at most one).
fn supervisor(
    s: &RawSupervisor,
    tasks: &[TaskSpec],
    supervisors: &[&str],
    claimed: &mut BTreeMap<String, String>,
) -> Result<SupervisorSpec, String> {
    let mut spec = SupervisorSpec::new(s.name.clone(), s.members.clone());
    if let Some(text) = &s.strategy {
        spec.strategy = Strategy::parse(text).ok_or_else(|| {
            format!("strategy: {text:?} is not one of \"one_for_one\", \"one_for_all\", \"rest_for_one\"")
        })?;
    }
    let within = s.within.as_deref().map(parse_limit_duration).transpose();
    spec.intensity = Intensity {
        max_restarts: s.max_restarts.unwrap_or(spec.intensity.max_restarts),
        within: within
            .map_err(|e| format!("within: {e}"))?
            .unwrap_or(spec.intensity.within),
    };
    if let Some(b) = &s.backoff {
        spec.backoff = parse_duration_or_zero(b).map_err(|e| format!("backoff: {e}"))?;
    }
    let cpu_limit = s.cpu_limit.as_deref().map(parse_limit_duration).transpose();
    spec.cpu_limit = cpu_limit.map_err(|e| format!("cpu_limit: {e}"))?;
    if s.members.is_empty() {
        return Err("members: a supervisor needs at least one member".into());
    }
    for m in &s.members {
        let known = tasks.iter().any(|t| &t.name == m) || supervisors.contains(&m.as_str());
        if !known {
            return Err(format!(
                "members: no [[task]] or [[supervisor]] named {m:?}"
            ));
        }
        if m == &s.name {
            return Err(format!("members: {m:?} is the supervisor itself"));
        }
        if let Some(other) = claimed.insert(m.clone(), s.name.clone()) {
            return Err(format!(
                "members: {m:?} is already a member of supervisor {other:?} (a member has one supervisor)"
            ));
        }
    }
    Ok(spec)
}

/// A duration such as "50ms", or "0s" for none.
fn parse_duration_or_zero(text: &str) -> Result<Duration, String> {
    match text.trim() {
        "0" | "0s" | "0ms" => Ok(Duration::ZERO),
        t => parse_limit_duration(t),
    }
}

/// A supervisor that is its own member through others, if any.
fn cycle(specs: &[SupervisorSpec]) -> Option<String> {
    let parent_of = |name: &str| {
        specs
            .iter()
            .find(|s| s.members.iter().any(|m| m == name))
            .map(|s| s.name.as_str())
    };
    for s in specs {
        let mut at = s.name.as_str();
        for _ in 0..=specs.len() {
            match parent_of(at) {
                Some(p) if p == s.name => return Some(s.name.clone()),
                Some(p) => at = p,
                None => break,
            }
        }
    }
    None
}

/// A task's `restart` key.
pub(super) fn restart(text: Option<&str>) -> Result<crate::task::Restart, String> {
    match text {
        None => Ok(crate::task::Restart::Temporary),
        Some(t) => crate::task::Restart::parse(t).ok_or_else(|| {
            format!("restart: {t:?} is not one of \"permanent\", \"transient\", \"temporary\"")
        }),
    }
}
