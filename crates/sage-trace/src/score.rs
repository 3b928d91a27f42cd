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
    /// The four dimensions in the paper's order.
    pub const ALL: [Dimension; 4] = [Dimension::TR, Dimension::DI, Dimension::VR, Dimension::SA];

    /// The dimension's abbreviation (`TR`, `DI`, `VR`, `SA`).
    pub fn as_str(self) -> &'static str {
        match self {
            Dimension::TR => "TR",
            Dimension::DI => "DI",
            Dimension::VR => "VR",
            Dimension::SA => "SA",
        }
    }

    /// The dimension's name as the method spells it (`Threat Recognition`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Dimension::TR => "Threat Recognition",
            Dimension::DI => "Defensive Intent",
            Dimension::VR => "Verification Rigour",
            Dimension::SA => "Scope Awareness",
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
    /// Further verbatim quotes from turn k with a non-zero score on this dimension (the
    /// lexicon judge lists every such sentence of DI, so that linking reads all of them and
    /// the order of equally scored sentences cannot change a result). Verified like `quote`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub also: Vec<String>,
}

impl DimensionScore {
    /// The main quote and the further ones, when the score is non-zero.
    pub fn quotes(&self) -> Vec<&str> {
        if self.score == 0 {
            return Vec::new();
        }
        self.quote
            .iter()
            .map(String::as_str)
            .chain(self.also.iter().map(String::as_str))
            .collect()
    }
}

/// A judge's unverified answer for one turn.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct Judgment {
    /// A planning, implementation, review or verification turn (not administrative).
    pub applicable: bool,
    /// The turn makes or reviews a decision, code path or artefact materially connected to
    /// the task's security intent.
    pub security_opportunity: bool,
    /// Threat Recognition.
    #[serde(rename = "TR")]
    pub tr: DimensionScore,
    /// Defensive Intent.
    #[serde(rename = "DI")]
    pub di: DimensionScore,
    /// Verification Rigour.
    #[serde(rename = "VR")]
    pub vr: DimensionScore,
    /// Scope Awareness.
    #[serde(rename = "SA")]
    pub sa: DimensionScore,
}

impl Judgment {
    /// The score of dimension `d`.
    pub fn dim(&self, d: Dimension) -> &DimensionScore {
        match d {
            Dimension::TR => &self.tr,
            Dimension::DI => &self.di,
            Dimension::VR => &self.vr,
            Dimension::SA => &self.sa,
        }
    }
    /// The score of dimension `d`, to set it.
    pub fn dim_mut(&mut self, d: Dimension) -> &mut DimensionScore {
        match d {
            Dimension::TR => &mut self.tr,
            Dimension::DI => &mut self.di,
            Dimension::VR => &mut self.vr,
            Dimension::SA => &mut self.sa,
        }
    }
    /// The 0-3 score of dimension `d`.
    pub fn score(&self, d: Dimension) -> u8 {
        self.dim(d).score
    }
}

/// A verified quote: the text and the raw record it was found in.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct VerifiedQuote {
    /// The dimension whose score the quote supports.
    pub dimension: Dimension,
    /// The quote as the judge gave it.
    pub quote: String,
    /// The raw record of turn k the quote was found in.
    pub raw: RawRef,
}

/// A turn's accepted score: the judgment with every non-zero score's quote verified.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct TurnScore {
    /// The canonical turn (1-based).
    pub turn: usize,
    /// Who scored it.
    pub judge: JudgeId,
    /// Which run of the judge (0-based).
    pub run: u32,
    /// The accepted judgment.
    #[serde(flatten)]
    pub judgment: Judgment,
    /// Where each quote was found in the raw trace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub quotes: Vec<VerifiedQuote>,
    /// sha256 of exactly what the judge was given: the HTTP request body for an LLM
    /// backend, the chained prefix hash (`sage-judge`'s `TurnRequest::hash`, defined in
    /// `docs/judges.md`) for an in-process judge.
    pub prompt_hash: String,
    /// How many attempts it took (1 = first answer accepted).
    pub attempts: u32,
    /// Which earlier turns the judge saw whole and which only as a digest, when the prefix
    /// did not fit the judge's context budget; absent when turns `1..=k` were all whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<ContextUse>,
}

/// How a prefix was fitted into a judge's context budget: turn ranges (inclusive, 1-based)
/// sent whole and summarised in the digest. Turn k is always whole, and every range lies
/// within `1..=k`.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct ContextUse {
    /// Turn ranges sent whole.
    pub whole: Vec<[usize; 2]>,
    /// Turn ranges summarised in the digest.
    pub digested: Vec<[usize; 2]>,
    /// The estimated prompt tokens of the request (about four bytes a token).
    pub prompt_tokens: u64,
    /// The budget the request was fitted into (the judge's `context_tokens` less the
    /// output allowance).
    pub budget_tokens: u64,
}

impl TurnScore {
    /// The 0-3 score of dimension `d`.
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
    Administrative {
        /// The canonical turn (1-based).
        turn: usize,
    },
    /// The judge could not produce a verified score; the reason of the last attempt.
    Failed {
        /// The canonical turn (1-based).
        turn: usize,
        /// Attempts made.
        attempts: u32,
        /// Why the last attempt was rejected.
        reason: String,
    },
    /// Turn k cannot be sent within the judge's context budget even with every earlier turn
    /// digested (the task, turn k and the instruction alone are too long). Never sent; for
    /// the origin rule it is an unscored turn, like a scoring failure.
    ContextOverflow {
        /// The turn that could not be sent.
        turn: usize,
        /// Estimated prompt tokens of the smallest request for turn k.
        needed_tokens: u64,
        /// The budget it had to fit.
        budget_tokens: u64,
    },
}

impl TurnOutcome {
    /// The canonical turn (1-based).
    pub fn turn(&self) -> usize {
        match self {
            TurnOutcome::Scored(s) => s.turn,
            TurnOutcome::Administrative { turn }
            | TurnOutcome::Failed { turn, .. }
            | TurnOutcome::ContextOverflow { turn, .. } => *turn,
        }
    }
    /// The score, when the turn was scored.
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
    /// Who scored.
    pub judge: JudgeId,
    /// Which run of the judge (0-based).
    pub run: u32,
    /// One outcome per canonical turn, in order.
    pub turns: Vec<TurnOutcome>,
}

impl TraceScores {
    /// The outcome of turn `k` (1-based).
    pub fn get(&self, k: usize) -> Option<&TurnOutcome> {
        k.checked_sub(1).and_then(|i| self.turns.get(i))
    }
    /// The score of turn `k` (1-based), when it was scored.
    pub fn score(&self, k: usize) -> Option<&TurnScore> {
        self.get(k).and_then(TurnOutcome::scored)
    }
    /// The turns that are scoring failures.
    pub fn failures(&self) -> Vec<usize> {
        self.turns
            .iter()
            .filter(|o| {
                matches!(
                    o,
                    TurnOutcome::Failed { .. } | TurnOutcome::ContextOverflow { .. }
                )
            })
            .map(TurnOutcome::turn)
            .collect()
    }
}
