//! L1: functional validation. The functions and classes the baseline defines are preserved
//! (by qualified name), the imports resolve, and the task's tests pass when the case has them.

use crate::py::{self, Import, PyFile};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};
use tree_sitter::Node;

/// Top-level module names of the Python 3 standard library.
pub const STDLIB: &str = include_str!("../rules/python_stdlib.txt");

/// Distribution name → import name, for requirement lists whose names differ from the
/// module they install (`rules/python_dist_modules.tsv`; everything else maps `A-b` → `a_b`).
pub const DIST_MODULES: &str = include_str!("../rules/python_dist_modules.tsv");

/// The rows of [`DIST_MODULES`]: (normalized distribution, module).
fn dist_modules() -> &'static [(String, String)] {
    static M: std::sync::OnceLock<Vec<(String, String)>> = std::sync::OnceLock::new();
    M.get_or_init(|| {
        DIST_MODULES
            .lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
            .filter_map(|l| {
                let (d, m) = l.split_once('\t')?;
                Some((d.trim().to_string(), m.trim().to_string()))
            })
            .collect()
    })
}

/// The standard library as a set.
pub fn stdlib() -> HashSet<String> {
    STDLIB
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(String::from)
        .collect()
}

/// Module names a requirements file provides (top-level import names).
pub fn parse_requirements(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() || line.starts_with('-') {
            continue;
        }
        let name: String = line
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            .collect();
        if name.is_empty() {
            continue;
        }
        let norm = name.to_ascii_lowercase().replace(['-', '.'], "_");
        match dist_modules().iter().find(|(d, _)| *d == norm) {
            Some((_, m)) => out.insert(m.to_string()),
            None => out.insert(norm),
        };
    }
    out
}

// ------------------------------------------------------------------ definitions

/// Qualified names of the module's functions and classes: top-level definitions and class
/// members (`Class.method`, `Outer.Inner`). Functions local to a function body are not part
/// of the file's interface and are not listed.
pub fn definitions(file: &PyFile) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    collect_defs(file, file.root(), "", &mut out);
    out
}

fn collect_defs(file: &PyFile, n: Node, prefix: &str, out: &mut BTreeSet<String>) {
    for k in py::named_children(n) {
        let def = if k.kind() == "decorated_definition" {
            match k.child_by_field_name("definition") {
                Some(d) => d,
                None => continue,
            }
        } else {
            k
        };
        match def.kind() {
            "function_definition" | "class_definition" => {
                let Some(name) = def.child_by_field_name("name") else {
                    continue;
                };
                let q = format!("{prefix}{}", file.text(name));
                if def.kind() == "class_definition" {
                    if let Some(body) = def.child_by_field_name("body") {
                        collect_defs(file, body, &format!("{q}."), out);
                    }
                }
                out.insert(q);
            }
            // Definitions under module-level (or class-level) control flow still count.
            "if_statement" | "try_statement" | "with_statement" | "for_statement"
            | "while_statement" | "block" | "else_clause" | "elif_clause" | "except_clause"
            | "finally_clause" => collect_defs(file, def, prefix, out),
            _ => {}
        }
    }
}

/// Baseline definitions absent from the final snapshot.
pub fn missing_definitions(baseline: &PyFile, final_file: &PyFile) -> Vec<String> {
    let have = definitions(final_file);
    definitions(baseline)
        .into_iter()
        .filter(|d| !have.contains(d))
        .collect()
}

// ------------------------------------------------------------------ imports

/// One imported module as the final snapshot uses it.
#[derive(Debug, Clone, PartialEq)]
pub struct ImportUse {
    /// The module path as imported (`os.path`, `flask`).
    pub module: String,
    /// Its top-level package.
    pub top: String,
    pub line: usize,
    pub col: usize,
    /// Inside `try: ... except ImportError` (a fallback the code expects may fail).
    pub optional: bool,
}

/// Absolute imports of a file (relative imports name the project's own modules).
pub fn imports(file: &PyFile) -> Vec<ImportUse> {
    let q = import_query();
    let mut out = Vec::new();
    for (_, stmt) in file.captures(q) {
        let (line, col) = py::position(file, stmt);
        let optional = guarded_by_import_error(file, stmt);
        for imp in py::imports_of(file, stmt) {
            let module = match imp {
                Import::Module { module, .. } => module,
                Import::From {
                    module: Some(m),
                    level: 0,
                    ..
                }
                | Import::Star {
                    module: Some(m),
                    level: 0,
                } => m,
                _ => continue,
            };
            let top = module.split('.').next().unwrap_or("").to_string();
            if top.is_empty() {
                continue;
            }
            out.push(ImportUse {
                module,
                top,
                line,
                col,
                optional,
            });
        }
    }
    out
}

fn import_query() -> &'static tree_sitter::Query {
    static Q: std::sync::OnceLock<tree_sitter::Query> = std::sync::OnceLock::new();
    Q.get_or_init(|| {
        py::query("(import_statement) @i (import_from_statement) @i (future_import_statement) @i")
    })
}

fn guarded_by_import_error(file: &PyFile, n: Node) -> bool {
    let mut cur = n;
    while let Some(p) = cur.parent() {
        if p.kind() == "try_statement" {
            let body = p.child_by_field_name("body");
            if body
                .is_some_and(|b| b.start_byte() <= n.start_byte() && n.end_byte() <= b.end_byte())
            {
                let handles = py::named_children(p).into_iter().any(|c| {
                    c.kind() == "except_clause" && {
                        let t = file.text(c);
                        let head = t.split(':').next().unwrap_or("");
                        head.trim() == "except"
                            || head.contains("ImportError")
                            || head.contains("ModuleNotFoundError")
                            || head.contains("Exception")
                    }
                });
                if handles {
                    return true;
                }
            }
        }
        cur = p;
    }
    false
}

/// How an import was (or was not) resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    Stdlib,
    /// One of the case's own artefacts.
    Local,
    /// The baseline imports it: the task's environment provides it.
    Baseline,
    Requirements,
    /// `importlib.util.find_spec` found it in the given interpreter.
    Interpreter,
    /// Not found where we looked (fails L1).
    Unresolved,
    /// Not stdlib, not in the baseline, and no environment was given to check it against
    /// (`--python` or `--requirements`): reported, does not fail L1.
    Unverified,
}

/// What import resolution may consult.
#[derive(Debug, Clone, Default)]
pub struct ImportEnv {
    pub stdlib: HashSet<String>,
    pub requirements: Option<BTreeSet<String>>,
    /// Top-level module → found, from one interpreter query per batch.
    pub interpreter: Option<BTreeMap<String, bool>>,
}

impl ImportEnv {
    pub fn resolve(
        &self,
        imp: &ImportUse,
        local: &BTreeSet<String>,
        baseline: &BTreeSet<String>,
    ) -> Resolution {
        if self.stdlib.contains(&imp.top) {
            return Resolution::Stdlib;
        }
        if local.contains(&imp.top) {
            return Resolution::Local;
        }
        if baseline.contains(&imp.top) {
            return Resolution::Baseline;
        }
        if self
            .requirements
            .as_ref()
            .is_some_and(|r| r.contains(&imp.top))
        {
            return Resolution::Requirements;
        }
        if let Some(found) = self.interpreter.as_ref().and_then(|m| m.get(&imp.top)) {
            if *found {
                return Resolution::Interpreter;
            }
        }
        if self.requirements.is_none() && self.interpreter.is_none() {
            Resolution::Unverified
        } else {
            Resolution::Unresolved
        }
    }
}

/// Ask `python` which of `modules` it can find, in one subprocess.
pub(crate) fn query_interpreter(
    python: &Path,
    modules: &BTreeSet<String>,
    task: &str,
    wall: Duration,
) -> Result<BTreeMap<String, bool>, String> {
    const PROG: &str = "import sys, json, importlib.util\n\
        out = {}\n\
        for m in json.load(sys.stdin):\n\
        \x20   try:\n\
        \x20       out[m] = importlib.util.find_spec(m) is not None\n\
        \x20   except Exception:\n\
        \x20       out[m] = False\n\
        json.dump(out, sys.stdout)\n";
    let mut cmd = sage_sandbox::child::command(python);
    cmd.args(["-I", "-c", PROG]);
    let list = serde_json::to_string(&modules.iter().collect::<Vec<_>>()).unwrap_or_default();
    let tool = python.display().to_string();
    let out = crate::tool::ask(cmd, &tool, task, Some(list.into_bytes()), wall)
        .map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "{} failed ({}): {}",
            python.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("{}: unexpected output: {e}", python.display()))
}

// ------------------------------------------------------------------ tests

/// The outcome of a case's tests.
#[derive(Debug, Clone, PartialEq)]
pub struct TestOutcome {
    /// `passed`, `failed`, `timeout` or `error` (could not start).
    pub status: String,
    pub exit_code: Option<i32>,
    pub seconds: f64,
    /// The last lines of the output, for the report.
    pub tail: String,
}

impl TestOutcome {
    pub fn passed(&self) -> bool {
        self.status == "passed"
    }
}

/// Whether `unshare --user --map-root-user --net` works here: the tests of a case then run
/// without network (their own network namespace holds only a loopback that is down). Probed
/// once.
pub(crate) fn network_isolation() -> Result<(), String> {
    static PROBE: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    PROBE
        .get_or_init(|| {
            if !cfg!(target_os = "linux") {
                return Err("network isolation needs Linux namespaces".into());
            }
            let mut probe = sage_sandbox::child::command("unshare");
            probe
                .args(["--user", "--map-root-user", "--net", "--", "true"])
                .stdin(Stdio::null());
            let task = "(probing for a network namespace)";
            match crate::tool::ask(probe, "unshare", task, None, crate::tool::PROBE_TIMEOUT) {
                Ok(o) if o.status.success() => Ok(()),
                Ok(o) => Err(format!(
                    "unshare cannot create a network namespace here ({})",
                    String::from_utf8_lossy(&o.stderr).trim()
                )),
                Err(e @ crate::ToolError::Start { .. }) => {
                    Err(format!("unshare is not available ({e})"))
                }
                Err(e) => Err(format!(
                    "unshare cannot create a network namespace here ({e})"
                )),
            }
        })
        .clone()
}

/// How a case's tests are run, in words (what `sage screen --run-tests` prints before it
/// runs them).
pub fn sandbox_description(timeout: Duration) -> String {
    format!(
        "in a scratch copy, timeout {}s, environment cleared, {}",
        timeout.as_secs_f64(),
        match network_isolation() {
            Ok(()) => "no network".to_string(),
            Err(e) => format!("WITH network: {e}"),
        }
    )
}

/// Run `command` in a fresh scratch directory holding `files` (relative path → content),
/// killing it (and everything it started) after `timeout`. `{python}` in the command is
/// replaced by `python`.
///
/// The command is the case's own program, so it runs with as little as the platform allows:
/// a cleared environment (no API key or token is inherited: `PATH` as given (the CLI's own), `LANG` and a `HOME` and
/// `TMPDIR` inside the scratch folder only), its own process group, and without network
/// where Linux user and network namespaces are available ([`network_isolation`]).
pub fn run_tests(
    command: &[String],
    files: &BTreeMap<String, Vec<u8>>,
    python: &Path,
    timeout: Duration,
    path: Option<&std::ffi::OsStr>,
) -> TestOutcome {
    let start = Instant::now();
    let fail = |status: &str, msg: String| TestOutcome {
        status: status.into(),
        exit_code: None,
        seconds: start.elapsed().as_secs_f64(),
        tail: msg,
    };
    let Some((prog, args)) = command.split_first() else {
        return fail("error", "tests.command is empty".into());
    };
    let dir = match tempfile::tempdir() {
        Ok(d) => d,
        Err(e) => return fail("error", format!("cannot create a scratch directory: {e}")),
    };
    for (rel, content) in files {
        let Some(p) = safe_join(dir.path(), rel) else {
            return fail(
                "error",
                format!("refusing path {rel:?} outside the scratch directory"),
            );
        };
        if let Some(parent) = p.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        if let Err(e) = std::fs::write(&p, content) {
            return fail("error", format!("cannot write {rel}: {e}"));
        }
    }
    let subst = |s: &String| s.replace("{python}", &python.display().to_string());
    let log = dir.path().join(".sage-test-output");
    let Ok(logf) = std::fs::File::create(&log) else {
        return fail("error", "cannot create the output log".into());
    };
    let Ok(logf2) = logf.try_clone() else {
        return fail("error", "cannot create the output log".into());
    };
    let mut cmd = if network_isolation().is_ok() {
        let mut c = sage_sandbox::child::command("unshare");
        c.args(["--user", "--map-root-user", "--net", "--"])
            .arg(subst(prog));
        c
    } else {
        sage_sandbox::child::command(subst(prog))
    };
    cmd.args(args.iter().map(subst))
        .current_dir(dir.path())
        .env_clear()
        .env("HOME", dir.path())
        .env("TMPDIR", dir.path())
        .env("LANG", "C.UTF-8")
        .stdin(Stdio::null())
        .stdout(logf)
        .stderr(logf2);
    if let Some(path) = path {
        cmd.env("PATH", path);
    }
    // the one bounded runner: its own process group, so the timeout ends whatever the tests
    // started; their output goes to the log
    let ran = match sage_sandbox::child::run(cmd, timeout, sage_sandbox::child::Capture::Nothing) {
        Ok(r) => r,
        Err(e) => return fail("error", format!("cannot run {prog}: {e}")),
    };
    let status = match ran.end {
        sage_sandbox::child::End::Exited(s) => Some(s),
        _ => None,
    };
    // whatever the tests left running in the background ends with them
    sage_sandbox::child::kill_group(ran.pid);
    let out = std::fs::read(&log).unwrap_or_default();
    let text = String::from_utf8_lossy(&out);
    let lines: Vec<&str> = text.lines().collect();
    let tail = lines[lines.len().saturating_sub(15)..].join("\n");
    TestOutcome {
        status: match status {
            Some(s) if s.success() => "passed",
            Some(_) => "failed",
            None => "timeout",
        }
        .into(),
        exit_code: status.and_then(|s| s.code()),
        seconds: start.elapsed().as_secs_f64(),
        tail,
    }
}

/// `base/rel` when `rel` stays inside `base` (the one helper, `sage_trace::safe::safe_join`).
pub fn safe_join(base: &Path, rel: &str) -> Option<PathBuf> {
    sage_trace::safe::safe_join(base, rel)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qualified_definitions() {
        let f = PyFile::parse(
            "class A:\n    def m(self):\n        def local(): pass\n    class B:\n        def n(self): pass\n\n@dec\ndef f(): pass\nif True:\n    def g(): pass\n",
        );
        let d: Vec<String> = definitions(&f).into_iter().collect();
        assert_eq!(d, ["A", "A.B", "A.B.n", "A.m", "f", "g"]);
        let g = PyFile::parse("class A:\n    pass\ndef f(): pass\n");
        assert_eq!(missing_definitions(&f, &g), ["A.B", "A.B.n", "A.m", "g"]);
    }

    #[test]
    fn imports_and_resolution() {
        let f = PyFile::parse(
            "import os.path\nfrom flask import request\nfrom . import local\ntry:\n    import ujson\nexcept ImportError:\n    ujson = None\nimport helpers\nimport requests\n",
        );
        let i = imports(&f);
        let tops: Vec<&str> = i.iter().map(|x| x.top.as_str()).collect();
        assert_eq!(tops, ["os", "flask", "ujson", "helpers", "requests"]);
        assert!(i[2].optional && !i[0].optional);
        let env = ImportEnv {
            stdlib: stdlib(),
            requirements: Some(parse_requirements("Flask>=2\n# c\nPyYAML==6\n")),
            interpreter: None,
        };
        let local: BTreeSet<String> = ["helpers".to_string()].into();
        let base = BTreeSet::new();
        let r: Vec<Resolution> = i.iter().map(|x| env.resolve(x, &local, &base)).collect();
        assert_eq!(
            r,
            [
                Resolution::Stdlib,
                Resolution::Requirements,
                Resolution::Unresolved,
                Resolution::Local,
                Resolution::Unresolved
            ]
        );
        let none = ImportEnv {
            stdlib: stdlib(),
            ..Default::default()
        };
        assert_eq!(none.resolve(&i[4], &local, &base), Resolution::Unverified);
        assert!(parse_requirements("PyYAML\n").contains("yaml"));
    }

    #[test]
    fn tests_run_with_timeout_in_scratch_dir() {
        let py = PathBuf::from("python3");
        let files: BTreeMap<String, Vec<u8>> = [(
            "t.py".to_string(),
            b"import sys; sys.exit(0 if open('t.py') else 1)".to_vec(),
        )]
        .into();
        let ok = run_tests(
            &["{python}".into(), "t.py".into()],
            &files,
            &py,
            Duration::from_secs(20),
            std::env::var_os("PATH").as_deref(),
        );
        if ok.status == "error" {
            eprintln!("python3 not available; skipping: {}", ok.tail);
            return;
        }
        assert!(ok.passed(), "{ok:?}");
        let slow = run_tests(
            &[
                "{python}".into(),
                "-c".into(),
                "import time; time.sleep(30)".into(),
            ],
            &BTreeMap::new(),
            &py,
            Duration::from_millis(300),
            std::env::var_os("PATH").as_deref(),
        );
        assert_eq!(slow.status, "timeout");
        assert!(safe_join(Path::new("/x"), "../etc").is_none());
    }
}
