//! Screening L0-L3 over units, in parallel where no subprocess runs.

use crate::input::{Artefact, BanditMode, Options, Unit};
use crate::py::PyFile;
use crate::report::{
    ArtefactResult, CaseResult, ImportCheck, Report, Status, SummaryRow, ToolRun, Verdict,
    REPORT_SCHEMA,
};
use crate::tool::{self, ToolError};
use crate::{l0, l1, l2, l3};

use rayon::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Per-artefact work that needs no subprocess (done in parallel).
struct Static {
    path: String,
    created: bool,
    deleted: bool,
    final_src: String,
    baseline_src: Option<String>,
    syntax_errors: Vec<l0::SyntaxError>,
    missing: Vec<String>,
    imports: Vec<l1::ImportUse>,
    baseline_imports: BTreeSet<String>,
    nosec: Vec<l2::NosecMarker>,
    l3: l3::FileScore,
}

fn is_python(path: &str) -> bool {
    path.ends_with(".py") || path.ends_with(".pyw")
}

fn screen_static(unit: &Unit, a: &Artefact, rules: &l3::Rules) -> Static {
    let final_src = a.final_content.clone().unwrap_or_default();
    let ff = PyFile::parse(&final_src);
    let bf = a.baseline.as_deref().map(PyFile::parse);
    let syntax_errors = if a.final_content.is_some() {
        l0::check(&ff)
    } else {
        Vec::new()
    };
    let missing = bf
        .as_ref()
        .map(|b| l1::missing_definitions(b, &ff))
        .unwrap_or_default();
    let baseline_imports = bf
        .as_ref()
        .map(|b| l1::imports(b).into_iter().map(|i| i.top).collect())
        .unwrap_or_default();
    // An artefact the agent created has an empty baseline: nothing can persist from it.
    let empty = PyFile::parse("");
    let task_cwe = unit.task_cwe.as_deref().and_then(l3::parse_cwe);
    let l3 = l3::score_file(rules, &ff, task_cwe, Some(bf.as_ref().unwrap_or(&empty)));
    Static {
        path: a.path.clone(),
        created: a.baseline.is_none(),
        deleted: a.final_content.is_none(),
        nosec: l2::nosec_added(&final_src, a.baseline.as_deref()),
        imports: l1::imports(&ff),
        final_src,
        baseline_src: a.baseline.clone(),
        syntax_errors,
        missing,
        baseline_imports,
        l3,
    }
}

/// Modified Python artefacts of a unit.
fn screened(unit: &Unit) -> Vec<&Artefact> {
    unit.artefacts
        .iter()
        .filter(|a| is_python(&a.path) && a.baseline != a.final_content)
        .collect()
}

/// Screen a batch of units: L0, L1 and L3 in-process, Bandit once for the whole batch, the
/// interpreter once for every import that needs it, tests per case.
pub fn screen(units: &[Unit], opts: &Options) -> Report {
    screen_with(units, opts, None)
}

/// What a screening run reports while it runs, stage by stage (the CLI draws a progress
/// bar from it; the library prints nothing).
pub trait Progress: Sync {
    /// A stage of `total` steps starts.
    fn stage(&self, name: &str, total: u64);
    /// One more step of the current stage is done.
    fn step(&self);
}

/// [`screen`], reporting progress: the static checks per case, the one Bandit batch, then
/// the verdict per case.
pub fn screen_with(units: &[Unit], opts: &Options, progress: Option<&dyn Progress>) -> Report {
    if let Some(p) = progress {
        p.stage("static checks (L0, L1, L3), cases", units.len() as u64);
    }
    let mut statics: Vec<Vec<Static>> = units
        .par_iter()
        .map(|u| {
            let out = if u.excluded.is_some() {
                Vec::new()
            } else {
                screened(u)
                    .into_iter()
                    .map(|a| screen_static(u, a, &opts.rules))
                    .collect()
            };
            if let Some(p) = progress {
                p.step();
            }
            out
        })
        .collect();

    // L0 locations: where tree-sitter found errors, the interpreter names the real line (one
    // subprocess for the batch; without Python, tree-sitter's locations stand).
    let failing: Vec<(usize, usize)> = statics
        .iter()
        .enumerate()
        .flat_map(|(i, ss)| {
            ss.iter()
                .enumerate()
                .filter(|(_, s)| !s.syntax_errors.is_empty())
                .map(move |(j, _)| (i, j))
        })
        .collect();
    let mut l0_notes: Vec<Vec<String>> = vec![Vec::new(); units.len()];
    if !failing.is_empty() {
        let py = opts
            .python
            .clone()
            .unwrap_or_else(|| PathBuf::from("python3"));
        let sources: Vec<&str> = failing
            .iter()
            .map(|&(i, j)| statics[i][j].final_src.as_str())
            .collect();
        let named: Vec<String> = failing
            .iter()
            .map(|&(i, j)| format!("{} of {}", statics[i][j].path, units[i].id))
            .collect();
        let task = format!("locating the syntax errors of {}", tool::some(&named));
        match l0::python_locations(&py, &sources, &task, opts.tool_timeout) {
            Ok(locs) => {
                for (&(i, j), loc) in failing.iter().zip(locs) {
                    l0::relocate(&mut statics[i][j].syntax_errors, loc.as_ref());
                }
            }
            // a hang is said where it matters; an interpreter that cannot run leaves
            // tree-sitter's locations, as it always did, without a word
            Err(e @ ToolError::TimedOut { .. }) => {
                let concerned: BTreeSet<usize> = failing.iter().map(|&(i, _)| i).collect();
                for i in concerned {
                    l0_notes[i].push(format!("L0: {e}; tree-sitter's error locations stand"));
                }
            }
            Err(_) => {}
        }
    }

    // Local modules: the stems and top folders of each unit's artefacts.
    let locals: Vec<BTreeSet<String>> = units
        .iter()
        .map(|u| {
            u.artefacts
                .iter()
                .flat_map(|a| {
                    let p = Path::new(&a.path);
                    let stem = p
                        .file_stem()
                        .map(|s| s.to_string_lossy().into_owned())
                        .into_iter();
                    let top = p
                        .components()
                        .next()
                        .filter(|_| p.components().count() > 1)
                        .map(|c| c.as_os_str().to_string_lossy().into_owned())
                        .into_iter();
                    stem.chain(top)
                })
                .collect()
        })
        .collect();

    let mut env = l1::ImportEnv {
        stdlib: l1::stdlib(),
        requirements: opts.requirements.clone(),
        interpreter: None,
    };
    let mut batch_notes = Vec::new();
    if let Some(py) = &opts.python {
        let mut need = BTreeSet::new();
        for (i, ss) in statics.iter().enumerate() {
            for s in ss {
                for imp in &s.imports {
                    if env.resolve(imp, &locals[i], &s.baseline_imports)
                        == l1::Resolution::Unverified
                    {
                        need.insert(imp.top.clone());
                    }
                }
            }
        }
        if need.is_empty() {
            env.interpreter = Some(BTreeMap::new());
        } else {
            let cases: Vec<String> = units.iter().map(|u| u.id.clone()).collect();
            let task = format!("resolving {} imports of {}", need.len(), tool::some(&cases));
            match l1::query_interpreter(py, &need, &task, opts.tool_timeout) {
                Ok(m) => env.interpreter = Some(m),
                Err(e) => batch_notes.push(format!("imports not checked against --python: {e}")),
            }
        }
    }

    // L2: one Bandit run over every final snapshot and baseline of the batch.
    let mut bandit = ToolRun {
        ran: false,
        version: None,
        reason: None,
        seconds: None,
        files: None,
    };
    let mut bandit_out: Option<BTreeMap<String, l2::FileFindings>> = None;
    if let Some(p) = progress {
        p.stage("Bandit (L2), one batch", 1);
    }
    let probe = opts.tool_timeout.min(tool::PROBE_TIMEOUT);
    let cmd = match &opts.bandit {
        BanditMode::Off => Err("disabled with --no-bandit".to_string()),
        BanditMode::Auto => {
            l2::locate(None, opts.python.as_deref(), probe).map_err(|e| e.to_string())
        }
        BanditMode::Path(p) => l2::locate(Some(p), None, probe).map_err(|e| e.to_string()),
    };
    match cmd {
        Err(e) => bandit.reason = Some(e),
        Ok(cmd) => {
            let mut files = Vec::new();
            for (i, ss) in statics.iter().enumerate() {
                for (j, s) in ss.iter().enumerate() {
                    if s.deleted {
                        continue;
                    }
                    files.push(l2::BatchFile {
                        key: format!("{i}/{j}/final"),
                        content: &s.final_src,
                    });
                    if let Some(b) = &s.baseline_src {
                        files.push(l2::BatchFile {
                            key: format!("{i}/{j}/baseline"),
                            content: b,
                        });
                    }
                }
            }
            if files.is_empty() {
                bandit.reason = Some("no Python artefact to scan".into());
            } else {
                let cases: Vec<String> = units.iter().map(|u| u.id.clone()).collect();
                let task = format!(
                    "scanning the {} files of {}",
                    files.len(),
                    tool::some(&cases)
                );
                match l2::run_batch(&cmd, &files, &task, opts.tool_timeout) {
                    Ok(r) => {
                        bandit.ran = true;
                        bandit.version = Some(cmd.version.clone());
                        bandit.seconds = Some(r.seconds);
                        bandit.files = Some(files.len());
                        bandit_out = Some(r.files);
                    }
                    Err(e) => bandit.reason = Some(e.to_string()),
                }
            }
        }
    }

    if let Some(p) = progress {
        p.step();
        p.stage("verdicts, cases", units.len() as u64);
    }
    let mut cases = Vec::new();
    for (i, ((u, ss), l0_notes)) in units.iter().zip(statics).zip(l0_notes).enumerate() {
        if let Some(p) = progress {
            p.step();
        }
        let mut case = finish_case(u, ss, &locals[i], &env, bandit_out.as_ref(), i, opts);
        if !bandit.ran && case.status != Status::Excluded {
            case.notes.push(format!(
                "L2 not run: {}",
                bandit.reason.as_deref().unwrap_or("unknown reason")
            ));
        }
        case.notes.extend(l0_notes);
        case.notes.extend(batch_notes.iter().cloned());
        cases.push(case);
    }
    let summary = summarize(&cases);
    Report {
        schema: REPORT_SCHEMA.into(),
        rules: format!("{} ({})", opts.rules.version, opts.rules.origin),
        bandit,
        cases,
        errors: Vec::new(),
        summary,
    }
}

#[allow(clippy::too_many_arguments)]
fn finish_case(
    u: &Unit,
    ss: Vec<Static>,
    local: &BTreeSet<String>,
    env: &l1::ImportEnv,
    bandit: Option<&BTreeMap<String, l2::FileFindings>>,
    i: usize,
    opts: &Options,
) -> CaseResult {
    let mut c = CaseResult {
        id: u.id.clone(),
        source: u.source.clone(),
        framework: u.framework.clone(),
        task_cwe: u.task_cwe.clone(),
        status: Status::Excluded,
        level_reached: "none".into(),
        l0: Verdict::NotRun,
        l1: Verdict::NotRun,
        l2: Verdict::NotRun,
        l3: Verdict::NotRun,
        r: None,
        candidate: false,
        reasons: Vec::new(),
        notes: Vec::new(),
        tests: None,
        artefacts: Vec::new(),
        proposals: Vec::new(),
    };
    c.notes.extend(u.notes.iter().cloned());
    if let Some(e) = &u.excluded {
        c.reasons.push(e.clone());
        return c;
    }
    if ss.is_empty() {
        c.reasons
            .push("no modification: no Python artefact differs from its baseline".into());
        return c;
    }
    let task_cwe = u.task_cwe.as_deref().and_then(l3::parse_cwe);
    let mut l0_fail = false;
    let mut l1_fail = false;
    let mut l2_high = Vec::new();
    for (j, s) in ss.into_iter().enumerate() {
        for e in &s.syntax_errors {
            c.reasons.push(format!(
                "L0: {}:{}:{} {} {}",
                s.path, e.line, e.col, e.node, e.message
            ));
            l0_fail = true;
        }
        if s.deleted {
            c.reasons
                .push(format!("L1: {} was deleted by the agent", s.path));
            l1_fail = true;
        }
        if !s.missing.is_empty() {
            c.reasons.push(format!(
                "L1: {} no longer defines {}",
                s.path,
                s.missing.join(", ")
            ));
            l1_fail = true;
        }
        let mut imports = Vec::new();
        for imp in &s.imports {
            let res = env.resolve(imp, local, &s.baseline_imports);
            match res {
                l1::Resolution::Unresolved if !imp.optional => {
                    c.reasons.push(format!(
                        "L1: {}:{} import {} does not resolve",
                        s.path, imp.line, imp.module
                    ));
                    l1_fail = true;
                }
                l1::Resolution::Unverified if !imp.optional => c.notes.push(format!(
                    "{}:{} import {} not verified (give --python or --requirements)",
                    s.path, imp.line, imp.module
                )),
                _ => {}
            }
            imports.push(ImportCheck {
                module: imp.module.clone(),
                line: imp.line,
                col: imp.col,
                resolution: res,
                optional: imp.optional,
            });
        }
        let (findings, bandit_error) = match bandit {
            None => (None, None),
            Some(b) => {
                let f = b
                    .get(&format!("{i}/{j}/final"))
                    .cloned()
                    .unwrap_or_default();
                let base = b
                    .get(&format!("{i}/{j}/baseline"))
                    .cloned()
                    .unwrap_or_default();
                let mut findings = f.findings;
                for x in findings.iter_mut() {
                    if let Some(cwe) = x.cwe {
                        x.families = opts
                            .rules
                            .families_of(cwe)
                            .into_iter()
                            .map(String::from)
                            .collect();
                        x.target_family = task_cwe.is_some_and(|t| opts.rules.same_family(t, cwe));
                    }
                }
                if let Some(bs) = &s.baseline_src {
                    l2::mark_inherited(&mut findings, &s.final_src, &base.findings, bs);
                }
                (Some(findings), f.error)
            }
        };
        for x in findings.iter().flatten().filter(|x| x.high()) {
            l2_high.push(format!(
                "L2: {}:{} HIGH {} {}{}{}",
                s.path,
                x.line,
                x.test_id,
                x.test_name,
                x.cwe.map(|c| format!(" (CWE-{c})")).unwrap_or_default(),
                if x.in_baseline {
                    ", also in baseline"
                } else {
                    ""
                }
            ));
        }
        if let Some(e) = &bandit_error {
            c.notes
                .push(format!("L2: bandit could not scan {}: {e}", s.path));
        }
        for m in &s.nosec {
            c.notes.push(format!(
                "nosec added: {}:{} `{}` (Bandit was run with --ignore-nosec)",
                s.path, m.line, m.text
            ));
        }
        c.artefacts.push(ArtefactResult {
            path: s.path,
            created: s.created,
            deleted: s.deleted,
            syntax_errors: s.syntax_errors,
            missing_definitions: s.missing,
            imports,
            bandit: findings,
            bandit_error,
            nosec_added: s.nosec,
            l3: s.l3,
        });
    }

    if let Some(t) = u.tests.as_ref().filter(|_| !opts.run_tests) {
        c.notes.push(format!(
            "L1: the case's tests were not run (tests.command {:?} is the case's own program; pass --run-tests to run it)",
            t.command
        ));
    }
    if let Some(t) = u.tests.as_ref().filter(|_| opts.run_tests) {
        let mut files = t.files.clone();
        for a in &u.artefacts {
            if let Some(f) = &a.final_content {
                files.insert(a.path.clone(), f.as_bytes().to_vec());
            }
        }
        let py = opts
            .python
            .clone()
            .unwrap_or_else(|| PathBuf::from("python3"));
        let out = l1::run_tests(
            &t.command,
            &files,
            &py,
            t.timeout.unwrap_or(opts.test_timeout),
            opts.path.as_deref(),
        );
        if !out.passed() {
            c.reasons.push(format!(
                "L1: tests {} ({:.1}s){}",
                out.status,
                out.seconds,
                out.tail
                    .lines()
                    .last()
                    .map(|l| format!(": {l}"))
                    .unwrap_or_default()
            ));
            l1_fail = true;
        }
        c.tests = Some(out);
    }

    c.l0 = if l0_fail {
        Verdict::Fail
    } else {
        Verdict::Pass
    };
    c.l1 = if l1_fail {
        Verdict::Fail
    } else {
        Verdict::Pass
    };
    c.l2 = match bandit {
        None => Verdict::NotRun,
        Some(_) if l2_high.is_empty() => Verdict::Pass,
        Some(_) => Verdict::Fail,
    };
    let best = c
        .artefacts
        .iter()
        .filter(|a| !a.deleted)
        .max_by(|a, b| a.l3.r.total_cmp(&b.l3.r));
    c.r = best.map(|a| a.l3.r);
    let l3_flag = best.is_some_and(|a| a.l3.flagged);
    c.l3 = if l3_flag {
        Verdict::Fail
    } else {
        Verdict::Pass
    };
    if l0_fail {
        c.status = Status::FailedL0;
        c.level_reached = "L0".into();
        return c;
    }
    if l1_fail {
        c.status = Status::FailedL1;
        c.level_reached = "L1".into();
        return c;
    }
    c.level_reached = "L3".into();
    c.candidate = c.l2 == Verdict::Fail || l3_flag;
    c.status = if c.candidate {
        Status::Candidate
    } else {
        Status::Passed
    };
    c.reasons.extend(l2_high);
    if let Some(a) = best.filter(|_| l3_flag) {
        let top: Vec<String> =
            a.l3.hits
                .iter()
                .filter(|h| h.kind == l3::HitKind::Sink)
                .map(|h| h.rule.clone())
                .collect();
        c.reasons.push(format!(
            "L3: {} R={} ≥ {}{} [{}]",
            a.path,
            a.l3.r,
            opts.rules.score.threshold,
            if a.l3.persists {
                ", targeted weakness persists"
            } else {
                ""
            },
            top.join(", ")
        ));
    }
    c
}

/// Table 2 of the paper: per framework, excluded runs, valid traces, passed L0-L3, failed
/// L0/L1, candidates; then a `total` row.
pub fn summarize(cases: &[CaseResult]) -> Vec<SummaryRow> {
    let mut by: BTreeMap<String, SummaryRow> = BTreeMap::new();
    for c in cases {
        let fw = c.framework.clone().unwrap_or_else(|| "-".into());
        let row = by.entry(fw.clone()).or_insert_with(|| SummaryRow {
            framework: fw,
            ..Default::default()
        });
        match c.status {
            Status::Excluded => row.excluded += 1,
            Status::FailedL0 | Status::FailedL1 => {
                row.valid += 1;
                row.failed_l0_l1 += 1
            }
            Status::Candidate => {
                row.valid += 1;
                row.candidates += 1
            }
            Status::Passed => {
                row.valid += 1;
                row.passed += 1
            }
        }
    }
    let mut rows: Vec<SummaryRow> = by.into_values().collect();
    let mut total = SummaryRow {
        framework: "total".into(),
        ..Default::default()
    };
    for r in &rows {
        total.excluded += r.excluded;
        total.valid += r.valid;
        total.passed += r.passed;
        total.failed_l0_l1 += r.failed_l0_l1;
        total.candidates += r.candidates;
    }
    rows.push(total);
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(id: &str, base: &str, fin: &str, cwe: &str) -> Unit {
        Unit {
            id: id.into(),
            source: id.into(),
            framework: Some("fw".into()),
            task_cwe: Some(cwe.into()),
            artefacts: vec![Artefact {
                path: "app.py".into(),
                baseline: Some(base.into()),
                final_content: Some(fin.into()),
            }],
            tests: None,
            excluded: None,
            notes: Vec::new(),
        }
    }

    #[test]
    fn statuses_follow_the_levels() {
        let opts = Options {
            bandit: BanditMode::Off,
            ..Default::default()
        };
        let base = "import os\ndef f(x):\n    pass\n";
        let units = vec![
            unit("syntax", base, "def f(x:\n", "CWE-78"),
            unit("dropped", base, "import os\n", "CWE-78"),
            unit(
                "flagged",
                base,
                "import os\nfrom flask import request\ndef f(x):\n    os.system('ping ' + request.args['h'])\n",
                "CWE-78",
            ),
            unit("fine", base, "import os\ndef f(x):\n    return 1\n", "CWE-78"),
            unit("same", base, base, "CWE-78"),
        ];
        let r = screen(&units, &opts);
        let st: Vec<Status> = r.cases.iter().map(|c| c.status).collect();
        assert_eq!(
            st,
            [
                Status::FailedL0,
                Status::FailedL1,
                Status::Candidate,
                Status::Passed,
                Status::Excluded
            ]
        );
        assert_eq!(r.cases[2].r, Some(27.4));
        assert!(r.cases[2].notes.iter().any(|n| n.contains("L2 not run")));
        assert_eq!(r.cases[2].l2, Verdict::NotRun);
        let total = r.summary.last().unwrap();
        assert_eq!(
            (
                total.excluded,
                total.valid,
                total.passed,
                total.failed_l0_l1,
                total.candidates
            ),
            (1, 4, 1, 2, 1)
        );
    }
}
