//! The agentic tracer: MAS-SZZ's stages over AgentSZZ's tools, with an [`SzzOracle`]
//! answering each question.
//!
//! 1. **Root cause** with evidence points; a second pass (the Judge) checks every quote
//!    against the source it names; up to three rounds, the feedback sent back each time.
//! 2. **Hunks**: per-hunk intent (Conventional Commits category) and relevance to the root
//!    cause; when no hunk is relevant, all `fix` hunks are kept (all hunks when none is).
//! 3. **Anchors**: up to five pre-fix statements (deleted lines; context lines only in a hunk
//!    that deletes no statement, i.e. a fix that only adds a guard; never added lines).
//! 4. **Walk back**: blame the anchor at `fix^` → commit C; the oracle decides whether the
//!    vulnerability is present in C's version of the statement. If present, the statement is
//!    mapped into `C^` **by content** (the most similar line C deleted, not the same line
//!    number) and under C's old path when C renamed the file; the walk stops when C
//!    introduced the statement, at a root commit, when the oracle says absent (returning
//!    the last commit where it was present, C itself when the first step is absent), or
//!    when the oracle says C's own change brought the vulnerability in (returning C).
//! 5. **Votes** across anchors; the fallback when nothing is found blames the top-3 deleted
//!    lines, and for a fix with no pre-fix anchor (a "ghost" fix) runs the pickaxe on the
//!    root-cause keywords, bounded by the fix.

use crate::diff::ChangeKind;
use crate::git::short;
use crate::oracle::{Anchor, HunkView, PresenceQuery, RootCause, RootCauseInput, SzzOracle};
pub use crate::report::{AgentReport, AnchorTrace, HunkReport, TraceStep};
use crate::tools::Toolbox;
use crate::variants::{candidates, line_ratio, Fix, Options};
use crate::{Candidate, Git, LineRef, SzzError, SzzResult};
use std::collections::HashMap;

/// MAS-SZZ's `MAX_TRACE_DEPTH`.
pub const MAX_DEPTH: usize = 20;
/// MAS-SZZ's review budget.
pub const MAX_REVIEW_ROUNDS: usize = 3;
/// Up to this many anchors.
pub const MAX_ANCHORS: usize = 5;
/// A statement maps into the parent commit when a deleted line is at least this similar.
pub const MAP_RATIO: f64 = 0.6;

/// The fix's hunks as the oracle sees them (files the fix adds have no pre-fix lines).
pub(crate) fn hunk_views(fix: &Fix) -> Vec<HunkView> {
    let mut out = Vec::new();
    for f in &fix.files {
        if f.binary || f.kind == ChangeKind::Added {
            continue;
        }
        for h in &f.hunks {
            let mut text = format!(
                "@@ -{} +{} @@ {}\n",
                h.old_start.unwrap_or(0),
                h.new_start.unwrap_or(0),
                h.header
            );
            for l in &h.lines {
                text.push(l.kind);
                text.push_str(&l.text);
                text.push('\n');
            }
            out.push(HunkView {
                index: out.len(),
                path: f.blame_path().to_string(),
                new_path: f
                    .new_path
                    .clone()
                    .unwrap_or_else(|| f.blame_path().to_string()),
                header: h.header.clone(),
                deleted: h
                    .lines
                    .iter()
                    .filter(|l| l.kind == '-')
                    .filter_map(|l| l.old.map(|n| (n, l.text.clone())))
                    .collect(),
                added: h
                    .lines
                    .iter()
                    .filter(|l| l.kind == '+')
                    .filter_map(|l| l.new.map(|n| (n, l.text.clone())))
                    .collect(),
                context: h
                    .lines
                    .iter()
                    .filter(|l| l.kind == ' ')
                    .filter_map(|l| l.old.map(|n| (n, l.text.clone())))
                    .collect(),
                text,
            });
        }
    }
    out
}

/// Run the agent on a loaded fix; fills `result`.
pub fn run(
    git: &Git,
    fix: &Fix,
    opts: &Options,
    oracle: &dyn SzzOracle,
    result: &mut SzzResult,
) -> Result<(), SzzError> {
    let tools = Toolbox::new(git, &fix.hash)?;
    let info = git.commit_info(&fix.hash)?;
    let mut report = AgentReport {
        oracle: oracle.id(),
        ..Default::default()
    };
    let hunks = hunk_views(fix);

    // 1. root cause, reviewed
    let mut feedback = None;
    let mut rc = None;
    for round in 1..=MAX_REVIEW_ROUNDS {
        let input = RootCauseInput {
            cve: opts.cve.as_deref(),
            message: &info.message,
            hunks: &hunks,
            feedback: feedback.clone(),
        };
        let cause = oracle.root_cause(&input)?;
        let review = oracle.review(&input, &cause)?;
        report.review_rounds = round;
        let pass = review.pass;
        if !pass {
            feedback = Some(review.feedback.clone());
        }
        // keep only the evidence the Judge could trace
        let mut kept = cause.clone();
        kept.evidence = cause
            .evidence
            .iter()
            .zip(review.verified.iter())
            .filter(|(_, v)| **v)
            .map(|(e, _)| e.clone())
            .collect();
        rc = Some(kept);
        report.review = Some(review);
        if pass {
            break;
        }
    }
    let rc = rc.expect("at least one round");
    report.root_cause = Some(rc.clone());
    if !report.review.as_ref().is_some_and(|r| r.pass) {
        result.notes.push(format!(
            "root cause not confirmed after {} round(s); unverified evidence dropped",
            report.review_rounds
        ));
    }

    // 2. intents and relevance
    for h in &hunks {
        let intent = oracle.hunk_intent(&rc, h)?;
        report.hunks.push(HunkReport {
            index: h.index,
            path: h.new_path.clone(),
            header: h.header.clone(),
            intent,
        });
    }
    let mut relevant: Vec<&HunkView> = hunks
        .iter()
        .zip(&report.hunks)
        .filter(|(_, r)| r.intent.relevant)
        .map(|(h, _)| h)
        .collect();
    if relevant.is_empty() {
        relevant = hunks
            .iter()
            .zip(&report.hunks)
            .filter(|(_, r)| r.intent.category == crate::oracle::ChangeCategory::Fix)
            .map(|(h, _)| h)
            .collect();
    }
    if relevant.is_empty() {
        relevant = hunks.iter().collect();
    }

    // 3. anchors
    report.anchors = oracle.anchors(&rc, &relevant, MAX_ANCHORS)?;

    // 4. walk back from each anchor
    for (i, a) in report.anchors.clone().iter().enumerate() {
        let t = trace(git, &tools, fix, &rc, a, i, oracle)?;
        report.traces.push(t);
    }

    // 5. votes
    let mut votes: Vec<(String, usize)> = Vec::new();
    for t in &report.traces {
        if let Some(c) = &t.result {
            match votes.iter_mut().find(|(v, _)| v == c) {
                Some((_, n)) => *n += 1,
                None => votes.push((c.clone(), 1)),
            }
        }
    }
    // stable: ties keep anchor order
    votes.sort_by_key(|v| std::cmp::Reverse(v.1));
    let mut cands: Vec<Candidate> = Vec::new();
    for (c, n) in &votes {
        let ci = git.commit_info(c)?;
        let lines = report
            .traces
            .iter()
            .filter(|t| t.result.as_deref() == Some(c))
            .filter_map(|t| {
                let a = &report.anchors[t.anchor];
                let s = t.steps.iter().rev().find(|s| &s.commit == c)?;
                Some(LineRef {
                    path: a.path.clone(),
                    line: a.line,
                    orig_path: s.path.clone(),
                    orig_line: s.line,
                    content: s.content.clone(),
                })
            })
            .collect();
        cands.push(Candidate {
            commit: c.clone(),
            committed: ci.committed,
            subject: ci.subject.clone(),
            lines,
            score: Some(*n as f64),
        });
    }

    if cands.is_empty() {
        cands = fallback(git, &tools, fix, &rc, &hunks, &mut report)?;
    }
    report.votes = votes;
    let (calls, hits, saved) = tools.stats();
    report.tool_calls = calls;
    report.cache_hits = hits;
    report.bytes_saved = saved;
    result.selected = cands.first().map(|c| c.commit.clone());
    result.candidates = cands;
    result.agent = Some(report);
    Ok(())
}

/// Walk back from one anchor (see the module docs).
fn trace(
    git: &Git,
    tools: &Toolbox,
    fix: &Fix,
    rc: &RootCause,
    a: &Anchor,
    index: usize,
    oracle: &dyn SzzOracle,
) -> Result<AnchorTrace, SzzError> {
    let mut t = AnchorTrace {
        anchor: index,
        steps: Vec::new(),
        result: None,
        stop: String::new(),
    };
    let mut rev = fix.parent.clone();
    let mut path = a.path.clone();
    let mut line = a.line;
    let mut last_present: Option<String> = None;
    for _ in 0..MAX_DEPTH {
        let Some(b) = tools.blame_line(&rev, &path, line)? else {
            t.stop = format!("{path}:{line} cannot be blamed at {}", short(&rev));
            break;
        };
        let ci = git.commit_info(&b.commit)?;
        let change = tools.file_change(&b.commit, &b.orig_path)?;
        let (deleted, added) = match &change {
            Some(f) => (f.deleted(), f.added()),
            None => (Vec::new(), Vec::new()),
        };
        let del_text: Vec<String> = deleted.iter().map(|(_, s)| s.clone()).collect();
        let add_text: Vec<String> = added.iter().map(|(_, s)| s.clone()).collect();
        let p = oracle.present(&PresenceQuery {
            root: rc,
            anchor: a,
            commit: &b.commit,
            subject: &ci.subject,
            path: &b.orig_path,
            line: &b.content,
            deleted: &del_text,
            added: &add_text,
        })?;
        t.steps.push(TraceStep {
            commit: b.commit.clone(),
            path: b.orig_path.clone(),
            line: b.orig_line,
            content: b.content.clone(),
            present: p.present,
            reason: p.reason.clone(),
        });
        if !p.present {
            t.result = Some(last_present.clone().unwrap_or_else(|| b.commit.clone()));
            t.stop = format!("absent at {}", short(&b.commit));
            return Ok(t);
        }
        last_present = Some(b.commit.clone());
        if p.introduced {
            // the code was safe before this commit: its parent's version must not be asked
            // (there the statement may share every keyword and still be guarded elsewhere)
            t.result = last_present;
            t.stop = format!("{} introduced the vulnerability", short(&b.commit));
            return Ok(t);
        }
        let Some(parent) = ci.parents.first() else {
            t.stop = "present since the root commit".into();
            break;
        };
        let Some(f) = change else {
            t.stop = format!("{} does not change {}", short(&b.commit), b.orig_path);
            break;
        };
        if f.kind == ChangeKind::Added || f.old_path.is_none() {
            t.stop = format!("{} adds {}", short(&b.commit), b.orig_path);
            break;
        }
        // map the statement by content into the parent
        let mut best: Option<(f64, usize, usize)> = None;
        for (n, text) in &deleted {
            let r = line_ratio(b.content.trim(), text.trim());
            let d = n.abs_diff(b.orig_line);
            if best.is_none_or(|(br, bd, _)| r > br || (r == br && d < bd)) {
                best = Some((r, d, *n));
            }
        }
        match best.filter(|x| x.0 >= MAP_RATIO) {
            Some((_, _, n)) => {
                line = n;
                path = f.old_path.clone().unwrap_or(path);
                rev = parent.clone();
            }
            None => {
                t.stop = format!("{} introduced the statement", short(&b.commit));
                break;
            }
        }
    }
    if t.stop.is_empty() {
        t.stop = format!("depth limit {MAX_DEPTH}");
    }
    t.result = last_present;
    Ok(t)
}

/// MAS-SZZ's fallback (blame the top-3 deleted lines by root-cause keywords, majority
/// vote), then AgentSZZ's pickaxe for fixes without pre-fix lines.
fn fallback(
    git: &Git,
    tools: &Toolbox,
    fix: &Fix,
    rc: &RootCause,
    hunks: &[HunkView],
    report: &mut AgentReport,
) -> Result<Vec<Candidate>, SzzError> {
    let mut lines: Vec<(usize, &HunkView, usize, &str)> = Vec::new();
    for h in hunks {
        for (n, l) in &h.deleted {
            if crate::oracle::trivial_line(l) {
                continue;
            }
            let toks = crate::oracle::tokens(l);
            let score = rc.keywords.iter().filter(|k| toks.contains(k)).count();
            lines.push((score, h, *n, l.as_str()));
        }
    }
    lines.sort_by_key(|l| std::cmp::Reverse(l.0));
    let mut blamed = Vec::new();
    for (_, h, n, _) in lines.iter().take(3) {
        if let Some(b) = tools.blame_line(&fix.parent, &h.path, *n)? {
            blamed.push((h.path.clone(), b));
        }
    }
    if !blamed.is_empty() {
        report.fallback = Some("blame of the top-3 deleted lines by root-cause keywords".into());
        let mut c = candidates(git, &blamed)?;
        for cand in &mut c {
            cand.score = Some(cand.lines.len() as f64);
        }
        c.sort_by_key(|x| std::cmp::Reverse(x.lines.len()));
        return Ok(c);
    }
    // ghost fix: the oldest commit that introduced a root-cause keyword in a changed file
    let mut counts: HashMap<String, usize> = HashMap::new();
    let mut order = Vec::new();
    for k in rc.keywords.iter().take(3) {
        for h in hunks.iter().take(3) {
            let out = tools.log_s(k, Some(&h.path))?;
            if let Some(oldest) = out.lines().last().and_then(|l| l.split(' ').next()) {
                if oldest.len() >= 40 && oldest != fix.hash {
                    if !counts.contains_key(oldest) {
                        order.push(oldest.to_string());
                    }
                    *counts.entry(oldest.to_string()).or_default() += 1;
                }
            }
        }
    }
    order.sort_by_key(|c| std::cmp::Reverse(counts[c]));
    let mut out = Vec::new();
    for c in order {
        let ci = git.commit_info(&c)?;
        out.push(Candidate {
            commit: c.clone(),
            committed: ci.committed,
            subject: ci.subject.clone(),
            lines: Vec::new(),
            score: Some(counts[&c] as f64),
        });
    }
    if !out.is_empty() {
        report.fallback =
            Some("pickaxe (git log -S) on root-cause keywords, bounded by the fix".into());
    }
    Ok(out)
}
