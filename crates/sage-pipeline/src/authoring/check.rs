//! `sage case check`: every problem in a case that would make its result silently wrong,
//! each with a fix.
//!
//! Checked: the manifest loads (files present, anchor filled in); the trace reads and yields
//! agent turns; the anchor's artefact (and every baseline key) is one the trace touches, by
//! the trace's own name; the anchor fragment is found in the baseline or some snapshot; the
//! trace's own views agree with the baseline (before the first write) and with the replay
//! (after writes); every write to a case artefact applies, and none was left uninterpreted;
//! the replay gives exactly the case's final file. Then `sage replay`'s verdict per file
//! (from the same knowledge of the files, against the case's final files and the trace's own
//! results), with each executed write's output check.

use super::closest;
use sage_adapters::seen::Seen;
use sage_history::{self as history, ArtefactHistory};
use sage_trace::case::{Case, FailureAnchor};
use sage_trace::CanonicalTrace;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

pub mod schema;

/// One problem and how to fix it.
#[derive(Debug, Clone, PartialEq)]
pub struct Problem {
    pub what: String,
    pub fix: String,
}

/// The check of one case.
#[derive(Debug, Clone, Default)]
pub struct CaseCheck {
    pub dir: String,
    pub problems: Vec<Problem>,
    /// What was verified, for the `ok` line.
    pub verified: Vec<String>,
    /// Things not checked, and why.
    pub notes: Vec<String>,
    /// The replay of the case's trace (`sage replay`'s, from the same knowledge of the files),
    /// one verdict per file against the case's final files and the trace's own results.
    pub replay: Option<ReplayVerdicts>,
}

/// `sage replay`'s verdicts on a case, file by file.
#[derive(Debug, Clone, Default)]
pub struct ReplayVerdicts {
    /// What the files were compared with (`case final files`, `submission (git_patch)`, ...).
    pub results: Vec<String>,
    pub counts: crate::trace_replay::Counts,
    pub files: Vec<FileVerdict>,
    /// Replay by execution: `on (...)` or `off: WHY`.
    pub execution: String,
}

/// One file's verdict.
#[derive(Debug, Clone)]
pub struct FileVerdict {
    pub path: String,
    /// Where its baseline comes from (`case baseline FILE`, `shown whole by the trace (HOW)`,
    /// `partial: N lines known`, `none`).
    pub baseline: String,
    /// `matches`, `differs` or `unverifiable`.
    pub verdict: crate::trace_replay::Verdict,
    /// Why (always for `unverifiable`: what is missing).
    pub reason: Option<String>,
    /// Its writes that could not be applied, each with why.
    pub failed_writes: Vec<String>,
    /// Its executed writes: `turn N: verified | diverged | not comparable`.
    pub executed: Vec<String>,
}

/// Replay the case's trace from the case's knowledge of its files, against its final files.
fn replay_verdicts(
    case: &Case,
    rules: &crate::Rules,
    execution: &crate::execute::Execution,
) -> Result<ReplayVerdicts, String> {
    // Named by their paths, so the replay finds the raw records from any working folder.
    let files: Vec<sage_adapters::SourceFile> =
        sage_adapters::case_sources(&case.dir, &case.manifest.trace)
            .into_iter()
            .map(|f| sage_adapters::SourceFile::new(f.path.display().to_string(), &f.path))
            .collect();
    let mut finals = Vec::new();
    if !case.final_files.is_empty() {
        finals.push(("case final files".to_string(), case.final_files.clone()));
    }
    let opts = crate::trace_replay::ReplayOptions {
        framework: case.manifest.trace.framework.clone(),
        run: case.manifest.trace.run,
        allow_empty: true,
        execution: execution.clone(),
        rules: rules.clone(),
        known: crate::knowledge::of_case(case, &rules.workspace_roots),
        finals,
        ..Default::default()
    };
    let r = crate::trace_replay::replay(&files, &opts).map_err(|e| e.to_string())?;
    Ok(ReplayVerdicts {
        results: r.results,
        counts: r.counts,
        files: r
            .artefacts
            .into_iter()
            .map(|a| FileVerdict {
                path: a.path,
                baseline: a.baseline,
                verdict: a.verdict,
                reason: a.reason,
                failed_writes: a.failed_writes,
                executed: a
                    .executed
                    .iter()
                    .map(|e| format!("turn {}: {}", e.turn, e.check))
                    .collect(),
            })
            .collect(),
        execution: r.execution.state,
    })
}

fn problem(what: impl Into<String>, fix: impl Into<String>) -> Problem {
    Problem {
        what: what.into(),
        fix: fix.into(),
    }
}

fn clip(s: &str) -> String {
    let t: String = s.chars().take(70).collect();
    if t.chars().count() < s.chars().count() {
        format!("{t}…")
    } else {
        t
    }
}

/// The content of `artefact` after the first `k` writes of the trace (in trace order).
fn state_after(h: &ArtefactHistory, artefact: &str, k: usize) -> Option<String> {
    h.snapshots
        .iter()
        .rev()
        .find(|s| s.artefact == artefact && s.write <= k)
        .map(|s| s.content.clone())
        .unwrap_or_else(|| h.baselines.get(artefact).cloned())
}

/// Check the case in `dir`, read by `rules`; the replay verdicts executed as `execution`
/// says.
pub fn check_case(
    dir: &Path,
    rules: &crate::Rules,
    execution: &crate::execute::Execution,
) -> CaseCheck {
    let mut c = CaseCheck {
        dir: dir.display().to_string(),
        ..CaseCheck::default()
    };
    let case = match Case::load(dir, rules.limits()) {
        Ok(x) => x,
        Err(e) => {
            let mut msg = e.to_string();
            if msg.contains("`TODO`") {
                msg = format!(
                    "{}: the failure anchor is not filled in (category is TODO)",
                    dir.join(sage_trace::case::MANIFEST_NAME).display()
                );
            }
            let fix = if msg.contains("TODO") {
                "fill in the failure anchor in case.json (artefact, fragment, category, cwe, \
                 description; docs/case.md)"
            } else if msg.contains("is missing") || msg.contains("cannot read") {
                "the file named in case.json must exist, relative to the case folder"
            } else {
                "fix case.json (schema: docs/case.schema.json)"
            };
            c.problems.push(problem(msg, fix));
            return c;
        }
    };
    let anchor = match case.anchor() {
        Ok(a) => a,
        Err(e) => {
            c.problems.push(problem(
                e.to_string(),
                "fill in the failure anchor in case.json (docs/case.md)",
            ));
            return c;
        }
    };
    let files = sage_adapters::case_sources(&case.dir, &case.manifest.trace);
    let how = sage_adapters::NormalizeOptions {
        framework: case.manifest.trace.framework.clone(),
        run: case.manifest.trace.run,
        rules: rules.adapters.clone(),
        ..Default::default()
    };
    let (trace, seen) = match sage_adapters::normalize_seen(&files, &how) {
        Ok(x) => x,
        Err(e) => {
            c.problems.push(problem(
                format!("the trace cannot be read: {e}"),
                "set trace.framework to the format's adapter (`sage adapters`), or remove it to \
                 detect the format from content",
            ));
            return c;
        }
    };
    if !trace.turns.iter().any(|t| t.is_applicable()) {
        c.problems.push(problem(
            format!(
                "the trace yields no agent turn with the {} adapter",
                trace.framework
            ),
            "check trace.framework; `sage normalize TRACE` shows what the adapter reads",
        ));
        return c;
    }
    // The same knowledge of the files as `localize`: the case's baselines, then what the
    // trace shows of the others.
    let known = crate::knowledge::of_case_and_trace(&case, &seen, &rules.workspace_roots);
    let hist = history::reconstruct_known(&known, &trace, &[]);
    check_names(&mut c, &case, anchor, &trace, &seen);
    check_fragment(&mut c, &case, anchor, &hist);
    check_views(&mut c, &case, &seen, &hist);
    check_writes(&mut c, &case, anchor, &trace, &hist);
    check_final(&mut c, &case, &hist);
    match replay_verdicts(&case, rules, execution) {
        Ok(r) => c.replay = Some(r),
        Err(e) => c.notes.push(format!("no per-file replay verdicts: {e}")),
    }
    c
}

/// Artefact names: the anchor's and every baseline key must be names the trace uses.
fn check_names(
    c: &mut CaseCheck,
    case: &Case,
    anchor: &FailureAnchor,
    trace: &CanonicalTrace,
    seen: &Seen,
) {
    let written: BTreeSet<String> = trace
        .writes()
        .map(|(_, w)| history::normalize_path(&w.artefact))
        .collect();
    let viewed: BTreeSet<String> = seen
        .views
        .iter()
        .map(|v| history::normalize_path(&v.artefact))
        .collect();
    let mentioned = |a: &str| {
        trace
            .turns
            .iter()
            .flat_map(|t| t.tool_calls.iter())
            .any(|call| call.arguments.contains(a))
    };
    let touched: BTreeSet<String> = written.union(&viewed).cloned().collect();
    let known = |a: &str| {
        let n = history::normalize_path(a);
        touched.contains(&n) || mentioned(&n)
    };
    let names = || -> String {
        let w: Vec<&String> = written.iter().take(8).collect();
        if w.is_empty() {
            "it writes no file".into()
        } else {
            format!(
                "it writes {}",
                w.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
            )
        }
    };
    let anchor = &anchor.artefact;
    if !known(anchor) {
        let near = closest(anchor, &touched, 3);
        c.problems.push(problem(
            format!(
                "anchor.artefact {anchor:?} is never touched by the trace ({})",
                names()
            ),
            if near.is_empty() {
                "name the artefact as the trace does (`sage case init` lists them)".to_string()
            } else {
                format!(
                    "did you mean {}? Name artefacts as the trace does",
                    near.iter()
                        .map(|n| format!("{n:?}"))
                        .collect::<Vec<_>>()
                        .join(" or ")
                )
            },
        ));
    }
    for k in case.baselines.keys().filter(|k| *k != anchor) {
        if known(k) {
            continue;
        }
        let near = closest(k, &touched, 3);
        let same_file = near
            .iter()
            .any(|n| n.rsplit('/').next() == k.rsplit('/').next());
        if same_file {
            c.problems.push(problem(
                format!("baseline {k:?} is never touched by the trace, which writes a file of the same name"),
                format!("did you mean {:?}? The trace's writes to it start from no baseline", near[0]),
            ));
        } else {
            c.notes
                .push(format!("baseline {k} is never touched by the trace"));
        }
    }
}

/// The anchor fragment must be somewhere along the history.
fn check_fragment(c: &mut CaseCheck, case: &Case, a: &FailureAnchor, h: &ArtefactHistory) {
    let Some(f) = a.fragment.as_deref().filter(|f| !f.trim().is_empty()) else {
        c.notes
            .push("no anchor fragment (no identifiable code location)".into());
        return;
    };
    let name = h.resolve_name(&a.artefact);
    let m =
        sage_history::fragment::Matcher::new(&name, f, h.baselines.get(&name).map(String::as_str));
    let mut contents: Vec<&str> = h
        .baselines
        .get(&name)
        .map(String::as_str)
        .into_iter()
        .collect();
    contents.extend(
        h.snapshots
            .iter()
            .filter(|s| s.artefact == name)
            .filter_map(|s| s.content.as_deref()),
    );
    contents.extend(case.final_files.get(&a.artefact).map(String::as_str));
    if contents.iter().any(|t| m.found_in(t)) {
        c.verified.push("fragment located".into());
        return;
    }
    // The closest line of the final (else last) content, as a hint.
    let last = contents.last().copied().unwrap_or("");
    let first = f.lines().find(|l| !l.trim().is_empty()).unwrap_or(f).trim();
    let hint = last
        .lines()
        .map(|l| (super::edit_distance(l.trim(), first), l.trim()))
        .min_by_key(|x| x.0)
        .filter(|(d, _)| *d <= first.len() / 2)
        .map(|(_, l)| format!(" (closest line: {:?})", clip(l)))
        .unwrap_or_default();
    c.problems.push(problem(
        format!(
            "anchor.fragment is found neither in the baseline of {name} nor in any snapshot{hint}"
        ),
        "copy the fragment verbatim from the final file; a fragment found nowhere makes the case \
         no-code-location",
    ));
}

/// The trace's own views against the baseline (before the first write) and the replay.
fn check_views(c: &mut CaseCheck, case: &Case, seen: &Seen, h: &ArtefactHistory) {
    if !seen.reports_views {
        c.notes
            .push("the trace's views are not compared (the adapter reports none)".to_string());
        return;
    }
    let mut compared = 0usize;
    for (artefact, base) in &case.baselines {
        let name = h.resolve_name(artefact);
        let mut first_bad: Option<String> = None;
        let mut bad = 0usize;
        let mut n_views = 0usize;
        for v in seen
            .views
            .iter()
            .filter(|v| history::normalize_path(&v.artefact) == name)
        {
            let state = if v.after_writes == 0 {
                Some(base.clone())
            } else {
                state_after(h, &name, v.after_writes)
            };
            let Some(state) = state else { continue };
            n_views += 1;
            let lines: Vec<String> = state
                .split('\n')
                .map(sage_adapters::claude_stream::expand_tabs)
                .collect();
            let last = v.lines.keys().next_back().copied();
            for (n, shown) in &v.lines {
                // A snippet's trailing empty line is the tool's, not the file's.
                if v.snippet && Some(*n) == last && shown.is_empty() {
                    continue;
                }
                compared += 1;
                let have = lines.get(n - 1).map(String::as_str);
                if have != Some(shown.as_str()) {
                    bad += 1;
                    if first_bad.is_none() {
                        first_bad = Some(format!(
                            "{} line {n}: the trace's {} at {} shows {:?}, the {} has {:?}",
                            name,
                            if v.snippet { "edit snippet" } else { "view" },
                            v.raw.display(),
                            clip(shown),
                            if v.after_writes == 0 {
                                "baseline".to_string()
                            } else {
                                format!("replay after write {}", v.after_writes)
                            },
                            have.map(clip).unwrap_or_else(|| "<end of file>".into())
                        ));
                    }
                }
            }
        }
        if let Some(first) = first_bad {
            let before = first.contains("the baseline has");
            c.problems.push(problem(
                format!("{bad} line(s) shown by the trace disagree with sage's history: {first}"),
                if before {
                    "the baseline is not the file the run started from: rebuild it from the trace \
                     (`sage case init`) or from the revision the run started at"
                        .to_string()
                } else {
                    "an edit was misread or did not apply; compare the writes with \
                     `sage case show CASE --write N --diff`"
                        .to_string()
                },
            ));
        } else if n_views > 0 {
            c.verified.push(format!("{name}: {n_views} view(s) agree"));
        }
    }
    if compared == 0 {
        c.notes
            .push("the trace shows no numbered view of a case artefact".into());
    }
}

/// Writes to case artefacts must apply, and none may be left uninterpreted.
fn check_writes(
    c: &mut CaseCheck,
    case: &Case,
    anchor: &FailureAnchor,
    trace: &CanonicalTrace,
    h: &ArtefactHistory,
) {
    let mut by: BTreeMap<&str, Vec<&history::WriteFailure>> = BTreeMap::new();
    for f in &h.failures {
        by.entry(f.artefact.as_str()).or_default().push(f);
    }
    for (a, fs) in by {
        let f = fs[0];
        if sage_history::final_state::outside_case(case, anchor, h, a) {
            c.notes.push(format!(
                "{} write(s) to {a} do not replay (first: write {}, {}): the case has no \
                 baseline for it; it is outside the case and does not affect the anchor",
                fs.len(),
                f.write,
                f.reason
            ));
            continue;
        }
        let has_base = case.baselines.keys().any(|k| h.resolve_name(k) == a);
        c.problems.push(problem(
            format!(
                "{} write(s) to {a} could not be applied (first: write {} at turn {}, {}: {})",
                fs.len(),
                f.write,
                f.turn,
                f.raw.display(),
                f.reason
            ),
            if has_base {
                "the baseline is probably not the file the run started from".to_string()
            } else {
                format!(
                    "the case has no baseline for {a}, which existed before the run; add it \
                     (`sage case init --baseline-from REPO@REV` finds it)"
                )
            },
        ));
    }
    // Edits the adapter saw but could not interpret, on a case artefact whose replay no final
    // file confirms (when the replay gives exactly the final file, the command changed nothing
    // that lasted).
    let confirmed = |a: &str| {
        case.final_files.get(a).is_some_and(|want| {
            sage_history::final_state::replayed_end(h, &h.resolve_name(a)).as_deref()
                == Some(want.as_str())
        })
    };
    for d in &trace.dropped {
        for a in case.baselines.keys().filter(|a| !confirmed(a)) {
            let file = a.rsplit('/').next().unwrap_or(a);
            if d.reason.contains(file)
                && (d.reason.contains("not a plain edit")
                    || d.reason.contains("not interpreted")
                    || d.reason.contains("not replayed")
                    || d.reason.contains("unknown"))
            {
                c.problems.push(problem(
                    format!("{}: {} (it may change {a})", d.raw.display(), d.reason),
                    "such a change is not replayed; if it changed the file, the history after it \
                     is wrong: give the case its final file (final_state) so the replay can be \
                     checked",
                ));
            }
        }
    }
}

/// The replay must give exactly the case's final file.
fn check_final(c: &mut CaseCheck, case: &Case, h: &ArtefactHistory) {
    if case.final_files.is_empty() {
        c.notes
            .push("no final_state: the replay is not compared with a final file".into());
    }
    for (a, want) in &case.final_files {
        let name = h.resolve_name(a);
        let own = h.snapshots.iter().any(|s| s.artefact == name);
        if !own && h.failures.iter().any(|f| f.artefact == name) {
            continue; // its writes fail: reported above
        }
        if !own {
            c.notes.push(format!(
                "{a}: the trace never writes it; its final file is the case's own (final-only)"
            ));
            continue;
        }
        match sage_history::final_state::replayed_end(h, &name) {
            None => c.problems.push(problem(
                format!("{a}: the replay deletes the file, but the case has a final file"),
                "check the trace's last writes to it (`sage case show`)",
            )),
            Some(got) => match sage_history::final_state::first_difference(&got, want) {
                None => c.verified.push(format!("{a}: replay = final file")),
                Some((line, g, w)) => c.problems.push(problem(
                    format!(
                        "{a}: the replay differs from the final file at line {line} (replay {:?}, final {:?})",
                        clip(&g),
                        clip(&w)
                    ),
                    "the history sage derives is not what the run did: a write was misread or \
                     missed, or the baseline is wrong; `sage case show CASE --write N --diff` \
                     shows each write",
                )),
            },
        }
    }
}
