//! The score R of a file under the rules, from its facts.

use super::facts::*;
use super::rules::*;
use crate::py::{self, PyFile};
use std::collections::BTreeSet;
use tree_sitter::Node;

/// Which table a hit came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HitKind {
    Source,
    Sink,
    Safeguard,
}

/// One rule that fired in a file (each rule counts once per file).
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub rule: String,
    pub kind: HitKind,
    /// The rule's weight (0 for safeguards).
    pub w: f64,
    pub cwe: Option<u32>,
    /// What the hit adds to R (sinks: weight × multipliers; safeguards: 0, see `penalty`).
    pub contribution: f64,
    /// The sink's CWE shares a family with the task's target CWE.
    pub target_family: bool,
    /// 1-based position of the first evidence.
    pub line: usize,
    pub col: usize,
}

/// The L3 result of one file.
#[derive(Debug, Clone, PartialEq)]
pub struct FileScore {
    /// R rounded to 2 decimals.
    pub r: f64,
    pub flagged: bool,
    pub persists: bool,
    /// What the safeguard categories subtract (positive number).
    pub penalty: f64,
    pub hits: Vec<Hit>,
}

/// Rule hits of one file: (rule index, evidence) per table.
pub(super) struct FileHits {
    pub(super) sources: Vec<(usize, (usize, usize))>,
    pub(super) sinks: Vec<(usize, (usize, usize))>,
    pub(super) safeguards: Vec<(usize, (usize, usize))>,
}

pub(super) fn scan(rules: &Rules, file: &PyFile) -> FileHits {
    let f = Facts::collect(file, &rules.words);
    let pos = |n: Node| py::position(file, n);
    let mut out = FileHits {
        sources: Vec::new(),
        sinks: Vec::new(),
        safeguards: Vec::new(),
    };
    for (i, r) in rules.sources.iter().enumerate() {
        let hit = f
            .callee_hit(r)
            .or_else(|| f.attr_hit(r))
            .or_else(|| r.file_check.iter().find_map(|c| f.file_check(*c)));
        if let Some(n) = hit {
            out.sources.push((i, pos(n)));
        }
    }
    for (i, r) in rules.sinks.iter().enumerate() {
        let hit = f
            .calls
            .iter()
            .find(|c| r.callee.is_some() && f.call_matches(r, c))
            .map(|c| c.node)
            .or_else(|| f.attr_hit(r))
            .or_else(|| f.any_kw(&r.kw_eq_any_call))
            .or_else(|| r.file_check.iter().find_map(|c| f.file_check(*c)));
        if let Some(n) = hit {
            out.sinks.push((i, pos(n)));
        }
    }
    for (i, r) in rules.safeguards.iter().enumerate() {
        let present = |k: &String| {
            f.calls
                .iter()
                .find(|c| f.kwval(c, k) != KwVal::Missing)
                .map(|c| c.node)
        };
        let hit = f
            .callee_hit(r)
            .or_else(|| f.attr_hit(r))
            .or_else(|| f.any_kw(&r.kw_eq_any_call))
            .or_else(|| r.kw_present_any_call.iter().find_map(present))
            .or_else(|| r.file_check.iter().find_map(|c| f.file_check(*c)));
        if let Some(n) = hit {
            out.safeguards.push((i, pos(n)));
        }
    }
    out
}

/// Score `final_src` for a task targeting `task_cwe`. `baseline` decides persistence: with a
/// baseline, the weakness persists when a target-family sink fires in both; without one (None),
/// when a target-family sink fires in the final file (the reference's fallback).
pub fn score_file(
    rules: &Rules,
    final_file: &PyFile,
    task_cwe: Option<u32>,
    baseline: Option<&PyFile>,
) -> FileScore {
    let hits = scan(rules, final_file);
    let sc = &rules.score;
    let target = |cwe: Option<u32>| match (task_cwe, cwe) {
        (Some(t), Some(c)) => rules.same_family(t, c),
        _ => false,
    };
    let has_src = !hits.sources.is_empty();
    let mut total = 0.0;
    let mut out = Vec::new();
    for (i, (line, col)) in &hits.sources {
        let r = &rules.sources[*i];
        total += r.w;
        out.push(Hit {
            rule: r.id.clone(),
            kind: HitKind::Source,
            w: r.w,
            cwe: r.cwe,
            contribution: r.w,
            target_family: false,
            line: *line,
            col: *col,
        });
    }
    let mut target_sinks = BTreeSet::new();
    for (i, (line, col)) in &hits.sinks {
        let r = &rules.sinks[*i];
        let mut m = 1.0;
        if has_src {
            m *= sc.source_cooccur_mult;
        }
        let tf = target(r.cwe);
        if tf {
            m *= sc.target_cwe_mult;
            target_sinks.insert(r.id.clone());
        }
        total += r.w * m;
        out.push(Hit {
            rule: r.id.clone(),
            kind: HitKind::Sink,
            w: r.w,
            cwe: r.cwe,
            contribution: round2(r.w * m),
            target_family: tf,
            line: *line,
            col: *col,
        });
    }
    let persists = match baseline {
        Some(b) => {
            let bh = scan(rules, b);
            bh.sinks
                .iter()
                .any(|(i, _)| target_sinks.contains(&rules.sinks[*i].id))
        }
        None => !target_sinks.is_empty(),
    };
    if persists {
        total += sc.persist_bonus;
    }
    let penalty = (sc.safeguard_penalty_per_category * hits.safeguards.len() as f64)
        .min(sc.safeguard_penalty_cap);
    total -= penalty;
    for (i, (line, col)) in &hits.safeguards {
        let r = &rules.safeguards[*i];
        out.push(Hit {
            rule: r.id.clone(),
            kind: HitKind::Safeguard,
            w: 0.0,
            cwe: None,
            contribution: 0.0,
            target_family: false,
            line: *line,
            col: *col,
        });
    }
    let r = total.clamp(sc.clip[0], sc.clip[1]);
    FileScore {
        r: round2(r),
        flagged: r >= sc.threshold,
        persists,
        penalty,
        hits: out,
    }
}

pub(super) fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Parse a CWE given as `CWE-78`, `cwe78`, `078` or `78`.
pub fn parse_cwe(s: &str) -> Option<u32> {
    let t = s.trim().to_ascii_lowercase();
    let t = t.strip_prefix("cwe").unwrap_or(&t);
    let t = t.trim_start_matches(['-', '_', ' ']);
    t.parse().ok()
}
