//! What every SZZ stage shares: the variants, candidates, chains and results.

use crate::report::AgentReport;
use std::fmt;
use std::str::FromStr;

/// The SZZ variants `sage szz` implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Variant {
    /// B-SZZ: plain blame of the deleted lines at `fix^`.
    B,
    /// AG-SZZ: `-w`, comment filter, the more-than-20-files rule.
    Ag,
    /// MA-SZZ: AG plus `-M -C` and meta-changes (merges, mode changes, renames).
    Ma,
    /// R-SZZ: the latest MA-SZZ candidate.
    R,
    /// L-SZZ: the MA-SZZ candidate with the most modified lines.
    L,
    /// V-SZZ: walk each blamed line back by similarity; the earliest chain end.
    V,
    /// The agentic tracer (MAS-SZZ / AgentSZZ) with an oracle.
    Agent,
}

impl Variant {
    pub const ALL: [Variant; 7] = [
        Variant::B,
        Variant::Ag,
        Variant::Ma,
        Variant::R,
        Variant::L,
        Variant::V,
        Variant::Agent,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Variant::B => "b",
            Variant::Ag => "ag",
            Variant::Ma => "ma",
            Variant::R => "r",
            Variant::L => "l",
            Variant::V => "v",
            Variant::Agent => "agent",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Variant::B => "B-SZZ",
            Variant::Ag => "AG-SZZ",
            Variant::Ma => "MA-SZZ",
            Variant::R => "R-SZZ",
            Variant::L => "L-SZZ",
            Variant::V => "V-SZZ",
            Variant::Agent => "agent",
        }
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Variant {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim().to_ascii_lowercase();
        let s = s
            .strip_suffix("-szz")
            .or(s.strip_suffix("szz"))
            .unwrap_or(&s);
        Ok(match s {
            "b" => Variant::B,
            "ag" => Variant::Ag,
            "ma" => Variant::Ma,
            "r" => Variant::R,
            "l" => Variant::L,
            "v" => Variant::V,
            "agent" | "mas" | "agentic" => Variant::Agent,
            other => {
                return Err(format!(
                    "unknown variant {other:?} (b, ag, ma, r, l, v, agent)"
                ))
            }
        })
    }
}

/// A blamed line that led to a candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineRef {
    /// The file at `fix^` and the line number there (the fix's old side).
    pub path: String,
    pub line: usize,
    /// Where blame attributed it: path and line in the candidate commit.
    pub orig_path: String,
    pub orig_line: usize,
    pub content: String,
}

/// One inducing-commit candidate.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    pub commit: String,
    /// Committer time (Unix seconds).
    pub committed: i64,
    pub subject: String,
    /// The lines (or anchors) that point at it.
    pub lines: Vec<LineRef>,
    /// The agent's vote count or score, when the agent produced it.
    pub score: Option<f64>,
}

/// V-SZZ's chain for one blamed line: commits from the first blame back to the chain end.
#[derive(Debug, Clone, PartialEq)]
pub struct Chain {
    pub path: String,
    pub line: usize,
    pub commits: Vec<String>,
}

/// The answer of one variant for one fix.
#[derive(Debug, Clone, PartialEq)]
pub struct SzzResult {
    pub variant: Variant,
    pub fix: String,
    /// The candidate set (B, AG, MA: all blamed commits; R, L: one; V: chain ends; agent:
    /// voted list, best first).
    pub candidates: Vec<Candidate>,
    /// The single answer when the variant picks one (R latest, L largest, V earliest chain
    /// end, agent top vote).
    pub selected: Option<String>,
    /// Commits ignored through `--ignore-rev` (large commits, merges, meta-changes).
    pub ignored: Vec<String>,
    pub chains: Vec<Chain>,
    /// Skipped files (binary, added, filtered), filtered lines, timeouts: said, not hidden.
    pub notes: Vec<String>,
    pub agent: Option<AgentReport>,
    pub git_calls: u64,
    pub elapsed_ms: u64,
}

impl SzzResult {
    pub fn commits(&self) -> Vec<&str> {
        self.candidates.iter().map(|c| c.commit.as_str()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn variant_names_round_trip() {
        for v in Variant::ALL {
            assert_eq!(v.as_str().parse::<Variant>().unwrap(), v);
        }
        assert_eq!("MA-SZZ".parse::<Variant>().unwrap(), Variant::Ma);
        assert!("x".parse::<Variant>().is_err());
    }
}
