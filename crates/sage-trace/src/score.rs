//! Score records: what a judge said about one canonical turn, on the four SAGE dimensions.
//!
//! These are the values every later stage reads (the origin rule, reliability, reports); the
//! judges themselves live in `sage-judge`, which this crate does not know.

use crate::RawRef;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The four scoring dimensions of SAGE (paper Table 4).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dimension {
    /// Threat Recognition: the threat, attack path or trust boundary is identified.
    TR,
    /// Defensive Intent: an appropriate defence and its security role are specified.
    DI,
    /// Verification Rigour: the implemented defence is tested or challenged.
    VR,
    /// Scope Awareness: the code and artefacts needing security consideration are recognized.
    SA,
}

impl Dimension {
    pub const ALL: [Dimension; 4] = [Dimension::TR, Dimension::DI, Dimension::VR, Dimension::SA];

    pub fn as_str(self) -> &'static str {
        match self {
            Dimension::TR => "TR",
            Dimension::DI => "DI",
            Dimension::VR => "VR",
            Dimension::SA => "SA",
        }
    }
}

impl fmt::Display for Dimension {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who scored: a judge is identified by name, model and rubric version.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JudgeId {
    /// Backend name: `lexicon`, `openai`, `anthropic`, ...
    pub name: String,
    /// Model name (`-` for the lexicon judge).
    pub model: String,
    /// Version of the rubric (and lexicon) the judge applied.
    pub rubric_version: String,
}

impl fmt::Display for JudgeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{} (rubric {})",
            self.name, self.model, self.rubric_version
        )
    }
}

/// One dimension's score as a judge returned it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct DimensionScore {
    /// 0-3 on the anchored scale.
    pub score: u8,
    /// The verbatim quote from turn k that supports a non-zero score.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quote: Option<String>,
    /// Why the judge gave this score (free text, optional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rationale: Option<String>,
}

/// A judge's unverified answer for one turn.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct Judgment {
    pub applicable: bool,
    pub security_opportunity: bool,
    #[serde(rename = "TR")]
    pub tr: DimensionScore,
    #[serde(rename = "DI")]
    pub di: DimensionScore,
    #[serde(rename = "VR")]
    pub vr: DimensionScore,
    #[serde(rename = "SA")]
    pub sa: DimensionScore,
}

impl Judgment {
    pub fn dim(&self, d: Dimension) -> &DimensionScore {
        match d {
            Dimension::TR => &self.tr,
            Dimension::DI => &self.di,
            Dimension::VR => &self.vr,
            Dimension::SA => &self.sa,
        }
    }
    pub fn dim_mut(&mut self, d: Dimension) -> &mut DimensionScore {
        match d {
            Dimension::TR => &mut self.tr,
            Dimension::DI => &mut self.di,
            Dimension::VR => &mut self.vr,
            Dimension::SA => &mut self.sa,
        }
    }
    pub fn score(&self, d: Dimension) -> u8 {
        self.dim(d).score
    }
}

/// A verified quote: the text and the raw record it was found in.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct VerifiedQuote {
    pub dimension: Dimension,
    pub quote: String,
    pub raw: RawRef,
}

/// A turn's accepted score: the judgment with every non-zero score's quote verified.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TurnScore {
    pub turn: usize,
    pub judge: JudgeId,
    pub run: u32,
    #[serde(flatten)]
    pub judgment: Judgment,
    /// Where each quote was found in the raw trace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub quotes: Vec<VerifiedQuote>,
    /// sha256 of exactly what the judge was given: the HTTP request body for an LLM
    /// backend, the prefix request's JSON ([`TurnRequest::hash`]) for an in-process judge.
    pub prompt_hash: String,
    /// How many attempts it took (1 = first answer accepted).
    pub attempts: u32,
}

impl TurnScore {
    pub fn score(&self, d: Dimension) -> u8 {
        self.judgment.score(d)
    }
}

/// What happened to one turn.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "status", rename_all = "kebab-case")]
// Scored is the common case; boxing it would only add indirection to every caller.
#[allow(clippy::large_enum_variant)]
pub enum TurnOutcome {
    /// Scored and verified.
    Scored(TurnScore),
    /// An administrative turn: kept, marked not applicable, never sent to a judge.
    Administrative { turn: usize },
    /// The judge could not produce a verified score; the reason of the last attempt.
    Failed {
        turn: usize,
        attempts: u32,
        reason: String,
    },
}

impl TurnOutcome {
    pub fn turn(&self) -> usize {
        match self {
            TurnOutcome::Scored(s) => s.turn,
            TurnOutcome::Administrative { turn } | TurnOutcome::Failed { turn, .. } => *turn,
        }
    }
    pub fn scored(&self) -> Option<&TurnScore> {
        match self {
            TurnOutcome::Scored(s) => Some(s),
            _ => None,
        }
    }
}

/// All turn outcomes of one trace under one judge and run.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TraceScores {
    pub judge: JudgeId,
    pub run: u32,
    /// One outcome per canonical turn, in order.
    pub turns: Vec<TurnOutcome>,
}

impl TraceScores {
    /// The outcome of turn `k` (1-based).
    pub fn get(&self, k: usize) -> Option<&TurnOutcome> {
        k.checked_sub(1).and_then(|i| self.turns.get(i))
    }
    pub fn score(&self, k: usize) -> Option<&TurnScore> {
        self.get(k).and_then(TurnOutcome::scored)
    }
    pub fn failures(&self) -> Vec<usize> {
        self.turns
            .iter()
            .filter(|o| matches!(o, TurnOutcome::Failed { .. }))
            .map(TurnOutcome::turn)
            .collect()
    }
}
