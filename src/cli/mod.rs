//! Subcommands. Each lives in its own file and only parses arguments, calls the library and
//! prints; exit codes: 0 all inputs processed, 1 some inputs failed, 2 usage or fatal error.

use clap::{Parser, Subcommand};

pub mod agree;
pub mod screen;

#[derive(Parser, Debug)]
#[command(
    name = "sage",
    version,
    about = "Audit recorded runs of LLM coding agents: where did the repair first go wrong?"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Agreement coefficient (percent, Cohen, Fleiss, Gwet, Krippendorff) for a CSV of ratings.
    Agree(agree::AgreeArgs),
    /// Screen agent patches L0-L3 for silent-failure candidates (paper §3.2.4).
    Screen(screen::ScreenArgs),
}

pub fn run() -> i32 {
    let cli = Cli::parse();
    match cli.command {
        Command::Agree(args) => agree::run(args),
        Command::Screen(args) => match screen::run(args) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("error: {e:#}");
                2
            }
        },
    }
}
