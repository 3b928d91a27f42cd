//! What screening takes: runs as (baseline, final) file pairs, read from case folders, pair
//! folders or a CSV, and the settings.

use crate::l3;

use sage_trace::case;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A screening input that cannot be read (a folder of pairs, a SARIF log): the message names
/// the file and, where there is one, the record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InputError(pub String);

/// Whether and how to run Bandit.
#[derive(Debug, Clone, PartialEq)]
pub enum BanditMode {
    Off,
    /// Find it on PATH or as `python3 -m bandit`.
    Auto,
    Path(PathBuf),
}

/// Screening settings.
#[derive(Debug, Clone)]
pub struct Options {
    pub rules: l3::Rules,
    /// An interpreter to resolve imports against (`importlib.util.find_spec`) and to run
    /// tests with.
    pub python: Option<PathBuf>,
    /// Import names a requirements list provides.
    pub requirements: Option<BTreeSet<String>>,
    pub bandit: BanditMode,
    /// Default timeout of a case's tests.
    pub test_timeout: Duration,
    /// Timeout of each run of an outside tool over the batch: the interpreter (L0's error
    /// locations, L1's imports) and Bandit (L2), each run killed when it passes it.
    pub tool_timeout: Duration,
    /// `--run-tests`: run each case's own `tests.command`. Off by default: the command is
    /// whatever the case folder says, so running it is the user's explicit choice (the CLI
    /// shows each command and how it runs before screening starts).
    pub run_tests: bool,
    /// The `PATH` a case's tests run with (the CLI passes its own; the library reads no
    /// environment). `None`: no `PATH`.
    pub path: Option<std::ffi::OsString>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            rules: l3::Rules::builtin(),
            python: None,
            requirements: None,
            bandit: BanditMode::Auto,
            test_timeout: Duration::from_secs(60),
            tool_timeout: crate::tool::DEFAULT_TIMEOUT,
            run_tests: false,
            path: None,
        }
    }
}

/// One artefact of a unit: its baseline (None: the agent created it) and final snapshot
/// (None: the agent deleted it).
#[derive(Debug, Clone, PartialEq)]
pub struct Artefact {
    pub path: String,
    pub baseline: Option<String>,
    pub final_content: Option<String>,
}

/// A case's tests, ready to run.
#[derive(Debug, Clone, PartialEq)]
pub struct TestsInput {
    pub command: Vec<String>,
    /// Relative path → content (test files; the final artefacts are added at run time).
    pub files: BTreeMap<String, Vec<u8>>,
    pub timeout: Option<Duration>,
}

/// One thing to screen: a case, or a plain baseline/final pair.
#[derive(Debug, Clone, PartialEq)]
pub struct Unit {
    pub id: String,
    /// The case folder or pair file, for messages.
    pub source: String,
    pub framework: Option<String>,
    pub task_cwe: Option<String>,
    pub artefacts: Vec<Artefact>,
    pub tests: Option<TestsInput>,
    /// Why the run is excluded (no valid final snapshot), when it is.
    pub excluded: Option<String>,
    /// Remarks from loading (writes that could not be replayed).
    pub notes: Vec<String>,
}

// ------------------------------------------------------------------ inputs

/// Plain files: a CSV with columns `baseline,final,cwe[,framework][,id]` (paths relative to
/// the CSV), or a folder of Python files. In a folder, every `<name>.py` is screened (its
/// final snapshot), against `<name>.orig.py` beside it when there is one, else against
/// `baseline` when given (that file itself is then not screened), else as new code with no
/// baseline. `cwe` applies to pairs whose name has no `cwe-N`. No file larger than `limit`
/// bytes (the input size limit) is read.
pub fn units_from_pairs(
    path: &Path,
    cwe: Option<&str>,
    baseline: Option<&Path>,
    limit: u64,
) -> Result<(Vec<Unit>, Vec<String>), InputError> {
    pairs(path, cwe, baseline, limit).map_err(InputError)
}

fn pairs(
    path: &Path,
    cwe: Option<&str>,
    baseline: Option<&Path>,
    limit: u64,
) -> Result<(Vec<Unit>, Vec<String>), String> {
    if path.is_file() {
        return units_from_csv(path, cwe, limit);
    }
    if !path.is_dir() {
        return Err(format!("{}: no such file or directory", path.display()));
    }
    let mut units = Vec::new();
    let mut errors = Vec::new();
    let shared_baseline = match baseline {
        Some(b) => Some(case::read_text(b, limit).map_err(|e| e.to_string())?),
        None => None,
    };
    let same_file = |p: &Path| {
        baseline.is_some_and(|b| std::fs::canonicalize(b).ok() == std::fs::canonicalize(p).ok())
    };
    let mut finals: Vec<PathBuf> = walkdir::WalkDir::new(path)
        .sort_by_file_name()
        .into_iter()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().is_file())
        .map(|e| e.into_path())
        .filter(|p| {
            let s = p.to_string_lossy();
            s.ends_with(".py") && !s.ends_with(".orig.py")
        })
        .filter(|p| !same_file(p))
        .collect();
    finals.sort();
    let cwe_rx = regex::Regex::new(r"(?i)cwe[-_]?0*(\d+)").expect("static regex");
    for fin in finals {
        let s = fin.to_string_lossy();
        let orig = PathBuf::from(format!("{}.orig.py", &s[..s.len() - ".py".len()]));
        let rel = fin
            .strip_prefix(path)
            .unwrap_or(&fin)
            .to_string_lossy()
            .into_owned();
        let id = rel.trim_end_matches(".py").to_string();
        let b = if orig.is_file() {
            match case::read_text(&orig, limit) {
                Ok(b) => Some(b),
                Err(e) => {
                    errors.push(e.to_string());
                    continue;
                }
            }
        } else {
            shared_baseline.clone()
        };
        let f = match case::read_text(&fin, limit) {
            Ok(f) => f,
            Err(e) => {
                errors.push(e.to_string());
                continue;
            }
        };
        let task_cwe = cwe_rx
            .captures(&id)
            .map(|c| format!("CWE-{}", &c[1]))
            .or_else(|| cwe.map(String::from));
        units.push(Unit {
            id,
            source: fin.display().to_string(),
            framework: None,
            task_cwe,
            artefacts: vec![Artefact {
                path: rel,
                baseline: b,
                final_content: Some(f),
            }],
            tests: None,
            excluded: None,
            notes: Vec::new(),
        });
    }
    if units.is_empty() && errors.is_empty() {
        return Err(format!("{}: no Python files (*.py) found", path.display()));
    }
    Ok((units, errors))
}

fn units_from_csv(
    path: &Path,
    cwe: Option<&str>,
    limit: u64,
) -> Result<(Vec<Unit>, Vec<String>), String> {
    let base = path.parent().unwrap_or(Path::new("."));
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_path(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let mut cols: BTreeMap<&str, usize> = [
        ("baseline", 0),
        ("final", 1),
        ("cwe", 2),
        ("framework", 3),
        ("id", 4),
    ]
    .into();
    let mut units = Vec::new();
    let mut errors = Vec::new();
    for (i, rec) in rdr.records().enumerate() {
        let row = i + 1;
        let rec = match rec {
            Ok(r) => r,
            Err(e) => {
                errors.push(format!("{} row {row}: {e}", path.display()));
                continue;
            }
        };
        if i == 0 && rec.iter().any(|c| c.trim() == "baseline") {
            for k in ["baseline", "final", "cwe", "framework", "id"] {
                match rec.iter().position(|c| c.trim() == k) {
                    Some(p) => cols.insert(k, p),
                    None => cols.insert(k, usize::MAX),
                };
            }
            continue;
        }
        let get = |k: &str| {
            rec.get(cols[k])
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
        };
        let (Some(b), Some(f)) = (get("baseline"), get("final")) else {
            errors.push(format!(
                "{} row {row}: needs a baseline and a final path",
                path.display()
            ));
            continue;
        };
        let read = |p: &str| {
            case::read_text(&base.join(p), limit)
                .map_err(|e| format!("{} row {row}: {e}", path.display()))
        };
        let (bt, ft) = match (read(&b), read(&f)) {
            (Ok(x), Ok(y)) => (x, y),
            (Err(e), _) | (_, Err(e)) => {
                errors.push(e);
                continue;
            }
        };
        units.push(Unit {
            id: get("id").unwrap_or_else(|| f.clone()),
            source: format!("{} row {row}", path.display()),
            framework: get("framework"),
            task_cwe: get("cwe").or_else(|| cwe.map(String::from)),
            artefacts: vec![Artefact {
                path: f.clone(),
                baseline: Some(bt),
                final_content: Some(ft),
            }],
            tests: None,
            excluded: None,
            notes: Vec::new(),
        });
    }
    Ok((units, errors))
}
