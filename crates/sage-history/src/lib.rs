//! Artefact history and the origin rule: everything derived from the trace alone, and the
//! fixed rule that turns turn scores into an origin.
//!
//! - [`paths`]: the path rule (how a trace's path names a baseline's file).
//! - [`apply`]: one write applied to an artefact's content, with its editor's tolerance.
//! - [`knowledge`]: the one store of what is known of the files before the agent writes
//!   them (a case's baselines, given folders, what the trace shows), whole or by lines.
//! - [`reconstruct`]: replay every write onto the baselines, giving one snapshot per write.
//! - [`provenance`]: code provenance and the introducing write of the anchor fragment,
//!   matched by token streams ([`fragment`]).
//! - [`checks`]: the automatic checks that depend on the history only.
//! - [`origin`]: candidates (i)-(iii), linking, localized / undetermined, missed detection
//!   opportunities and the automatic checks.
//! - [`final_state`]: the replay against a case's final files (`final-state-matches-replay`),
//!   and which write failures lie outside a case.
//!
//! This crate never calls a judge and knows no trace format: it reads the canonical trace,
//! the case's failure anchor and score records, all from `sage-trace`.

pub mod apply;
pub mod checks;
pub mod final_state;
pub mod fragment;
pub mod knowledge;
pub mod origin;
pub mod paths;
pub mod provenance;
pub mod reconstruct;

pub use apply::*;
pub use checks::*;
pub use paths::*;
pub use provenance::*;
pub use reconstruct::*;

#[cfg(test)]
mod final_state_tests;
#[cfg(test)]
mod history_proptests;
#[cfg(test)]
mod history_tests;
