//! What the agentic tracer reports: its hunks, anchors, walks back and votes.

use crate::oracle::{Anchor, HunkIntent, Review, RootCause};

/// A hunk with its intent.
#[derive(Debug, Clone, PartialEq)]
pub struct HunkReport {
    pub index: usize,
    pub path: String,
    pub header: String,
    pub intent: HunkIntent,
}

/// One step of the walk back.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceStep {
    pub commit: String,
    pub path: String,
    pub line: usize,
    pub content: String,
    pub present: bool,
    pub reason: String,
}

/// The walk back from one anchor.
#[derive(Debug, Clone, PartialEq)]
pub struct AnchorTrace {
    pub anchor: usize,
    pub steps: Vec<TraceStep>,
    pub result: Option<String>,
    /// Why the walk stopped.
    pub stop: String,
}

/// What the agent did.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AgentReport {
    pub oracle: String,
    pub root_cause: Option<RootCause>,
    pub review_rounds: usize,
    pub review: Option<Review>,
    pub hunks: Vec<HunkReport>,
    pub anchors: Vec<Anchor>,
    pub traces: Vec<AnchorTrace>,
    /// (commit, votes), best first.
    pub votes: Vec<(String, usize)>,
    pub fallback: Option<String>,
    pub tool_calls: usize,
    pub cache_hits: usize,
    pub bytes_saved: usize,
}
