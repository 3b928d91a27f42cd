//! Proposed failure anchors: every finding of a screened run (Bandit's, the L3 rules' sinks
//! and sources, and findings from user-supplied SARIF) turned into an anchor an annotator
//! can accept or edit.
//!
//! The fragment is the statement holding the finding's first line, copied from the final
//! file (a compound statement contributes only its header line). Whether the fragment is
//! new or inherited is decided by its lines' presence in the baseline; that decides the
//! deficiency category where the evidence allows it: new code → `vulnerability-introduced`;
//! inherited code → `defence-absent`, or `defence-insufficient` when the agent added an L3
//! safeguard to the same file. A source (attacker-controlled input) is not a weakness by
//! itself, so its category is left for the annotator.
//!
//! The agent's own change is evidence too: a finding inside a hunk the agent changed
//! (relative to the baseline) ranks before one in code it left alone, and every changed hunk
//! becomes a proposal of its own (`change:hunk`, after every finding): a missing check in
//! code the agent wrote has no finding, but it lies in a changed hunk.

use crate::py::PyFile;
pub use crate::report::{Proposal, Provenance};
use crate::sarif_in::ExternalFinding;
use crate::{l3, CaseResult, Report, Unit};
use std::collections::BTreeSet;
use tree_sitter::Point;

/// Kinds of evidence, strongest first (the rank's second key).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Strength {
    External,
    BanditHigh,
    Sink,
    BanditOther,
    Source,
    /// A changed hunk with no finding in it.
    Change,
}

struct Raw {
    artefact: String,
    line: usize,
    col: usize,
    end_line: Option<usize>,
    cwe: Option<u32>,
    description: String,
    finding: String,
    strength: Strength,
    /// Category-deciding finding (sources are not).
    weakness: bool,
    in_baseline_hint: bool,
}

const COMPOUND: &[&str] = &[
    "if_statement",
    "for_statement",
    "while_statement",
    "with_statement",
    "try_statement",
    "function_definition",
    "class_definition",
    "decorated_definition",
    "match_statement",
    "elif_clause",
    "else_clause",
    "except_clause",
];

/// The 1-based line span of the statement holding (line, col) in `file`: the smallest
/// simple statement around it, or the header line of a compound one.
pub fn statement_span(file: &PyFile, line: usize, col: usize) -> (usize, usize) {
    let p = Point {
        row: line.saturating_sub(1),
        column: col.saturating_sub(1),
    };
    let mut n = match file.root().descendant_for_point_range(p, p) {
        Some(n) => n,
        None => return (line, line),
    };
    loop {
        let k = n.kind();
        if COMPOUND.contains(&k) || k == "module" || k == "block" {
            return (line, line);
        }
        if k.ends_with("_statement") || k == "expression_statement" {
            return (n.start_position().row + 1, n.end_position().row + 1);
        }
        match n.parent() {
            Some(parent) => n = parent,
            None => return (line, line),
        }
    }
}

/// Lines `start..=end` (1-based) of `src`, the first without its indentation.
fn lines_of(src: &str, start: usize, end: usize) -> Option<String> {
    let lines: Vec<&str> = src.lines().collect();
    if start == 0 || start > lines.len() {
        return None;
    }
    let end = end.clamp(start, lines.len());
    let mut text = lines[start - 1..end].join("\n");
    text = text.trim_start().to_string();
    let text = text.trim_end().to_string();
    (!text.is_empty()).then_some(text)
}

fn inherited(fragment: &str, baseline: Option<&str>) -> bool {
    let Some(b) = baseline else { return false };
    let base: BTreeSet<&str> = b.lines().map(str::trim).collect();
    fragment
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .all(|l| base.contains(l))
}

/// Hunks the agent changed: 1-based, inclusive line ranges of `fin` that the line diff from
/// `baseline` inserts or replaces, without blank lines at their ends. Hunks only one
/// unchanged line apart are one hunk.
pub fn changed_hunks(baseline: &str, fin: &str) -> Vec<(usize, usize)> {
    let lines: Vec<&str> = fin.lines().collect();
    let blank = |i: usize| lines.get(i - 1).is_none_or(|l| l.trim().is_empty());
    let mut out: Vec<(usize, usize)> = Vec::new();
    for r in sage_patch::changed_lines(baseline, fin) {
        let (mut a, mut b) = (r.start + 1, r.end);
        while a <= b && blank(a) {
            a += 1;
        }
        while b >= a && blank(b) {
            b -= 1;
        }
        if a > b {
            continue;
        }
        match out.last_mut() {
            Some(last) if a <= last.1 + 2 => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// Proposals for one screened run. `external` holds the SARIF findings of this run.
pub fn propose(
    unit: &Unit,
    result: &CaseResult,
    external: &[&ExternalFinding],
    rules: &l3::Rules,
) -> Vec<Proposal> {
    let task_cwe = unit.task_cwe.as_deref().and_then(l3::parse_cwe);
    let mut raw: Vec<Raw> = Vec::new();
    for a in &result.artefacts {
        for f in a.bandit.iter().flatten() {
            raw.push(Raw {
                artefact: a.path.clone(),
                line: f.line,
                col: f.col,
                end_line: None,
                cwe: f.cwe,
                description: format!("{} ({} severity): {}", f.test_name, f.severity, f.text),
                finding: format!("bandit:{}", f.test_id),
                strength: if f.high() {
                    Strength::BanditHigh
                } else {
                    Strength::BanditOther
                },
                weakness: true,
                in_baseline_hint: f.in_baseline,
            });
        }
        for h in &a.l3.hits {
            let (strength, what) = match h.kind {
                l3::HitKind::Sink => (Strength::Sink, "dangerous sink"),
                l3::HitKind::Source => (Strength::Source, "attacker-controllable input"),
                l3::HitKind::Safeguard => continue,
            };
            raw.push(Raw {
                artefact: a.path.clone(),
                line: h.line,
                col: h.col,
                end_line: None,
                cwe: h.cwe,
                description: format!(
                    "{what} {}{}",
                    h.rule,
                    if a.l3.flagged {
                        format!(" (file flagged, R={})", a.l3.r)
                    } else {
                        String::new()
                    }
                ),
                finding: format!("l3:{}", h.rule),
                strength,
                weakness: h.kind == l3::HitKind::Sink,
                in_baseline_hint: false,
            });
        }
    }
    for e in external {
        raw.push(Raw {
            artefact: e.artefact.clone(),
            line: e.start_line,
            col: e.start_col.unwrap_or(1),
            end_line: e.end_line,
            cwe: e.cwe,
            description: e.text.clone(),
            finding: format!("sarif:{}:{}", e.tool, e.rule),
            strength: Strength::External,
            weakness: true,
            in_baseline_hint: false,
        });
    }
    // Changed hunks per artefact with a baseline (a new file is all new code).
    let hunks: std::collections::BTreeMap<&str, Vec<(usize, usize)>> = unit
        .artefacts
        .iter()
        .filter_map(|a| {
            let (b, f) = (a.baseline.as_deref()?, a.final_content.as_deref()?);
            Some((a.path.as_str(), changed_hunks(b, f)))
        })
        .collect();
    let in_change = |art: &str, s: usize, e: usize| {
        hunks
            .get(art)
            .is_some_and(|hs| hs.iter().any(|&(a, b)| s <= b && a <= e))
    };
    let mut out: Vec<(bool, bool, bool, Strength, Proposal)> = Vec::new();
    let mut seen = BTreeSet::new();
    for r in raw {
        let Some(art) = unit.artefacts.iter().find(|a| a.path == r.artefact) else {
            continue;
        };
        let Some(fin) = art.final_content.as_deref() else {
            continue;
        };
        let file = PyFile::parse(fin);
        let (s, e) = match r.end_line {
            // A SARIF region names its own lines.
            Some(end) => (r.line, end.max(r.line)),
            None => statement_span(&file, r.line, r.col),
        };
        let Some(fragment) = lines_of(fin, s, e) else {
            continue;
        };
        if !seen.insert((r.artefact.clone(), s, e, r.finding.clone())) {
            continue;
        }
        let old = r.in_baseline_hint || inherited(&fragment, art.baseline.as_deref());
        let safeguard_added = result
            .artefacts
            .iter()
            .find(|x| x.path == r.artefact)
            .is_some_and(|x| {
                x.l3.hits.iter().any(|h| {
                    h.kind == l3::HitKind::Safeguard
                        && lines_of(fin, h.line, h.line)
                            .is_some_and(|t| !inherited(&t, art.baseline.as_deref()))
                })
            });
        let category = match (r.weakness, old) {
            (false, _) => None,
            (true, false) => Some("vulnerability-introduced"),
            (true, true) if safeguard_added => Some("defence-insufficient"),
            (true, true) => Some("defence-absent"),
        };
        let target_family = match (r.cwe, task_cwe) {
            (Some(c), Some(t)) => {
                c == t || {
                    let a = rules.families_of(c);
                    rules.families_of(t).iter().any(|f| a.contains(f))
                }
            }
            _ => false,
        };
        out.push((
            target_family,
            in_change(&r.artefact, s, e),
            !old,
            r.strength,
            Proposal {
                rank: 0,
                artefact: r.artefact,
                fragment,
                start_line: s,
                end_line: e,
                cwe: r.cwe.map(|c| format!("CWE-{c}")),
                category: category.map(String::from),
                provenance: if old {
                    Provenance::Inherited
                } else {
                    Provenance::New
                },
                description: r.description,
                finding: r.finding,
                target_family,
            },
        ));
    }
    // Every changed hunk, with the task's CWE (what the change was for).
    for (art, hs) in &hunks {
        let Some(fin) = unit
            .artefacts
            .iter()
            .find(|a| a.path == *art)
            .and_then(|a| a.final_content.as_deref())
        else {
            continue;
        };
        for &(a, b) in hs {
            // A finding whose statement spans the whole hunk already proposes it.
            let covered = out
                .iter()
                .any(|x| x.4.artefact == *art && x.4.start_line <= a && b <= x.4.end_line);
            let Some(fragment) = lines_of(fin, a, b).filter(|_| !covered) else {
                continue;
            };
            out.push((
                false,
                true,
                true,
                Strength::Change,
                Proposal {
                    rank: 0,
                    artefact: art.to_string(),
                    fragment,
                    start_line: a,
                    end_line: b,
                    cwe: task_cwe.map(|c| format!("CWE-{c}")),
                    category: None,
                    provenance: Provenance::New,
                    description: format!(
                        "the agent changed lines {a}-{b}: a missing or wrong check in changed \
                         code leaves no finding; narrow the fragment to the statement{}",
                        task_cwe.map_or(String::new(), |c| format!(" that CWE-{c} is about"))
                    ),
                    finding: "change:hunk".into(),
                    target_family: false,
                },
            ));
        }
    }
    // Findings before changed hunks (a finding is evidence of a weakness, a hunk only of
    // where the agent worked); then target-family, then findings in the agent's changed
    // hunks, then new code, then the stronger evidence, then file order.
    out.sort_by(|a, b| {
        (a.3 == Strength::Change)
            .cmp(&(b.3 == Strength::Change))
            .then(b.0.cmp(&a.0))
            .then(b.1.cmp(&a.1))
            .then(b.2.cmp(&a.2))
            .then(a.3.cmp(&b.3))
            .then(a.4.artefact.cmp(&b.4.artefact))
            .then(a.4.start_line.cmp(&b.4.start_line))
    });
    out.into_iter()
        .enumerate()
        .map(|(i, (_, _, _, _, mut p))| {
            p.rank = i + 1;
            p
        })
        .collect()
}

/// Proposals for every screened (not excluded) run of `report`, in place.
pub fn attach(
    units: &[Unit],
    report: &mut Report,
    external: &[ExternalFinding],
    rules: &l3::Rules,
) {
    for c in report.cases.iter_mut() {
        let Some(u) = units.iter().find(|u| u.id == c.id && u.source == c.source) else {
            continue;
        };
        let ext: Vec<&ExternalFinding> = external.iter().filter(|e| e.run == c.id).collect();
        c.proposals = propose(u, c, &ext, rules);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_statement_spans_its_continuation_lines_and_a_compound_gives_its_header() {
        let src = "x = f(a,\n      b)\nif y:\n    z = 1\n";
        let f = PyFile::parse(src);
        assert_eq!(statement_span(&f, 1, 5), (1, 2));
        assert_eq!(statement_span(&f, 3, 4), (3, 3));
        assert_eq!(statement_span(&f, 4, 5), (4, 4));
    }

    #[test]
    fn changed_hunks_are_the_inserted_and_replaced_lines_of_the_final_file() {
        // Derivation: line 2 replaced (b → B); lines 5-7 inserted after d (line 4), the
        // blank line 7 trimmed; lines 1, 3, 4 and 8 unchanged.
        let base = "a\nb\nc\nd\ne\n";
        let fin = "a\nB\nc\nd\nx = 1\ny = 2\n\ne\n";
        assert_eq!(changed_hunks(base, fin), vec![(2, 2), (5, 6)]);
        // One unchanged line between two changes joins them.
        let fin2 = "a\nB\nc\nD\ne\n";
        assert_eq!(changed_hunks(base, fin2), vec![(2, 4)]);
        assert!(changed_hunks(base, base).is_empty());
    }

    #[test]
    fn inherited_means_every_line_is_in_the_baseline() {
        assert!(inherited("a = 1", Some("  a = 1\nb = 2\n")));
        assert!(!inherited("a = 1\nc = 3", Some("a = 1\nb = 2\n")));
        assert!(!inherited("a = 1", None));
    }
}
