//! Evaluation over a labelled dataset: precision, recall and F1 over (repository, fix,
//! inducing commit) pairs, micro-averaged, as Rosa et al. (ICSE 2021, `overlap.py`) count
//! them:
//!
//! - precision = |oracle ∩ predicted| / |predicted|
//! - recall    = |oracle ∩ predicted| / |oracle|
//! - F1        = their harmonic mean.
//!
//! An empty prediction adds nothing to `predicted` but its labels still count in `oracle`;
//! a variant that fails on a case counts as an empty prediction. (The MAS-SZZ paper prints
//! these two formulas with the names swapped; F1 is unaffected.) Cases whose repository is
//! not under `--repos` are skipped and reported, never counted.

use crate::dataset::{find_repo, Dataset, LabelledFix};
use crate::oracle::SzzOracle;
use crate::variants::Options;
use crate::{find_inducing, Git, SzzError, Variant};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::time::Duration;

/// What happened to one (case, variant).
#[derive(Debug, Clone, PartialEq)]
pub enum CaseStatus {
    Ok,
    /// The repository is not available locally.
    Skipped {
        reason: String,
    },
    /// The case could not be run (unknown fix, git error, timeout).
    Failed {
        error: String,
    },
}

/// One (case, variant) row.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseResult {
    pub id: String,
    pub repo: String,
    /// The fix as resolved in the repository (or as given when unresolved).
    pub fix: String,
    pub variant: Variant,
    /// Labels, resolved to full hashes where possible.
    pub labels: Vec<String>,
    pub predicted: Vec<String>,
    pub selected: Option<String>,
    /// |labels ∩ predicted|
    pub hits: usize,
    pub status: CaseStatus,
    pub elapsed_ms: u64,
    pub notes: Vec<String>,
}

/// Scores of one variant.
#[derive(Debug, Clone, PartialEq)]
pub struct VariantScore {
    pub variant: Variant,
    /// Cases run (repository present).
    pub cases: usize,
    pub failed: usize,
    pub oracle_pairs: usize,
    pub predicted_pairs: usize,
    pub true_pairs: usize,
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
    /// Cases where some label is among the candidates.
    pub label_in_candidates: usize,
    /// Cases with a single answer (R, L, V, agent) and how many are a label.
    pub top1_cases: usize,
    pub top1_correct: usize,
    pub median_ms: u64,
    pub mean_ms: f64,
}

/// The whole evaluation.
#[derive(Debug, Clone)]
pub struct EvalReport {
    pub dataset: String,
    pub format: String,
    pub fixes_in_dataset: usize,
    pub fixes_run: usize,
    pub fixes_skipped: usize,
    /// Repositories not found under `--repos` (their cases are skipped).
    pub missing_repos: Vec<String>,
    pub scores: Vec<VariantScore>,
    pub cases: Vec<CaseResult>,
    pub problems: Vec<String>,
}

/// Evaluation settings.
pub struct EvalConfig<'a> {
    pub variants: Vec<Variant>,
    pub options: Options,
    pub timeout: Duration,
    /// The cap on what one git call may print, in bytes.
    pub max_output: std::num::NonZeroU64,
    /// CVE id → description, handed to the agent.
    pub descriptions: HashMap<String, String>,
    pub oracle: Option<&'a dyn SzzOracle>,
    /// Only the first N fixes whose repository is present.
    pub limit: Option<usize>,
    /// Called after each (case, variant).
    pub progress: Option<&'a dyn Fn(&CaseResult)>,
}

/// Resolve a possibly truncated hash; `None` when the repository does not know it.
fn resolve(git: &Git, h: &str) -> Option<String> {
    git.resolve_commit(h).ok()
}

/// How many fixes [`evaluate`] will run: those whose repository is under `repos`, at most
/// `limit` (times the variants, the number of progress calls).
pub fn planned(ds: &Dataset, repos: &Path, limit: Option<usize>) -> usize {
    let mut found: HashMap<&str, bool> = HashMap::new();
    let n = ds
        .fixes
        .iter()
        .filter(|f| {
            *found
                .entry(f.repo.as_str())
                .or_insert_with(|| find_repo(repos, &f.repo).is_some())
        })
        .count();
    n.min(limit.unwrap_or(usize::MAX))
}

/// Run every variant over every fix whose repository is under `repos`.
pub fn evaluate(ds: &Dataset, repos: &Path, cfg: &EvalConfig) -> EvalReport {
    let mut report = EvalReport {
        dataset: ds.path.clone(),
        format: ds.format.as_str().to_string(),
        fixes_in_dataset: ds.fixes.len(),
        fixes_run: 0,
        fixes_skipped: 0,
        missing_repos: Vec::new(),
        scores: Vec::new(),
        cases: Vec::new(),
        problems: ds.problems.clone(),
    };
    // group by repository, keeping dataset order
    let mut order: Vec<String> = Vec::new();
    let mut groups: HashMap<String, Vec<&LabelledFix>> = HashMap::new();
    for f in &ds.fixes {
        if !groups.contains_key(&f.repo) {
            order.push(f.repo.clone());
        }
        groups.entry(f.repo.clone()).or_default().push(f);
    }
    let mut missing = BTreeSet::new();
    let mut budget = cfg.limit.unwrap_or(usize::MAX);
    for repo in order {
        let fixes = &groups[&repo];
        let Some(dir) = find_repo(repos, &repo) else {
            missing.insert(repo.clone());
            report.fixes_skipped += fixes.len();
            continue;
        };
        let git = match Git::open(&dir, cfg.timeout) {
            Ok(g) => Some(g.with_max_output(cfg.max_output)),
            Err(e) => {
                report.problems.push(format!("{repo}: {e}"));
                None
            }
        };
        for f in fixes {
            if budget == 0 {
                report.fixes_skipped += 1;
                continue;
            }
            budget -= 1;
            report.fixes_run += 1;
            for &v in &cfg.variants {
                let row = run_case(git.as_ref(), f, v, cfg);
                if let Some(p) = cfg.progress {
                    p(&row);
                }
                report.cases.push(row);
            }
        }
    }
    report.missing_repos = missing.into_iter().collect();
    report.scores = cfg
        .variants
        .iter()
        .map(|&v| score(v, report.cases.iter().filter(|c| c.variant == v)))
        .collect();
    report
}

fn run_case(git: Option<&Git>, f: &LabelledFix, v: Variant, cfg: &EvalConfig) -> CaseResult {
    let mut row = CaseResult {
        id: f.id.clone(),
        repo: f.repo.clone(),
        fix: f.fix.clone(),
        variant: v,
        labels: f.inducing.clone(),
        predicted: Vec::new(),
        selected: None,
        hits: 0,
        status: CaseStatus::Ok,
        elapsed_ms: 0,
        notes: Vec::new(),
    };
    let Some(git) = git else {
        row.status = CaseStatus::Failed {
            error: "repository could not be opened".into(),
        };
        return row;
    };
    match resolve(git, &f.fix) {
        Some(h) => row.fix = h,
        None => {
            row.status = CaseStatus::Failed {
                error: format!("fix {} is not in the repository", f.fix),
            };
            return row;
        }
    }
    row.labels = f
        .inducing
        .iter()
        .map(|l| match resolve(git, l) {
            Some(h) => h,
            None => {
                row.notes
                    .push(format!("label {l} is not in the repository"));
                l.clone()
            }
        })
        .collect();
    let mut opts = cfg.options.clone();
    if opts.cve.is_none() {
        opts.cve = cfg.descriptions.get(&f.id).cloned();
    }
    match find_inducing(git, &row.fix, v, &opts, cfg.oracle) {
        Ok(r) => {
            row.predicted = r.candidates.iter().map(|c| c.commit.clone()).collect();
            row.selected = r.selected.clone();
            row.elapsed_ms = r.elapsed_ms;
            row.hits = row
                .predicted
                .iter()
                .filter(|p| row.labels.contains(p))
                .count();
        }
        Err(e) => {
            row.status = CaseStatus::Failed {
                error: describe(&e),
            };
        }
    }
    row
}

fn describe(e: &SzzError) -> String {
    e.to_string()
}

/// Pair-level micro scores over the rows of one variant.
pub fn score<'a>(variant: Variant, rows: impl Iterator<Item = &'a CaseResult>) -> VariantScore {
    let mut oracle: BTreeSet<(String, String, String)> = BTreeSet::new();
    let mut predicted: BTreeSet<(String, String, String)> = BTreeSet::new();
    let mut cases = 0;
    let mut failed = 0;
    let mut in_cands = 0;
    let mut top1_cases = 0;
    let mut top1_correct = 0;
    let mut times = Vec::new();
    let mut seen_fix: BTreeMap<(String, String), ()> = BTreeMap::new();
    for r in rows {
        if matches!(r.status, CaseStatus::Skipped { .. }) {
            continue;
        }
        cases += 1;
        if matches!(r.status, CaseStatus::Failed { .. }) {
            failed += 1;
        } else {
            times.push(r.elapsed_ms);
        }
        seen_fix.insert((r.repo.clone(), r.fix.clone()), ());
        for l in &r.labels {
            oracle.insert((r.repo.to_ascii_lowercase(), r.fix.clone(), l.clone()));
        }
        for p in &r.predicted {
            predicted.insert((r.repo.to_ascii_lowercase(), r.fix.clone(), p.clone()));
        }
        if r.hits > 0 {
            in_cands += 1;
        }
        if let Some(s) = &r.selected {
            top1_cases += 1;
            if r.labels.contains(s) {
                top1_correct += 1;
            }
        }
    }
    let tp = oracle.intersection(&predicted).count();
    let precision = if predicted.is_empty() {
        0.0
    } else {
        tp as f64 / predicted.len() as f64
    };
    let recall = if oracle.is_empty() {
        0.0
    } else {
        tp as f64 / oracle.len() as f64
    };
    let f1 = if precision + recall == 0.0 {
        0.0
    } else {
        2.0 * precision * recall / (precision + recall)
    };
    times.sort_unstable();
    let median_ms = times.get(times.len() / 2).copied().unwrap_or(0);
    let mean_ms = if times.is_empty() {
        0.0
    } else {
        times.iter().sum::<u64>() as f64 / times.len() as f64
    };
    VariantScore {
        variant,
        cases,
        failed,
        oracle_pairs: oracle.len(),
        predicted_pairs: predicted.len(),
        true_pairs: tp,
        precision,
        recall,
        f1,
        label_in_candidates: in_cands,
        top1_cases,
        top1_correct,
        median_ms,
        mean_ms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(fix: &str, labels: &[&str], predicted: &[&str]) -> CaseResult {
        CaseResult {
            id: fix.into(),
            repo: "o/r".into(),
            fix: fix.into(),
            variant: Variant::B,
            labels: labels.iter().map(|s| s.to_string()).collect(),
            predicted: predicted.iter().map(|s| s.to_string()).collect(),
            selected: None,
            hits: predicted.iter().filter(|p| labels.contains(p)).count(),
            status: CaseStatus::Ok,
            elapsed_ms: 1,
            notes: vec![],
        }
    }

    #[test]
    fn rosa_pair_level_counts() {
        // fix1: label a, predicted a,b → 1 tp; fix2: label c, predicted nothing
        let rows = [row("f1", &["a"], &["a", "b"]), row("f2", &["c"], &[])];
        let s = score(Variant::B, rows.iter());
        assert_eq!((s.oracle_pairs, s.predicted_pairs, s.true_pairs), (2, 2, 1));
        assert!((s.precision - 0.5).abs() < 1e-12);
        assert!((s.recall - 0.5).abs() < 1e-12);
        assert!((s.f1 - 0.5).abs() < 1e-12);
        assert_eq!(s.label_in_candidates, 1);
    }

    #[test]
    fn precision_is_over_predictions_recall_over_labels() {
        let rows = [row("f1", &["a", "b", "c", "d"], &["a"])];
        let s = score(Variant::B, rows.iter());
        assert_eq!(s.precision, 1.0);
        assert_eq!(s.recall, 0.25);
    }
}
