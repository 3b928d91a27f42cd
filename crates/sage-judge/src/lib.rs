//! Turn scores: a judge scores one canonical turn at a time on the four SAGE dimensions.
//!
//! The discipline of the method is enforced here, for every judge:
//! - **prefix-only**: a [`TurnRequest`] can only be built by [`TurnRequest::prefix`], which
//!   holds the task context and turns `1..=k`; the failure anchor has no way in (the
//!   [`TaskContext`] type does not carry it).
//! - **quote-anchored**: every non-zero score must carry a quote that [`verify_quote_in`] finds in
//!   turn k's raw record (after whitespace normalization only); otherwise the judgment is
//!   retried with the reason and, still failing, the turn is a scoring failure.
//! - every score records the judge (name, model, rubric version), the run, and the hash of
//!   exactly what was sent.

pub mod concurrent;
pub mod config;
pub(crate) mod digest_lines;
pub mod injection;
mod judge;
pub mod lexicon;
pub mod llm;
pub mod prefix;
mod request;
mod score;
pub mod spec;
pub mod validate;
mod verify;

/// The score records a judge produces (defined in `sage-trace`, where every later stage
/// reads them).
pub use sage_trace::score::{
    ContextUse, Dimension, DimensionScore, JudgeId, Judgment, TraceScores, TurnOutcome, TurnScore,
    VerifiedQuote,
};

pub use judge::{CallInfo, Judge, JudgeAnswer, JudgeError};
pub use request::TurnRequest;
pub(crate) use score::retry_feedback;
pub use score::{rejection_kind, score_turn, score_turn_with};
pub use verify::{validate, verify_judgment, QuoteRejected};

#[cfg(test)]
mod tests;
