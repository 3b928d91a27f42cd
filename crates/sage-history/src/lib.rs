//! Artefact history and the origin rule: everything derived from the trace alone, and the
//! fixed rule that turns turn scores into an origin.
//!
//! - [`history`](crate::reconstruct): replay every write onto the baselines, giving one
//!   snapshot per write, then code provenance and the introducing write of the anchor
//!   fragment, matched by token streams ([`fragment`]).
//! - [`origin`]: candidates (i)-(iii), linking, localized / undetermined, missed detection
//!   opportunities and the automatic checks.
//! - [`final_state`]: the replay against a case's final files (`final-state-matches-replay`),
//!   and which write failures lie outside a case.
//!
//! This crate never calls a judge and knows no trace format: it reads the canonical trace,
//! the case's failure anchor and score records, all from `sage-trace`.

pub mod final_state;
pub mod fragment;
mod history;
pub mod origin;

pub use history::*;
