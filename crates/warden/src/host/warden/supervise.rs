//! A task's supervisors of its children (see `ipc::supervisor`):
//! `supervisor_create`, `supervisor_spawn`, `supervisor_wait`,
//! `supervisor_child`. A supervisor handle is also a `poll` handle: ready
//! (`WARDEN_POLL_IN`) when a member's run has ended or a restart is due,
//! that is when `supervisor_wait` has something to do.

use super::task::{read_recipe, spawn_run};
use crate::host::guest::{memory, range, ret32, GuestMem};
use crate::host::TaskData;
use crate::ipc::supervisor::{self, Recipe, Report, Step, Supervised, MAX_MEMBERS};
use crate::ipc::{Errno, Object};
use std::future::Future;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;
use warden_policy::supervise::{Intensity, Plan, Restart, Strategy};
use wasmtime::{Caller, Linker};

pub(super) fn add_to_linker(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    linker.func_wrap(
        super::MODULE,
        "supervisor_create",
        |mut c: Caller<'_, TaskData>, spec: i32| ret32(create(&mut c, spec)),
    )?;
    linker.func_wrap(
        super::MODULE,
        "supervisor_spawn",
        |mut c: Caller<'_, TaskData>,
         sup: i32,
         restart: i32,
         module: i32,
         argv: i32,
         argc: i32,
         budget: i32,
         grant: i32,
         ngrant: i32| {
            let args = (module, (argv, argc), budget, (grant, ngrant));
            ret32(spawn(&mut c, sup, restart, args))
        },
    )?;
    linker.func_wrap_async(
        super::MODULE,
        "supervisor_wait",
        |c: Caller<'_, TaskData>, (sup, timeout, event): (i32, i64, i32)| {
            Box::new(async move { ret32(wait(c, sup, timeout, event).await) })
        },
    )?;
    linker.func_wrap(
        super::MODULE,
        "supervisor_child",
        |mut c: Caller<'_, TaskData>, sup: i32, member: i32| ret32(child(&mut c, sup, member)),
    )?;
    Ok(())
}

/// The supervisor behind handle `h`.
pub(super) fn supervisor_of(data: &TaskData, h: i32) -> Result<Arc<Supervised>, Errno> {
    match data.ipc().handles.get(h)? {
        Object::Supervisor(s) => Ok(s.clone()),
        _ => Err(Errno::BadHandle),
    }
}

/// A new supervisor from the 24-byte spec at `ptr`: strategy (u32: 0
/// one for one, 1 one for all, 2 rest for one), max_restarts (u32),
/// within_ns (u64, > 0), backoff_ns (u64).
fn create(c: &mut Caller<'_, TaskData>, ptr: i32) -> Result<i32, Errno> {
    let (mem, data) = memory(c)?;
    let mut b = [0u8; 24];
    mem.read(range(mem.len(), ptr, 24)?, &mut b);
    let word = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    let half = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
    let strategy = match half(0) {
        0 => Strategy::OneForOne,
        1 => Strategy::OneForAll,
        2 => Strategy::RestForOne,
        _ => return Err(Errno::Inval),
    };
    if word(8) == 0 {
        return Err(Errno::Inval);
    }
    let plan = Plan {
        strategy,
        intensity: Intensity {
            max_restarts: half(4),
            within: Duration::from_nanos(word(8)),
        },
        backoff: Duration::from_nanos(word(16)),
        members: Vec::new(),
    };
    // Weak, as the task's own reference is: a handle table must not keep
    // its runtime alive.
    let spawner = Arc::downgrade(&data.ipc().spawner()?);
    let kill: supervisor::KillFn = Arc::new(move |id, why| {
        if let Some(s) = spawner.upgrade() {
            s.kill(id, why);
        }
    });
    let sup = Arc::new(Supervised::new(plan, kill));
    data.ipc_mut().handles.insert(Object::Supervisor(sup))
}

type SpawnArgs = (i32, (i32, i32), i32, (i32, i32));

/// The status a member that could not start again ends with, as a
/// trapped run's (`WARDEN_STATUS_TRAPPED`).
const STATUS_TRAPPED: i32 = -1;

/// Spawns a child as a new member of supervisor `h` with `restart` (0
/// permanent, 1 transient, 2 temporary); the member's index.
fn spawn(
    c: &mut Caller<'_, TaskData>,
    h: i32,
    restart: i32,
    args: SpawnArgs,
) -> Result<i32, Errno> {
    let sup = supervisor_of(c.data(), h)?;
    let restart = match restart {
        0 => Restart::Permanent,
        1 => Restart::Transient,
        2 => Restart::Temporary,
        _ => return Err(Errno::Inval),
    };
    if sup.lock().members.len() >= MAX_MEMBERS {
        return Err(Errno::Quota);
    }
    let (module, argv, budget, grant) = args;
    let recipe = read_recipe(c, module, argv, budget, grant)?;
    let run = spawn_run(c, &recipe, dup_all(&recipe)?)?;
    Ok(sup.add(recipe, restart, run) as i32)
}

/// Second references to a recipe's grants, for one run.
fn dup_all(recipe: &Recipe) -> Result<Vec<Object>, Errno> {
    recipe.grants.iter().map(Object::dup).collect()
}

/// A handle to member `member`'s current run (to kill, wait for, raise
/// or watch it); `PeerDied` if it has none now.
fn child(c: &mut Caller<'_, TaskData>, h: i32, member: i32) -> Result<i32, Errno> {
    let sup = supervisor_of(c.data(), h)?;
    let run = {
        let st = sup.lock();
        let m = st.members.get(member as u32 as usize).ok_or(Errno::Inval)?;
        m.run.clone().ok_or(Errno::PeerDied)?
    };
    c.data_mut().ipc_mut().handles.insert(Object::Task(run))
}

/// Waits (at most `timeout_ns`) for the supervisor's next event and
/// deals with it: a run's end judged by the policy, a restart made when
/// its backoff is over. Writes the 16-byte report (kind, member, status,
/// restarts) at `event`; `PeerDied` once the supervisor has given up.
async fn wait(
    mut c: Caller<'_, TaskData>,
    h: i32,
    timeout_ns: i64,
    event: i32,
) -> Result<i32, Errno> {
    let sup = supervisor_of(c.data(), h)?;
    range(memory(&mut c)?.0.len(), event, 16)?;
    let deadline = (timeout_ns >= 0)
        .then(|| tokio::time::Instant::now() + Duration::from_nanos(timeout_ns as u64));
    loop {
        if sup.lock().given_up {
            return Err(Errno::PeerDied);
        }
        let due = match sup.next_step() {
            Step::Report(r) => return put(&mut c, event, r),
            Step::Start(p) => match restart(&mut c, &sup, p) {
                Some(r) => return put(&mut c, event, r),
                None => continue,
            },
            Step::Wait(due) => due.map(tokio::time::Instant::from_std),
        };
        if deadline.is_some_and(|d| d <= tokio::time::Instant::now()) {
            return Err(Errno::Timeout);
        }
        let until = match (due, deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        run_ends(&sup, until).await;
    }
}

/// Starts the members of a restart come due: the report of the member
/// whose end called for it. A member that cannot start is judged as a
/// failed run (which may call for another restart: `None`, or give up).
fn restart(
    c: &mut Caller<'_, TaskData>,
    sup: &Supervised,
    p: supervisor::Pending,
) -> Option<Report> {
    for (k, &i) in p.start.iter().enumerate() {
        let run = copy_recipe(sup, i).and_then(|(r, grants)| spawn_run(c, &r, grants));
        let mut st = sup.lock();
        match run {
            Ok(run) => {
                st.members[i].run = Some(run);
                st.members[i].restarts += 1;
            }
            Err(_) => {
                // The members after it still start, after its judgement.
                sup.requeue(&mut st, p.start[k + 1..].to_vec(), (p.member, p.status));
                return sup.judge(&mut st, i, STATUS_TRAPPED);
            }
        }
    }
    let st = sup.lock();
    Some(Report {
        kind: supervisor::RESTARTED,
        member: p.member as i32,
        status: p.status,
        restarts: st.members[p.member].restarts,
    })
}

/// Member `i`'s recipe (its grants left out) and second references to
/// its grants, for one run.
fn copy_recipe(sup: &Supervised, i: usize) -> Result<(Recipe, Vec<Object>), Errno> {
    let st = sup.lock();
    let r = &st.members[i].recipe;
    let grants = dup_all(r)?;
    let copy = Recipe {
        module: r.module.clone(),
        args: r.args.clone(),
        budget: r.budget,
        grants: Vec::new(),
    };
    Ok((copy, grants))
}

/// Whether a wait would have something to do now.
pub(super) fn ready(sup: &Supervised) -> bool {
    let mut st = sup.lock();
    let due = st
        .pending
        .as_ref()
        .is_some_and(|p| p.at <= std::time::Instant::now())
        && Supervised::may_start(&mut st);
    let ended = (st.members.iter())
        .filter_map(|m| m.run.as_ref())
        .any(|r| r.family.exit().status.is_some());
    due || ended
}

/// Resolves when one of the supervisor's runs has ended, or at `until`.
pub(super) async fn run_ends(sup: &Supervised, until: Option<tokio::time::Instant>) {
    let runs = sup.runs();
    let mut sleep = until.map(|u| Box::pin(tokio::time::sleep_until(u)));
    std::future::poll_fn(|cx| {
        for t in &runs {
            let mut e = t.family.exit();
            if e.status.is_some() {
                return Poll::Ready(());
            }
            if !e.waiters.iter().any(|w| w.will_wake(cx.waker())) {
                e.waiters.push(cx.waker().clone());
            }
        }
        match sleep.as_mut().map(|s| s.as_mut().poll(cx)) {
            Some(Poll::Ready(())) => Poll::Ready(()),
            _ => Poll::Pending,
        }
    })
    .await
}

fn put(c: &mut Caller<'_, TaskData>, at: i32, r: Report) -> Result<i32, Errno> {
    let (mem, _): (GuestMem, _) = memory(c)?;
    let mut b = [0u8; 16];
    b[0..4].copy_from_slice(&r.kind.to_le_bytes());
    b[4..8].copy_from_slice(&r.member.to_le_bytes());
    b[8..12].copy_from_slice(&r.status.to_le_bytes());
    b[12..16].copy_from_slice(&r.restarts.to_le_bytes());
    mem.put(at, &b)?;
    Ok(0)
}
