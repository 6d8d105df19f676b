//! Shell completions and man pages, generated from the command-line
//! definition in `cli` (so they cannot fall behind it; a test checks that
//! the committed pages in `doc/man` are what this writes).

use crate::cli::Cli;
use clap::CommandFactory;
use std::path::Path;

pub fn completions(shell: &str) -> Result<(), String> {
    use clap_complete::Shell;
    let shell = match shell {
        "bash" => Shell::Bash,
        "zsh" => Shell::Zsh,
        "fish" => Shell::Fish,
        other => return Err(format!("no completions for {other:?}")),
    };
    clap_complete::generate(shell, &mut Cli::command(), "warden", &mut std::io::stdout());
    Ok(())
}

/// Writes `warden.1` and a `warden-COMMAND.1` per command into `dir`.
pub fn man(dir: &Path) -> Result<(), String> {
    let fail = |e: std::io::Error| format!("{}: {e}", dir.display());
    std::fs::create_dir_all(dir).map_err(fail)?;
    // The pages name the version without the commit, so that they only
    // change when the command line does.
    let mut cmd = Cli::command()
        .disable_help_subcommand(true)
        .version(env!("CARGO_PKG_VERSION"));
    cmd.build();
    for sub in cmd.get_subcommands() {
        page(sub.clone(), dir).map_err(fail)?;
    }
    page(cmd, dir).map_err(fail)
}

fn page(cmd: clap::Command, dir: &Path) -> std::io::Result<()> {
    let name = cmd.get_display_name().unwrap_or(cmd.get_name()).to_string();
    let mut roff = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut roff)?;
    std::fs::write(dir.join(format!("{name}.1")), roff)
}
