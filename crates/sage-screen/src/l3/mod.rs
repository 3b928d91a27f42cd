//! L3: the exploitability-oriented rule score R in [0, 100] (paper §3.2.4).
//!
//! R(file) = clip(Σ source w + Σ sink w ·1.5 [a source in the file] ·1.3 [sink CWE in the task's
//! CWE family] + 10 [the targeted weakness persists from the baseline]
//! − min(2 · safeguard categories, 10), 0, 100); a patch is flagged at R ≥ 15, max over files.
//!
//! The rules are data (`crates/sage-screen/rules/l3_rules.json`, overridable). Facts are collected with one
//! tree-sitter query per file and mirror what the Python reference (`l3_score.py`, stdlib
//! `ast`) sees, so both score the same files the same way.

mod facts;
mod rules;
mod score;
#[cfg(test)]
mod tests;

pub use rules::*;
pub use score::*;
