//! SZZ on a git history: given a fixing commit (and optionally a CVE description), which
//! commit introduced the bug or vulnerability?
//!
//! - [`git`]: the `git` binary with a timeout on every call, on a working tree or a bare
//!   repository; [`blame`]: `git blame --porcelain`; [`diff`]: a commit's patch, parsed.
//! - [`variants`]: B-SZZ, AG-SZZ, MA-SZZ, R-SZZ, L-SZZ and V-SZZ's walk-back, following
//!   PySZZ's conventions (see `docs/szz.md`).
//! - [`agent`]: the agentic tracer (MAS-SZZ stages, AgentSZZ tools) driven by an
//!   [`oracle::SzzOracle`]; [`oracle::LexiconOracle`] works offline.
//! - [`dataset`] and [`eval`]: the four labelled dataset formats and Rosa et al.'s
//!   pair-level precision, recall and F1.

pub mod agent;
pub mod bench;
pub mod blame;
pub mod comments;
pub mod dataset;
pub mod diff;
pub mod eval;
mod find;
pub mod git;
pub mod oracle;
pub mod oracle_data;
pub mod schema;
pub mod tools;
pub mod variants;

mod error;
mod model;
mod report;

pub use error::SzzError;
pub use find::find_inducing;
pub use git::{open, Git};
pub use model::{Candidate, Chain, LineRef, SzzResult, Variant};
pub use variants::Options;
