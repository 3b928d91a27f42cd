//! Artefact history: the baseline and the snapshot after every write, derived from the trace
//! alone (no judge), then code provenance and the introducing write.
//!
//! (Implementation in progress; the types below are the hand-off to the origin rule.)

use crate::case::FailureAnchor;
use crate::trace::{CanonicalTrace, RawRef};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How much of the code's evolution the trace preserves.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum ReconstructionCondition {
    /// Exactly one write.
    SingleWrite,
    /// Several writes, each state recoverable.
    PerWrite,
    /// Only the final file is known (every write is a final-state write).
    FinalOnly,
    /// The trace writes nothing: the final state is the baseline.
    NoWrite,
}

impl ReconstructionCondition {
    pub fn as_str(self) -> &'static str {
        match self {
            ReconstructionCondition::SingleWrite => "single-write",
            ReconstructionCondition::PerWrite => "per-write",
            ReconstructionCondition::FinalOnly => "final-only",
            ReconstructionCondition::NoWrite => "no-write",
        }
    }
}

/// One write, applied: the artefact's content after it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Snapshot {
    /// 1-based position of the write among all writes of the trace.
    pub write: usize,
    /// The canonical turn that holds the write.
    pub turn: usize,
    pub artefact: String,
    /// The edit kind (`full-content`, `str-replace`, ...) and how the trace expressed it.
    pub op: String,
    pub via: String,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub final_state: bool,
    /// The content after the write; `None` when the write deleted the artefact.
    pub content: Option<String>,
    pub raw: RawRef,
}

/// A write that could not be applied: reported, never skipped silently.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct WriteFailure {
    pub write: usize,
    pub turn: usize,
    pub artefact: String,
    pub op: String,
    pub reason: String,
    pub raw: RawRef,
}

/// The reconstructed history of every artefact of a trace.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ArtefactHistory {
    /// Artefact path → baseline content (absent for a file the agent created).
    pub baselines: BTreeMap<String, String>,
    /// Every applied write in trace order.
    pub snapshots: Vec<Snapshot>,
    pub failures: Vec<WriteFailure>,
    pub condition: ReconstructionCondition,
}

/// Code provenance of a failure anchor.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[serde(rename_all = "kebab-case")]
pub enum Provenance {
    Inherited,
    AgentIntroduced,
    NoCodeLocation,
}

impl Provenance {
    pub fn as_str(self) -> &'static str {
        match self {
            Provenance::Inherited => "inherited",
            Provenance::AgentIntroduced => "agent-introduced",
            Provenance::NoCodeLocation => "no-code-location",
        }
    }
}

/// Where the anchor fragment is found: the baseline and after each write to its artefact.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Presence {
    /// `None` for the baseline, else the write's position.
    pub write: Option<usize>,
    pub turn: Option<usize>,
    pub present: bool,
}

/// The introducing write: the write and its turn.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
pub struct IntroducingWrite {
    pub write: usize,
    pub turn: usize,
    /// True when an earlier write had introduced the fragment, a later one removed it, and
    /// this one reinstated it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reinstated: bool,
}

/// Code provenance and the introducing write of one anchor.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ProvenanceResult {
    pub provenance: Provenance,
    pub introducing_write: Option<IntroducingWrite>,
    /// The fragment's presence along the history (empty for no fragment).
    pub presence: Vec<Presence>,
    /// How the fragment was compared: `python-tokens` or `normalized-text`.
    pub matching: String,
    /// Why this provenance (one sentence).
    pub reason: String,
}

/// Apply every write to the baselines in trace order.
pub fn reconstruct(
    _baselines: &BTreeMap<String, String>,
    _trace: &CanonicalTrace,
) -> ArtefactHistory {
    unimplemented!("history::reconstruct")
}

/// Code provenance and the introducing write of `anchor` in `history`.
pub fn provenance(_anchor: &FailureAnchor, _history: &ArtefactHistory) -> ProvenanceResult {
    unimplemented!("history::provenance")
}
