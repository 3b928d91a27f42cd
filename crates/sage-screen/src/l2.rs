//! L2: static security analysis with Bandit, the real tool, run once per batch
//! (`-f json --ignore-nosec`) over a scratch directory holding every final snapshot (and the
//! baselines, so each finding can say whether the baseline already had it). Findings are
//! mapped to CWE ids and families; HIGH severity fails L2. `# nosec` markers the agent added
//! are a signal of their own. Without Bandit, L2 is "not run", never faked.

use crate::py::PyFile;
use regex::Regex;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::OnceLock;
use std::time::Duration;

/// test id → (name, CWE, severity, confidence), Bandit 1.9.4.
pub const CWE_BANDIT: &str = include_str!("../rules/cwe_bandit.tsv");

/// One row of the Bandit test table.
#[derive(Debug, Clone, PartialEq)]
pub struct BanditTest {
    pub id: String,
    pub name: String,
    pub cwe: Option<u32>,
    pub severity: String,
}

/// The Bandit test table (`crates/sage-screen/rules/cwe_bandit.tsv`).
pub(crate) fn bandit_tests() -> BTreeMap<String, BanditTest> {
    CWE_BANDIT
        .lines()
        .skip(1)
        .filter_map(|l| {
            let c: Vec<&str> = l.split('\t').collect();
            (c.len() >= 4).then(|| {
                (
                    c[0].to_string(),
                    BanditTest {
                        id: c[0].to_string(),
                        name: c[1].to_string(),
                        cwe: c[2].parse().ok(),
                        severity: c[3].to_string(),
                    },
                )
            })
        })
        .collect()
}

/// How to run Bandit.
#[derive(Debug, Clone, PartialEq)]
pub struct BanditCmd {
    /// Program and leading arguments (`bandit`, or `python3 -m bandit`).
    pub argv: Vec<String>,
    pub version: String,
}

/// Why Bandit could not be found or run (L2 is then not applied and the report says so).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BanditError {
    /// No command that answers `--version` (the commands tried).
    #[error("bandit not found (tried: {0}); install it with scripts/setup.sh")]
    NotFound(String),
    /// The scratch copy of the batch could not be written (path or step, cause).
    #[error("{0}")]
    Scratch(String),
    /// Bandit passed its time limit (or printed past the cap) and was killed: the tool, the
    /// limit and the batch's files and cases.
    #[error("{0}")]
    Killed(crate::ToolError),
    /// Bandit could not be started.
    #[error("cannot run {cmd}: {cause}")]
    Spawn {
        /// The command.
        cmd: String,
        /// The operating system's message.
        cause: String,
    },
    /// Bandit exited with a status other than 0 (no findings) or 1 (findings).
    #[error("bandit failed ({status}): {stderr}")]
    Failed {
        /// The exit status.
        status: String,
        /// What it printed on stderr.
        stderr: String,
    },
    /// Bandit's report is not the JSON it documents.
    #[error("bandit output is not the expected JSON: {cause}; stderr: {stderr}")]
    Report {
        /// The parser's message.
        cause: String,
        /// What it printed on stderr.
        stderr: String,
    },
}

/// Find a working Bandit: `explicit` if given, else `bandit` on PATH, else
/// `<python> -m bandit` for `python3` and the given interpreter.
pub fn locate(
    explicit: Option<&Path>,
    python: Option<&Path>,
    wall: Duration,
) -> Result<BanditCmd, BanditError> {
    let mut tries: Vec<Vec<String>> = Vec::new();
    if let Some(p) = explicit {
        tries.push(vec![p.display().to_string()]);
    } else {
        tries.push(vec!["bandit".into()]);
        tries.push(vec!["python3".into(), "-m".into(), "bandit".into()]);
        if let Some(p) = python {
            tries.push(vec![p.display().to_string(), "-m".into(), "bandit".into()]);
        }
    }
    let mut silent = Vec::new();
    for argv in &tries {
        let mut cmd = sage_sandbox::child::command(&argv[0]);
        cmd.args(&argv[1..]).arg("--version").stdin(Stdio::null());
        let tool = argv.join(" ");
        let out = match crate::tool::ask(cmd, &tool, "(asked its --version)", None, wall) {
            Ok(out) => out,
            Err(e @ crate::ToolError::TimedOut { .. }) => {
                silent.push(e.to_string());
                continue;
            }
            Err(_) => continue,
        };
        if !out.status.success() {
            continue;
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let version = text
            .lines()
            .next()
            .and_then(|l| l.split_whitespace().last())
            .unwrap_or("unknown")
            .to_string();
        return Ok(BanditCmd {
            argv: argv.clone(),
            version,
        });
    }
    let mut tried = tries
        .iter()
        .map(|t| t.join(" "))
        .collect::<Vec<_>>()
        .join(", ");
    if !silent.is_empty() {
        tried.push_str(&format!("; {}", silent.join("; ")));
    }
    Err(BanditError::NotFound(tried))
}

/// One Bandit finding, mapped.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub test_id: String,
    pub test_name: String,
    pub severity: String,
    pub confidence: String,
    pub cwe: Option<u32>,
    /// The CWE families of `cwe` (rules' `cwe_families`).
    pub families: Vec<String>,
    /// `cwe` shares a family with the task's target CWE.
    pub target_family: bool,
    /// The same test fires on the same source line in the baseline.
    pub in_baseline: bool,
    pub line: usize,
    pub col: usize,
    pub text: String,
}

impl Finding {
    pub fn high(&self) -> bool {
        self.severity == "HIGH"
    }
}

/// Bandit's findings for one scanned file, or why it could not scan it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FileFindings {
    pub findings: Vec<Finding>,
    pub error: Option<String>,
}

#[derive(Debug, Deserialize)]
struct RawReport {
    #[serde(default)]
    errors: Vec<RawError>,
    #[serde(default)]
    results: Vec<RawResult>,
}

#[derive(Debug, Deserialize)]
struct RawError {
    filename: String,
    reason: String,
}

#[derive(Debug, Deserialize)]
struct RawResult {
    filename: String,
    test_id: String,
    #[serde(default)]
    test_name: String,
    issue_severity: String,
    issue_confidence: String,
    #[serde(default)]
    issue_cwe: serde_json::Value,
    issue_text: String,
    line_number: usize,
    #[serde(default)]
    col_offset: usize,
}

/// One file handed to a batch: a key chosen by the caller and its content.
pub struct BatchFile<'a> {
    pub key: String,
    pub content: &'a str,
}

/// A whole batch's Bandit output, by key, plus the wall time of the one run.
#[derive(Debug, Default)]
pub struct BatchResult {
    pub files: BTreeMap<String, FileFindings>,
    pub seconds: f64,
}

/// Run Bandit once over every file of the batch, for at most `wall`; `task` names the batch
/// (its files and cases) in the error of a run that passes it.
pub fn run_batch(
    cmd: &BanditCmd,
    files: &[BatchFile],
    task: &str,
    wall: Duration,
) -> Result<BatchResult, BanditError> {
    let scratch = |what: String| BanditError::Scratch(what);
    let dir = tempfile::tempdir()
        .map_err(|e| scratch(format!("cannot create a scratch directory: {e}")))?;
    // Bandit discovers *.py under -r; each file gets its own numbered folder so that keys
    // (artefact paths) can never collide or escape.
    let mut by_path: BTreeMap<String, String> = BTreeMap::new();
    for (i, f) in files.iter().enumerate() {
        let sub = dir.path().join(i.to_string());
        std::fs::create_dir_all(&sub).map_err(|e| scratch(format!("{}: {e}", sub.display())))?;
        let p = sub.join("file.py");
        std::fs::write(&p, f.content).map_err(|e| scratch(format!("{}: {e}", p.display())))?;
        by_path.insert(format!("{i}/file.py"), f.key.clone());
    }
    let start = std::time::Instant::now();
    let mut run = sage_sandbox::child::command(&cmd.argv[0]);
    run.args(&cmd.argv[1..])
        .args(["-r", "-f", "json", "--ignore-nosec", "-q"])
        .arg(dir.path())
        .stdin(Stdio::null());
    let out =
        crate::tool::ask(run, &cmd.argv.join(" "), task, None, wall).map_err(|e| match e {
            crate::ToolError::Start { tool, cause } => BanditError::Spawn { cmd: tool, cause },
            e => BanditError::Killed(e),
        })?;
    let seconds = start.elapsed().as_secs_f64();
    // Exit 0: no findings, 1: findings; anything else is Bandit failing.
    if !matches!(out.status.code(), Some(0) | Some(1)) {
        return Err(BanditError::Failed {
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    let raw: RawReport = serde_json::from_slice(&out.stdout).map_err(|e| BanditError::Report {
        cause: e.to_string(),
        stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
    })?;
    let prefix = format!("{}/", dir.path().display());
    let key_of = |filename: &str| -> Option<String> {
        let rel = filename.strip_prefix(&prefix).unwrap_or(filename);
        by_path.get(rel).cloned()
    };
    let tests = bandit_tests();
    let mut res = BatchResult {
        files: files
            .iter()
            .map(|f| (f.key.clone(), FileFindings::default()))
            .collect(),
        seconds,
    };
    for e in raw.errors {
        if let Some(k) = key_of(&e.filename) {
            res.files.entry(k).or_default().error = Some(e.reason);
        }
    }
    for r in raw.results {
        let Some(k) = key_of(&r.filename) else {
            continue;
        };
        let cwe = r
            .issue_cwe
            .get("id")
            .and_then(|v| v.as_u64())
            .map(|v| v as u32)
            .filter(|v| *v != 0)
            .or_else(|| tests.get(&r.test_id).and_then(|t| t.cwe));
        res.files.entry(k).or_default().findings.push(Finding {
            test_name: if r.test_name.is_empty() || r.test_name == "blacklist" {
                tests
                    .get(&r.test_id)
                    .map(|t| t.name.clone())
                    .unwrap_or(r.test_name)
            } else {
                r.test_name
            },
            test_id: r.test_id,
            severity: r.issue_severity,
            confidence: r.issue_confidence,
            cwe,
            families: Vec::new(),
            target_family: false,
            in_baseline: false,
            line: r.line_number.max(1),
            col: r.col_offset + 1,
            text: r.issue_text,
        });
    }
    Ok(res)
}

/// Mark the findings of `final_src` that the baseline already had (same test on a line with
/// the same text).
pub(crate) fn mark_inherited(
    findings: &mut [Finding],
    final_src: &str,
    baseline: &[Finding],
    baseline_src: &str,
) {
    let line_of = |src: &str, n: usize| src.lines().nth(n - 1).unwrap_or("").trim().to_string();
    let base: Vec<(String, String)> = baseline
        .iter()
        .map(|f| (f.test_id.clone(), line_of(baseline_src, f.line)))
        .collect();
    for f in findings {
        let key = (f.test_id.clone(), line_of(final_src, f.line));
        f.in_baseline = base.contains(&key);
    }
}

/// A `# nosec` marker in the final snapshot that the baseline does not have.
#[derive(Debug, Clone, PartialEq)]
pub struct NosecMarker {
    pub line: usize,
    pub text: String,
}

fn nosec_rx() -> &'static Regex {
    static R: OnceLock<Regex> = OnceLock::new();
    R.get_or_init(|| Regex::new(r"(?i)#\s*nosec\b").expect("static regex"))
}

fn nosec_lines(src: &str) -> Vec<(usize, String)> {
    // Comment nodes only: a "# nosec" inside a string literal silences nothing.
    let file = PyFile::parse(src);
    let q = nosec_query();
    file.captures(q)
        .into_iter()
        .filter(|(_, n)| nosec_rx().is_match(file.text(*n)))
        .map(|(_, n)| {
            let row = n.start_position().row;
            (
                row + 1,
                src.lines().nth(row).unwrap_or("").trim().to_string(),
            )
        })
        .collect()
}

fn nosec_query() -> &'static tree_sitter::Query {
    static Q: OnceLock<tree_sitter::Query> = OnceLock::new();
    Q.get_or_init(|| crate::py::query("(comment) @c"))
}

/// `# nosec` markers present in the final snapshot and absent from the baseline.
pub(crate) fn nosec_added(final_src: &str, baseline_src: Option<&str>) -> Vec<NosecMarker> {
    if !final_src.contains("nosec") && !final_src.contains("NOSEC") {
        return Vec::new();
    }
    let mut base: Vec<String> = baseline_src
        .map(|b| nosec_lines(b).into_iter().map(|(_, t)| t).collect())
        .unwrap_or_default();
    let mut out = Vec::new();
    for (line, text) in nosec_lines(final_src) {
        if let Some(i) = base.iter().position(|b| *b == text) {
            base.swap_remove(i);
        } else {
            out.push(NosecMarker { line, text });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_has_the_23_cwes() {
        let t = bandit_tests();
        assert_eq!(t.len(), 75);
        let cwes: std::collections::BTreeSet<u32> = t.values().filter_map(|x| x.cwe).collect();
        assert_eq!(cwes.len(), 23);
        assert_eq!(t["B602"].cwe, Some(78));
    }

    #[test]
    fn added_nosec_markers() {
        let base = "import os\nos.system(x)  # nosec\n";
        let fin = "import os\nos.system(x)  # nosec\neval(y)  #nosec B307\ns = '# nosec'\n";
        let a = nosec_added(fin, Some(base));
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].line, 3);
        assert!(nosec_added(base, Some(base)).is_empty());
        assert_eq!(nosec_added(base, None).len(), 1);
    }

    #[test]
    fn inherited_findings() {
        let mk = |line| Finding {
            test_id: "B605".into(),
            test_name: String::new(),
            severity: "HIGH".into(),
            confidence: "HIGH".into(),
            cwe: Some(78),
            families: vec![],
            target_family: false,
            in_baseline: false,
            line,
            col: 1,
            text: String::new(),
        };
        let mut f = vec![mk(3)];
        mark_inherited(&mut f, "a\nb\nos.system(c)\n", &[mk(1)], "os.system(c)\n");
        assert!(f[0].in_baseline);
    }
}
