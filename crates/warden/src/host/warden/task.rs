//! Nested tasks: look up a granted module, spawn a child with a budget
//! carved from one's own, kill, wait for, suspend and resume it; read the
//! handles one's parent granted; bind names for one's children.

use super::message::{close_moved, copy_objects};
use crate::host::guest::{len32, memory, range, read_u32, ret32, write_u32, GuestMem};
use crate::host::TaskData;
use crate::ipc::supervisor::Recipe;
use crate::ipc::{Errno, Object};
use crate::task::{ChildBudget, TaskShared};
use std::sync::Arc;
use std::task::Poll;
use wasmtime::{Caller, Linker};

/// Most arguments a child may be given, and longest argument.
const MAX_ARGS: u64 = 256;
const MAX_ARG_LEN: usize = 4096;

pub(super) fn add_to_linker(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    add_control(linker)?;
    add_events(linker)
}

/// `module_lookup`, `task_spawn`, `task_kill`, `task_suspend`,
/// `task_resume`.
fn add_control(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    linker.func_wrap(
        super::MODULE,
        "module_lookup",
        |mut c: Caller<'_, TaskData>, ptr: i32, len: i32| ret32(module_lookup(&mut c, ptr, len)),
    )?;
    linker.func_wrap(
        super::MODULE,
        "task_spawn",
        |mut c: Caller<'_, TaskData>,
         module: i32,
         argv: i32,
         argc: i32,
         budget: i32,
         grant: i32,
         ngrant: i32| { ret32(spawn(&mut c, module, argv, argc, budget, grant, ngrant)) },
    )?;
    linker.func_wrap(
        super::MODULE,
        "task_kill",
        |c: Caller<'_, TaskData>, h: i32| {
            control(&c, h, |s, id| s.kill(id, "killed by its parent"))
        },
    )?;
    linker.func_wrap(
        super::MODULE,
        "task_suspend",
        |c: Caller<'_, TaskData>, h: i32| control(&c, h, |s, id| s.suspend(id)),
    )?;
    linker.func_wrap(
        super::MODULE,
        "task_resume",
        |c: Caller<'_, TaskData>, h: i32| control(&c, h, |s, id| s.resume(id)),
    )?;
    Ok(())
}

/// `task_wait`, `task_event`, `task_raise`, `task_granted`,
/// `namespace_bind`.
fn add_events(linker: &mut Linker<TaskData>) -> wasmtime::Result<()> {
    linker.func_wrap_async(
        super::MODULE,
        "task_wait",
        |c: Caller<'_, TaskData>, (h, timeout, status): (i32, i64, i32)| {
            Box::new(async move { ret32(wait(c, h, timeout, status).await) })
        },
    )?;
    linker.func_wrap_async(
        super::MODULE,
        "task_event",
        |c: Caller<'_, TaskData>, (h, timeout, event): (i32, i64, i32)| {
            Box::new(async move { ret32(next_event(c, h, timeout, event).await) })
        },
    )?;
    linker.func_wrap(
        super::MODULE,
        "task_raise",
        |c: Caller<'_, TaskData>, h: i32, memory: i64, cpu: i64| {
            ret32(raise(&c, h, memory as u64, cpu as u64))
        },
    )?;
    linker.func_wrap(
        super::MODULE,
        "task_granted",
        |c: Caller<'_, TaskData>, index: i32| {
            let granted = &c.data().ipc().granted;
            ret32(
                granted
                    .get(index as u32 as usize)
                    .copied()
                    .ok_or(Errno::Inval),
            )
        },
    )?;
    linker.func_wrap(
        super::MODULE,
        "namespace_bind",
        |mut c: Caller<'_, TaskData>, ptr: i32, len: i32, portal: i32| {
            ret32(bind(&mut c, ptr, len, portal))
        },
    )?;
    Ok(())
}

fn module_lookup(c: &mut Caller<'_, TaskData>, ptr: i32, len: i32) -> Result<i32, Errno> {
    let (mem, data) = memory(c)?;
    let name = super::names::read_name(mem, ptr, len)?;
    let ipc = data.ipc_mut();
    let modules = ipc.spec.as_ref().map_or(&[][..], |s| &s.ipc.modules[..]);
    let found = modules.iter().find(|(n, _)| *n == name).cloned();
    let module = found.ok_or(Errno::Denied)?;
    ipc.handles.insert(Object::Module(Arc::new(module)))
}

/// The NUL-terminated string at `ptr`, at most `MAX_ARG_LEN` bytes.
fn read_str(mem: GuestMem, ptr: u32) -> Result<String, Errno> {
    let start = ptr as usize;
    if start >= mem.len() {
        return Err(Errno::BadPtr);
    }
    let n = (mem.len() - start).min(MAX_ARG_LEN + 1);
    let tail = mem.read_vec(start..start + n);
    let end = tail.iter().position(|&b| b == 0).ok_or(Errno::Inval)?;
    String::from_utf8(tail[..end].to_vec()).map_err(|_| Errno::Inval)
}

fn spawn(
    c: &mut Caller<'_, TaskData>,
    module: i32,
    argv: i32,
    argc: i32,
    budget: i32,
    grant: i32,
    ngrant: i32,
) -> Result<i32, Errno> {
    let mut recipe = read_recipe(c, module, (argv, argc), budget, (grant, ngrant))?;
    if c.data().ipc().handles.room() == 0 {
        return Err(Errno::Quota);
    }
    let spawner = c.data().ipc().spawner()?;
    let grants = std::mem::take(&mut recipe.grants);
    let task = spawn_run(c, &recipe, grants)?;
    let (mem, data) = memory(c)?;
    let ipc = data.ipc_mut();
    close_moved(&mut ipc.handles, mem, grant, len32(ngrant));
    let id = task.id;
    ipc.handles.insert(Object::Task(task)).inspect_err(|_| {
        // No handle to it: the parent could never wait for or kill it.
        spawner.kill(id, "its parent could not hold its handle");
    })
}

/// A spawn's arguments read from the caller's memory: nothing in its
/// handle table changes (the grants are duplicates).
pub(super) fn read_recipe(
    c: &mut Caller<'_, TaskData>,
    module: i32,
    (argv, argc): (i32, i32),
    budget: i32,
    (grant, ngrant): (i32, i32),
) -> Result<Recipe, Errno> {
    let (mem, data) = memory(c)?;
    let ipc = data.ipc_mut();
    let module = match ipc.handles.get(module)? {
        Object::Module(m) => m.clone(),
        _ => return Err(Errno::BadHandle),
    };
    let argc = len32(argc);
    if argc > MAX_ARGS {
        return Err(Errno::Inval);
    }
    range(mem.len(), argv, argc * 4)?;
    let args = (0..argc)
        .map(|i| read_str(mem, read_u32(mem, argv.wrapping_add(i as i32 * 4))?))
        .collect::<Result<Vec<_>, _>>()?;
    let mut b = [0u8; 20];
    mem.read(range(mem.len(), budget, 20)?, &mut b);
    let word = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap());
    let budget = ChildBudget {
        memory_limit: word(0),
        cpu_limit_ns: word(8),
        cpu_share: u32::from_le_bytes(b[16..20].try_into().unwrap()),
    };
    let ngrant = len32(ngrant);
    if ngrant > ipc.grants.max_message_handles {
        return Err(Errno::Quota);
    }
    let mut grants = Vec::new();
    copy_objects(&ipc.handles, mem, grant, ngrant, &mut grants)?;
    Ok(Recipe {
        module,
        args,
        budget,
        grants,
    })
}

/// Spawns a run of `recipe` as the caller's child, granted `grants`.
pub(super) fn spawn_run(
    c: &mut Caller<'_, TaskData>,
    recipe: &Recipe,
    grants: Vec<Object>,
) -> Result<Arc<TaskShared>, Errno> {
    let data = c.data_mut();
    let spawner = data.ipc().spawner()?;
    let (ipc, core) = data.warden_parts();
    let parent = super::Parent {
        shared: &core.shared,
        spec: ipc.spec.as_deref(),
        names: ipc.child_names.snapshot(),
        sinks: &core.sinks,
        net: core.net.for_child(),
    };
    let (module, args) = (&recipe.module, recipe.args.clone());
    spawner.spawn_child(parent, module, args, recipe.budget, grants)
}

/// Kills, suspends or resumes the child behind handle `h`: 0, or
/// `PeerDied` once it has ended.
fn control(
    c: &Caller<'_, TaskData>,
    h: i32,
    act: impl FnOnce(&dyn crate::host::Spawner, crate::task::TaskId) -> bool,
) -> i32 {
    ret32(child(c, h).and_then(|(t, s)| act(&*s, t.id).then_some(0).ok_or(Errno::PeerDied)))
}

type ChildRef = (Arc<TaskShared>, Arc<dyn crate::host::Spawner>);

fn child(c: &Caller<'_, TaskData>, h: i32) -> Result<ChildRef, Errno> {
    let ipc = &c.data().ipc();
    match ipc.handles.get(h)? {
        Object::Task(t) => Ok((t.clone(), ipc.spawner()?)),
        _ => Err(Errno::BadHandle),
    }
}

async fn wait(
    mut c: Caller<'_, TaskData>,
    h: i32,
    timeout_ns: i64,
    status: i32,
) -> Result<i32, Errno> {
    let (task, _) = child(&c, h)?;
    {
        let (mem, _) = memory(&mut c)?;
        range(mem.len(), status, 4)?;
    }
    let code = crate::host::wait::wait_for(timeout_ns, |cx| {
        let mut e = task.family.exit();
        if let Some(code) = e.status {
            return Poll::Ready(code);
        }
        if !e.waiters.iter().any(|w| w.will_wake(cx.waker())) {
            e.waiters.push(cx.waker().clone());
        }
        Poll::Pending
    })
    .await;
    let code = code.ok_or(Errno::Timeout)?;
    let (mem, _) = memory(&mut c)?;
    write_u32(mem, status, code as u32)?;
    Ok(0)
}

fn bind(c: &mut Caller<'_, TaskData>, ptr: i32, len: i32, portal: i32) -> Result<i32, Errno> {
    let (mem, data) = memory(c)?;
    let name = super::names::read_name(mem, ptr, len)?;
    let ipc = data.ipc_mut();
    let target = if portal < 0 {
        None
    } else {
        match ipc.handles.get(portal)? {
            Object::Portal(p) => Some(p.clone()),
            _ => return Err(Errno::BadHandle),
        }
    };
    ipc.child_names.bind(name, target)?;
    Ok(0)
}

/// Waits for the child's next limit event; `PeerDied` once it has ended
/// with none pending.
async fn next_event(
    mut c: Caller<'_, TaskData>,
    h: i32,
    timeout_ns: i64,
    event: i32,
) -> Result<i32, Errno> {
    let (task, _) = child(&c, h)?;
    {
        let (mem, _) = memory(&mut c)?;
        range(mem.len(), event, 16)?;
    }
    let got = crate::host::wait::wait_for(timeout_ns, |cx| {
        let mut ev = task.family.events();
        if let Some(e) = ev.queue.pop_front() {
            return Poll::Ready(Ok(e));
        }
        if task.family.ended() {
            return Poll::Ready(Err(Errno::PeerDied));
        }
        if !ev.waiters.iter().any(|w| w.will_wake(cx.waker())) {
            ev.waiters.push(cx.waker().clone());
        }
        Poll::Pending
    })
    .await
    .unwrap_or(Err(Errno::Timeout))?;
    let (mem, _) = memory(&mut c)?;
    let mut record = [0u8; 16];
    record[..4].copy_from_slice(&got.0.to_le_bytes());
    record[8..].copy_from_slice(&got.1.to_le_bytes());
    mem.put(event, &record)?;
    Ok(0)
}

/// Raises a child's memory limit (the increase carved from the caller's
/// budget) and CPU limit (resuming it if it was stopped at the old one).
/// 0 leaves a limit as it is; lowering is refused.
fn raise(
    c: &Caller<'_, TaskData>,
    h: i32,
    memory_limit: u64,
    cpu_limit_ns: u64,
) -> Result<i32, Errno> {
    let (task, spawner) = child(c, h)?;
    let parent = &c.data().shared;
    let old_mem = task.memory.limit();
    let old_cpu = task.cpu.limit_ns();
    if (memory_limit != 0 && memory_limit < old_mem)
        || (cpu_limit_ns != 0 && (old_cpu == 0 || cpu_limit_ns < old_cpu))
    {
        return Err(Errno::Inval);
    }
    if memory_limit > old_mem {
        let delta = memory_limit - old_mem;
        if !parent.carve(delta) {
            return Err(Errno::NoMem);
        }
        task.family
            .carved_memory
            .fetch_add(delta, std::sync::atomic::Ordering::AcqRel);
        task.memory.set_limit(memory_limit);
    }
    if cpu_limit_ns > old_cpu {
        task.cpu.set_limit_ns(cpu_limit_ns);
        let was_stopped = std::mem::take(&mut task.family.events().cpu_pending);
        if was_stopped {
            spawner.resume(task.id);
        }
    }
    Ok(0)
}
