//! Where a single program's own arguments start on `warden run`'s
//! command line.
//!
//! Warden's flags may come before or after the module. After it, the
//! first word that is not one of `warden run`'s flags — a plain word, or
//! a flag Warden does not have (`--verbose-output` for the program) —
//! starts the program's arguments, and so does `--`. Clap alone would
//! call an unknown flag after the module an error, so the command line
//! is rewritten first: a `--` goes in front of the first word the
//! program owns.

use clap::CommandFactory;
use std::ffi::OsString;

/// `words` (the whole command line), with `--` in front of a single
/// program's first argument when that argument looks like a flag.
pub fn program_words(mut words: Vec<OsString>) -> Vec<OsString> {
    if words.get(1).and_then(|w| w.to_str()) != Some("run") {
        return words;
    }
    let cli = crate::cli::Cli::command();
    let Some(run) = cli.find_subcommand("run") else {
        return words;
    };
    if let Some(at) = programs_first_flag(run, &words[2..]) {
        let flag = words[2 + at].to_string_lossy().into_owned();
        let next = words.get(3 + at).and_then(|w| w.to_str());
        if let Some(near) = near_miss(run, &flag) {
            say!(
                "warden: {flag} comes after the module, so it goes to the program \
                 (Warden's flag is --{near}; put it before the module to be sure)"
            );
        } else if let Some(habit) = wasmtime_habit(&flag, next) {
            say!("warden: {flag} comes after the module, so it goes to the program ({habit})");
        }
        words.insert(2 + at, "--".into());
    }
    words
}

/// The index in `words` (those after `run`) of the first word, after the
/// target, that is a flag `run` does not know; `None` if the program's
/// arguments start with a plain word, with `--`, or not at all.
fn programs_first_flag(run: &clap::Command, words: &[OsString]) -> Option<usize> {
    let mut target = false;
    let mut i = 0;
    while i < words.len() {
        let Some(w) = words[i].to_str() else {
            // Not UTF-8: a path or a program's argument, never a flag.
            if target {
                return None;
            }
            target = true;
            i += 1;
            continue;
        };
        if w == "--" {
            return None;
        }
        match flag_takes_value(run, w) {
            Some(takes) => i += if takes { 2 } else { 1 },
            None if w.starts_with('-') && w.len() > 1 => {
                // Unknown: the program's once the target is seen, else
                // clap's error to report.
                return target.then_some(i);
            }
            None if target => return None,
            None => {
                target = true;
                i += 1;
            }
        }
    }
    None
}

/// For a flag `run` knows: whether the next word is its value. `None`
/// for anything else.
fn flag_takes_value(run: &clap::Command, word: &str) -> Option<bool> {
    let (arg, inline) = if let Some(long) = word.strip_prefix("--") {
        let (name, value) = long
            .split_once('=')
            .map_or((long, None), |(n, v)| (n, Some(v)));
        (
            run.get_arguments().find(|a| a.get_long() == Some(name)),
            value.is_some(),
        )
    } else if let Some(short) = word.strip_prefix('-') {
        let mut chars = short.chars();
        let c = chars.next()?;
        let rest = chars.as_str();
        (
            run.get_arguments().find(|a| a.get_short() == Some(c)),
            !rest.is_empty(),
        )
    } else {
        return None;
    };
    let arg = arg?;
    Some(arg.get_action().takes_values() && !inline)
}

/// The `run` flag an unknown `flag` is probably a misspelling of (at
/// most two edits away).
fn near_miss(run: &clap::Command, flag: &str) -> Option<String> {
    let name = flag.trim_start_matches('-');
    let name = name.split_once('=').map_or(name, |(n, _)| n);
    if name.len() < 4 {
        return None;
    }
    run.get_arguments()
        .filter_map(|a| a.get_long())
        .find(|long| warden_policy::spelling::distance(name, long) <= 2)
        .map(str::to_string)
}

/// Warden's way to do what a `wasmtime run` flag does, for a user's
/// habit: `flag` as written (`-W`, `--mapdir=a::b`) and the word after it.
pub fn wasmtime_habit(flag: &str, next: Option<&str>) -> Option<String> {
    let (name, inline) = match flag.strip_prefix("--") {
        Some(_) => flag
            .split_once('=')
            .map_or((flag, None), |(n, v)| (n, Some(v))),
        // -Wmax-memory-size=…: the option follows the letter.
        None if flag.len() > 2 && flag.is_char_boundary(2) => (&flag[..2], Some(&flag[2..])),
        None => (flag, None),
    };
    let value = inline.or(next).unwrap_or("");
    let option = value.split(['=', ',']).next().unwrap_or("");
    let ours = match (name, option) {
        ("-W" | "--wasm", "max-memory-size") => "`--memory-limit SIZE` (e.g. 64MiB)",
        ("-W" | "--wasm", "fuel" | "timeout") | ("--fuel", _) => {
            "`--cpu-limit DURATION` (CPU time, e.g. 2s)"
        }
        ("-S" | "--wasi", "tcplisten") => "`--listen ADDR`",
        (
            "-S" | "--wasi",
            "inherit-network" | "network" | "tcp" | "udp" | "allow-ip-name-lookup",
        ) => "`--allow-connect GRANT` and `--allow-listen GRANT` (e.g. 127.0.0.1:*)",
        ("-S" | "--wasi", "inherit-env") => "`--env NAME` for each variable to pass on",
        ("--mapdir", _) => "`--dir HOST::GUEST`",
        ("-W" | "--wasm" | "-S" | "--wasi", _) => {
            "not needed: Warden sets WebAssembly features and WASI itself"
        }
        ("-C" | "--codegen", "cache") => {
            "not needed: compiled code is cached by default (`warden compile` fills the cache)"
        }
        _ => return None,
    };
    let what = match option.is_empty() || name == "--mapdir" || name == "--fuel" {
        true => name.to_string(),
        false => format!("{name} {option}"),
    };
    Some(format!(
        "wasmtime's `{what}` is {ours} in Warden; see doc/running.md"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(line: &str) -> String {
        let words = line.split(' ').map(OsString::from).collect();
        let out: Vec<String> = program_words(words)
            .into_iter()
            .map(|w| w.into_string().unwrap())
            .collect();
        out.join(" ")
    }

    #[test]
    fn unknown_flags_after_the_module_are_the_programs() {
        assert_eq!(
            split("warden run p.wasm --foo"),
            "warden run p.wasm -- --foo"
        );
        assert_eq!(
            split("warden run --memory-limit 4MiB p.wasm --dir . --foo x"),
            "warden run --memory-limit 4MiB p.wasm --dir . -- --foo x"
        );
        assert_eq!(split("warden run p.wasm -x"), "warden run p.wasm -- -x");
        assert_eq!(
            split("warden run p.wasm --for=1s -v --x"),
            "warden run p.wasm --for=1s -v -- --x"
        );
    }

    #[test]
    fn everything_else_is_left_to_clap() {
        for line in [
            "warden run --foo p.wasm",
            "warden run p.wasm a --foo",
            "warden run p.wasm -- --foo",
            "warden run p.wasm --memory-limit --foo",
            "warden ps --foo",
            "warden run system.toml",
        ] {
            assert_eq!(split(line), line);
        }
    }

    #[test]
    fn wasmtime_habits_are_translated() {
        let habit = |f: &str, n: Option<&str>| wasmtime_habit(f, n).unwrap_or_default();
        assert!(habit("-W", Some("max-memory-size=100")).contains("--memory-limit"));
        assert!(habit("-Wmax-memory-size=100", None).contains("--memory-limit"));
        assert!(habit("--wasm=fuel=100", None).contains("--cpu-limit"));
        assert!(habit("-S", Some("inherit-network")).contains("--allow-connect"));
        assert!(habit("-S", Some("tcplisten=127.0.0.1:80")).contains("--listen ADDR"));
        assert!(habit("--mapdir", Some("a::b")).contains("--dir HOST::GUEST"));
        assert!(habit("--mapdir=a::b", None).contains("--dir HOST::GUEST"));
        assert_eq!(wasmtime_habit("--memory-limit", Some("1")), None);
        assert_eq!(wasmtime_habit("-x", None), None);
    }

    #[test]
    fn misspellings_are_found() {
        let cli = crate::cli::Cli::command();
        let run = cli.find_subcommand("run").unwrap();
        assert_eq!(
            near_miss(run, "--memry-limit").as_deref(),
            Some("memory-limit")
        );
        assert_eq!(near_miss(run, "--verbose-output"), None);
    }
}
