//! Every `warden` host function called with a wild pointer or a huge
//! length and with a forged handle: each returns an error code; none
//! traps, none touches memory outside the caller's.
//!
//! Two guests do it: `hostile.c`'s hand-written list (calls a C program
//! makes, through the SDK's declarations), and a module generated here
//! from [`warden::HOST_FUNCTIONS`], so a new host function is attacked
//! the day it is added.

use super::*;

/// A wild pointer, a huge length and a forged handle at once.
const WILD: i32 = -16;

#[test]
fn wild_pointers_and_forged_handles_everywhere() {
    let wild = task("wild", guests::HOSTILE, &["wild"], "memory_limit = '4MiB'");
    let run = attack("", &wild);
    run.exited_saying("wild", "refused");
    let out = run.out("wild");
    let line = out.lines().last().unwrap();
    let (calls, refused) = line
        .strip_prefix("wild: ")
        .and_then(|l| l.split_once(" calls, "))
        .unwrap();
    assert_eq!(refused, format!("{calls} refused"), "{out}");
}

/// One call of the generated guest: which function, with what.
struct Call {
    function: &'static str,
    result: &'static str,
    args: Vec<String>,
}

/// The calls: every function with every argument wild (`i32` -16, `i64`
/// -1: a wild pointer, a huge length, a forged handle, an endless
/// timeout); and every function of two or more arguments whose first is
/// an `i32` again with a real handle there (the task's own service, then
/// a portal to it), so the checks behind the handle's are reached too.
fn calls() -> Vec<Call> {
    let mut calls = Vec::new();
    for &(function, params, result) in warden::HOST_FUNCTIONS {
        let params: Vec<&str> = params.split_whitespace().collect();
        if params.is_empty() {
            continue; // nothing to forge
        }
        let wild = |t: &&str| match *t {
            "i32" => format!("(i32.const {WILD})"),
            _ => "(i64.const -1)".to_string(),
        };
        let all_wild: Vec<String> = params.iter().map(wild).collect();
        calls.push(Call {
            function,
            result,
            args: all_wild.clone(),
        });
        if params.len() >= 2 && params[0] == "i32" {
            for real in ["(global.get $service)", "(global.get $portal)"] {
                let mut args = all_wild.clone();
                args[0] = real.to_string();
                calls.push(Call {
                    function,
                    result,
                    args,
                });
            }
        }
    }
    calls
}

/// The guest: it makes each call in turn and exits with the number of
/// the first that did not answer an error code (1-based), or 0.
fn guest(calls: &[Call]) -> String {
    let mut wat = String::from("(module\n");
    for &(name, params, result) in warden::HOST_FUNCTIONS {
        let params = if params.is_empty() {
            String::new()
        } else {
            format!("(param {params})")
        };
        wat += &format!(
            "  (import \"warden\" \"{name}\" (func ${name} {params} (result {result})))\n"
        );
    }
    wat += "  (import \"wasi_snapshot_preview1\" \"proc_exit\" (func $exit (param i32)))\n\
            (memory (export \"memory\") 1)\n\
            (global $service (mut i32) (i32.const 0))\n\
            (global $portal (mut i32) (i32.const 0))\n\
            (func (export \"_start\")\n\
              (global.set $service (call $service_create))\n\
              (global.set $portal (call $portal_create (global.get $service)))\n";
    for (i, c) in calls.iter().enumerate() {
        let mut call = format!("(call ${} {})", c.function, c.args.join(" "));
        if c.result == "i32" {
            call = format!("(i64.extend_i32_s {call})");
        }
        wat += &format!(
            "    (if (i64.ge_s {call} (i64.const 0)) (then (call $exit (i32.const {}))))\n",
            i + 1
        );
    }
    wat + "    (call $exit (i32.const 0))))\n"
}

#[test]
fn every_host_function_refuses_wild_arguments() {
    let calls = calls();
    assert!(calls.len() > warden::HOST_FUNCTIONS.len());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wild.wat");
    std::fs::write(&path, guest(&calls)).unwrap();
    let wild = task(
        "generated",
        path.to_str().unwrap(),
        &[],
        "memory_limit = '4MiB'",
    );
    let run = attack("", &wild);
    let r = run.report("generated");
    let code = r["exit_code"].as_u64().unwrap_or(u64::MAX);
    let culprit = calls
        .get((code as usize).wrapping_sub(1))
        .map(|c| format!("{}({})", c.function, c.args.join(", ")));
    assert_eq!(
        (&r["status"], code),
        (&"exited".into(), 0),
        "{r}: a call answered without an error: {culprit:?}"
    );
}
