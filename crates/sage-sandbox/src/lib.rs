//! Replay by execution: one shell command of a recorded agent run, run again against the files
//! sage reconstructed, in a sandbox made of Linux namespaces (`docs/security.md`, "The replay
//! sandbox"), and the rules that decide which commands are never run.
//!
//! - [`sandbox`]: [`Sandbox::probe`] finds whether a sandbox can be made here (and says why
//!   not); [`Sandbox::run`] runs one command on a scratch copy of the files at the trace's own
//!   paths and returns its output, how it ended and every file it created, changed or deleted.
//! - [`policy`]: the command rules (`data/commands.toml`, embedded, overridable): which
//!   commands are never executed (read-only, test runners, package installs, network tools),
//!   which tools are shells, and the volatile parts of an output; [`policy::compare_output`]
//!   compares a command's output with the one the trace recorded.
//!
//! - [`child`]: the one bounded runner of a child process (a time limit and an output cap,
//!   the command and whatever it started killed at either), which the sandbox, `sage-szz`'s
//!   git calls and `sage-screen`'s case tests share.
//!
//! This crate knows no trace format and no other sage crate: it takes files and a command line
//! and gives back files and text.

pub mod child;
pub mod policy;
pub mod sandbox;

pub use policy::*;
pub use sandbox::*;
