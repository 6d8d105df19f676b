//! Peers that die mid-call in every way — exit, trap, kill at a CPU limit
//! while serving on the caller's CPU — leave their callers with `peer
//! died`, never a hang.

use super::*;

fn echo(name: &str, args: &[&str], extra: &str) -> String {
    task(
        name,
        guests::ECHO,
        args,
        &format!("memory_limit = '4MiB'\n{extra}"),
    )
}

#[test]
fn a_server_that_traps_mid_call() {
    let tasks = echo("server", &["server", "svc"], "provides = ['svc']")
        + &echo("client", &["client", "svc", "1", "crash"], "uses = ['svc']");
    let run = attack("", &tasks);
    assert_eq!(run.report("server")["status"], "trapped");
    assert!(
        run.out("client").contains("client: call: peer died"),
        "{}",
        run.out("client")
    );
}

#[test]
fn a_server_that_exits_after_a_reply() {
    let tasks = echo("server", &["server", "svc"], "provides = ['svc']")
        + &echo("client", &["client", "svc", "2", "bye"], "uses = ['svc']");
    let run = attack("", &tasks);
    run.exited_saying("server", "server: bye");
    let out = run.out("client");
    assert!(
        out.contains("client: call: peer died") || out.contains("bad handle"),
        "{out}"
    );
}

#[test]
fn a_server_killed_at_its_cpu_limit_mid_call() {
    let tasks = task(
        "server",
        guests::STUCK,
        &["server"],
        "memory_limit = '4MiB'\ncpu_limit = '300ms'\nprovides = ['stuck']",
    ) + &task(
        "client",
        guests::STUCK,
        &["client"],
        "memory_limit = '4MiB'\nuses = ['stuck']",
    );
    let run = attack("", &tasks);
    assert_eq!(run.report("server")["status"], "killed");
    let r = run.report("client");
    assert_eq!(
        (&r["status"], &r["exit_code"]),
        (&"exited".into(), &0.into()),
        "{r}"
    );
}
