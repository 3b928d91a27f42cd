//! `sage completions SHELL` and `sage man`: shell completion scripts and the man page,
//! generated from the same clap definition the binary parses with, so they never drift.

use clap::CommandFactory as _;
use std::io::Write as _;
use std::path::PathBuf;

#[derive(clap::Args, Debug)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(clap::Args, Debug)]
pub struct ManArgs {
    /// Write the page (roff) to this file instead of standard output.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
}

pub fn completions(a: CompletionsArgs) -> anyhow::Result<super::ExitStatus> {
    let mut cmd = super::examples::with_examples(super::Cli::command());
    let mut out = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "sage", &mut out);
    std::io::stdout().write_all(&out)?;
    Ok(super::EXIT_OK)
}

pub fn man(a: ManArgs) -> anyhow::Result<super::ExitStatus> {
    let mut out = Vec::new();
    clap_mangen::Man::new(super::examples::with_examples(super::Cli::command()))
        .render(&mut out)?;
    match &a.output {
        Some(p) => sage_pipeline::sink::write_atomic(p, &out)?,
        None => std::io::stdout().write_all(&out)?,
    }
    Ok(super::EXIT_OK)
}
