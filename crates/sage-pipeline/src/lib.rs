//! The pipeline over a folder of cases: trace → canonical trace (`sage-adapters`) → artefact
//! history and origin (`sage-history`) with turn scores (`sage-judge`) → [`results`], and the
//! products made from results: the results files written as the run goes ([`sink`]),
//! Table-5 [`report`]s, the HTML [`view`], [`annotate`] packets,
//! and the reliability input ([`from_results`]); building and checking cases ([`authoring`]:
//! `sage case init | check | show`).
//!
//! The pipeline never parses flags, prints or exits: that is the CLI's job.

/// An input the pipeline could not use (a results file, a case folder, a baseline source):
/// the message names the file or case and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InputError(pub String);

pub mod annotate;
pub mod authoring;
pub mod confirm;
pub mod execute;
pub mod from_results;
pub mod knowledge;
pub mod localize;
pub mod locate;
mod readable;
pub mod redactions;
pub mod replay;
pub mod report;
pub mod results;
mod rules;
pub mod sarif_view;
pub mod sink;
pub mod trace_replay;
pub mod view;
pub mod view_trace;

pub use rules::Rules;
