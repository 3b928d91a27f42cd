//! Labelled SZZ datasets: the four formats under `../shared/szz/datasets`, read into one
//! shape, (repository, fixing commit, inducing commits).
//!
//! | format | file | record |
//! |---|---|---|
//! | V-SZZ | `verified_cve_with_versions_{C,Java}.json` | `{project, cve_id, fixing_details:[{fixing_commit, inducing_commits:[{commit_id, is_true_inducing}]}]}` |
//! | Rosa (DS_GITHUB) | `bugfix_commits_*.json` | `{id, repo_name, fix_commit_hash, bug_commit_hash:[…], language}` |
//! | MAS-SZZ per-fix | `DS_{VSZZ,JAVA}_per_fix.json` | `{cveid, repo_name, fix_commit_hashes:[…], bug_commit_hash, bug_commit_hashes?}` |
//! | Hinrichs | `tool_assisted_manual_dataset.json` | `{cve, repository (URL), fixing:[…], introducing}` |
//!
//! Hashes may be truncated (Hinrichs and MAS-SZZ's Java set have 39- and 6-character fix
//! hashes): they are kept as given and resolved by prefix against the repository at
//! evaluation time. Repository names are normalized to `owner/name`.

use crate::SzzError;
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// The V-SZZ project → repository table (V-SZZ records name the project only).
pub const VSZZ_PROJECTS: &str = include_str!("../data/szz-vszz-projects.tsv");

/// Which loader read the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DatasetFormat {
    Vszz,
    Rosa,
    MasSzz,
    Hinrichs,
}

impl DatasetFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            DatasetFormat::Vszz => "v-szz",
            DatasetFormat::Rosa => "rosa",
            DatasetFormat::MasSzz => "mas-szz",
            DatasetFormat::Hinrichs => "hinrichs",
        }
    }
}

/// One labelled fix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelledFix {
    /// CVE id or dataset id.
    pub id: String,
    /// `owner/name` (or a bare project name when no mapping is known).
    pub repo: String,
    /// The fixing commit as the dataset gives it (possibly truncated).
    pub fix: String,
    /// The inducing commits (possibly truncated).
    pub inducing: Vec<String>,
    pub language: Option<String>,
}

/// A loaded dataset, with the records that could not be read.
#[derive(Debug, Clone)]
pub struct Dataset {
    pub path: String,
    pub format: DatasetFormat,
    pub fixes: Vec<LabelledFix>,
    /// One message per unreadable record, naming the file and the record.
    pub problems: Vec<String>,
}

/// Parse a project → repository table (`project<TAB>owner/name`, `#` comments).
pub fn parse_project_map(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| {
            let mut it = l.split('\t');
            let p = it.next()?.trim();
            let r = it.next()?.trim();
            (!p.is_empty() && !r.is_empty()).then(|| (p.to_ascii_lowercase(), r.to_string()))
        })
        .collect()
}

/// Normalize a repository reference to `owner/name`: GitHub URLs (with or without `.git`),
/// Apache gitbox and git-wip-us URLs (`apache/<name>`), `git@host:owner/name.git`.
pub(crate) fn normalize_repo(s: &str) -> String {
    let mut t = s.trim().trim_end_matches('/').to_string();
    if let Some(x) = t.strip_suffix(".git") {
        t = x.to_string();
    }
    for marker in ["/repos/asf/", "/repos/asf?p="] {
        if let Some(i) = t.find(marker) {
            let name = &t[i + marker.len()..];
            let name = name.split(['/', ';']).next().unwrap_or(name);
            return format!("apache/{}", name.trim_end_matches(".git"));
        }
    }
    let t = t
        .split_once("://")
        .map(|(_, rest)| rest.to_string())
        .unwrap_or(t);
    let t = match t.split_once('@') {
        Some((_, rest)) if !rest.contains('@') => rest.replacen(':', "/", 1),
        _ => t,
    };
    let parts: Vec<&str> = t.split('/').filter(|p| !p.is_empty()).collect();
    if parts.len() >= 3 && parts[0].contains('.') {
        // host/owner/name[/...]
        return format!("{}/{}", parts[1], parts[2]);
    }
    if parts.len() >= 2 {
        return format!("{}/{}", parts[parts.len() - 2], parts[parts.len() - 1]);
    }
    t.to_string()
}

/// Load a dataset file, detecting its format from the record keys.
pub fn load(
    path: &Path,
    project_map: Option<&HashMap<String, String>>,
) -> Result<Dataset, SzzError> {
    let text = std::fs::read_to_string(path).map_err(|e| SzzError::Dataset {
        file: path.display().to_string(),
        record: "-".into(),
        msg: e.to_string(),
    })?;
    load_str(&text, &path.display().to_string(), project_map)
}

/// [`load`] on text already read; `name` is used in messages.
pub(crate) fn load_str(
    text: &str,
    name: &str,
    project_map: Option<&HashMap<String, String>>,
) -> Result<Dataset, SzzError> {
    let bad = |msg: String| SzzError::Dataset {
        file: name.to_string(),
        record: "-".into(),
        msg,
    };
    let value: Value = serde_json::from_str(text).map_err(|e| bad(format!("not JSON: {e}")))?;
    let Value::Array(records) = value else {
        return Err(bad("expected a JSON list of records".into()));
    };
    let first = records
        .iter()
        .find_map(Value::as_object)
        .ok_or_else(|| bad("no records".into()))?;
    let format = if first.contains_key("fixing_details") {
        DatasetFormat::Vszz
    } else if first.contains_key("fix_commit_hashes") {
        DatasetFormat::MasSzz
    } else if first.contains_key("fix_commit_hash") && first.contains_key("bug_commit_hash") {
        DatasetFormat::Rosa
    } else if first.contains_key("fixing") && first.contains_key("introducing") {
        DatasetFormat::Hinrichs
    } else {
        return Err(bad(format!(
            "unknown record shape (keys: {})",
            first.keys().cloned().collect::<Vec<_>>().join(", ")
        )));
    };
    let builtin;
    let map = match project_map {
        Some(m) => m,
        None => {
            builtin = parse_project_map(VSZZ_PROJECTS);
            &builtin
        }
    };
    let mut ds = Dataset {
        path: name.to_string(),
        format,
        fixes: Vec::new(),
        problems: Vec::new(),
    };
    for (i, rec) in records.iter().enumerate() {
        let label = record_label(rec, i);
        let r = match format {
            DatasetFormat::Vszz => read_vszz(rec, map),
            DatasetFormat::Rosa => read_rosa(rec),
            DatasetFormat::MasSzz => read_mas(rec),
            DatasetFormat::Hinrichs => read_hinrichs(rec),
        };
        match r {
            Ok(fixes) => ds.fixes.extend(fixes),
            Err(msg) => ds.problems.push(format!("{name}: {label}: {msg}")),
        }
    }
    Ok(ds)
}

fn record_label(rec: &Value, i: usize) -> String {
    for k in ["cve_id", "cveid", "cve", "id"] {
        if let Some(v) = rec.get(k) {
            let v = match v {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            return format!("record {} ({v})", i + 1);
        }
    }
    format!("record {}", i + 1)
}

fn str_field<'a>(rec: &'a Value, key: &str) -> Result<&'a str, String> {
    rec.get(key)
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .ok_or_else(|| format!("missing or empty \"{key}\""))
}

/// A list of hashes given as a JSON list or a single string (comma-separated allowed).
fn hashes(v: Option<&Value>) -> Vec<String> {
    let mut out = Vec::new();
    let mut push = |s: &str| {
        for h in s.split(',') {
            let h = h.trim().to_ascii_lowercase();
            if !h.is_empty() && !out.contains(&h) {
                out.push(h);
            }
        }
    };
    match v {
        Some(Value::String(s)) => push(s),
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).for_each(push),
        _ => {}
    }
    out
}

fn check_hash(h: &str) -> Result<(), String> {
    if h.len() < 4 || h.len() > 64 || !h.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(format!("{h:?} is not a commit hash"));
    }
    Ok(())
}

fn read_vszz(rec: &Value, map: &HashMap<String, String>) -> Result<Vec<LabelledFix>, String> {
    let project = str_field(rec, "project")?;
    let id = str_field(rec, "cve_id")?.to_string();
    let repo = map
        .get(&project.to_ascii_lowercase())
        .cloned()
        .unwrap_or_else(|| project.to_string());
    let details = rec
        .get("fixing_details")
        .and_then(Value::as_array)
        .ok_or("missing \"fixing_details\"")?;
    let mut out = Vec::new();
    for d in details {
        let fix = str_field(d, "fixing_commit")?.to_ascii_lowercase();
        check_hash(&fix)?;
        let inducing: Vec<String> = d
            .get("inducing_commits")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter(|c| {
                        matches!(c.get("is_true_inducing"), Some(Value::String(s)) if s.eq_ignore_ascii_case("true"))
                            || c.get("is_true_inducing") == Some(&Value::Bool(true))
                    })
                    .filter_map(|c| c.get("commit_id").and_then(Value::as_str))
                    .map(|s| s.trim().to_ascii_lowercase())
                    .collect()
            })
            .unwrap_or_default();
        out.push(LabelledFix {
            id: id.clone(),
            repo: repo.clone(),
            fix,
            inducing,
            language: None,
        });
    }
    Ok(out)
}

fn read_rosa(rec: &Value) -> Result<Vec<LabelledFix>, String> {
    let repo = normalize_repo(str_field(rec, "repo_name")?);
    let fix = str_field(rec, "fix_commit_hash")?.to_ascii_lowercase();
    check_hash(&fix)?;
    let inducing = hashes(rec.get("bug_commit_hash"));
    for h in &inducing {
        check_hash(h)?;
    }
    let id = rec
        .get("id")
        .map(|v| v.to_string().trim_matches('"').to_string())
        .unwrap_or_else(|| fix.clone());
    let language = rec.get("language").and_then(|l| match l {
        Value::String(s) => Some(s.clone()),
        Value::Array(a) => Some(
            a.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(","),
        ),
        _ => None,
    });
    Ok(vec![LabelledFix {
        id,
        repo,
        fix,
        inducing,
        language,
    }])
}

fn read_mas(rec: &Value) -> Result<Vec<LabelledFix>, String> {
    let repo = normalize_repo(str_field(rec, "repo_name")?);
    let id = str_field(rec, "cveid")?.to_string();
    let fixes = hashes(rec.get("fix_commit_hashes"));
    if fixes.is_empty() {
        return Err("no \"fix_commit_hashes\"".into());
    }
    let mut inducing = hashes(rec.get("bug_commit_hashes"));
    for h in hashes(rec.get("bug_commit_hash")) {
        if !inducing.contains(&h) {
            inducing.push(h);
        }
    }
    let mut out = Vec::new();
    for f in fixes {
        check_hash(&f)?;
        out.push(LabelledFix {
            id: id.clone(),
            repo: repo.clone(),
            fix: f,
            inducing: inducing.clone(),
            language: None,
        });
    }
    Ok(out)
}

fn read_hinrichs(rec: &Value) -> Result<Vec<LabelledFix>, String> {
    let repo = normalize_repo(str_field(rec, "repository")?);
    let id = str_field(rec, "cve")?.to_string();
    let inducing = hashes(rec.get("introducing"));
    let fixes = hashes(rec.get("fixing"));
    if fixes.is_empty() {
        return Err("no \"fixing\" commits".into());
    }
    let mut out = Vec::new();
    for f in fixes {
        check_hash(&f)?;
        out.push(LabelledFix {
            id: id.clone(),
            repo: repo.clone(),
            fix: f,
            inducing: inducing.clone(),
            language: Some("java".into()),
        });
    }
    Ok(out)
}

/// Find a local copy of `repo` (`owner/name` or a bare project name) under `dir`. Tried, in
/// order and case-insensitively: `owner/name`, `owner+name`, `owner_name`, `name`, each
/// also with `.git`, and each also with a `repo` subdirectory (the mirror layout).
pub fn find_repo(dir: &Path, repo: &str) -> Option<PathBuf> {
    let (owner, name) = match repo.split_once('/') {
        Some((o, n)) => (Some(o), n),
        None => (None, repo),
    };
    let mut rels: Vec<Vec<String>> = Vec::new();
    if let Some(o) = owner {
        rels.push(vec![o.into(), name.into()]);
        rels.push(vec![o.into(), format!("{name}.git")]);
        rels.push(vec![format!("{o}+{name}")]);
        rels.push(vec![format!("{o}+{name}.git")]);
        rels.push(vec![format!("{o}_{name}")]);
        rels.push(vec![format!("{o}_{name}.git")]);
    }
    rels.push(vec![name.into()]);
    rels.push(vec![format!("{name}.git")]);
    for rel in rels {
        let mut p = dir.to_path_buf();
        let mut ok = true;
        for part in &rel {
            match child_ci(&p, part) {
                Some(c) => p = c,
                None => {
                    ok = false;
                    break;
                }
            }
        }
        if !ok {
            continue;
        }
        if let Some(inner) = child_ci(&p, "repo") {
            if looks_like_git(&inner) {
                return Some(inner);
            }
        }
        if looks_like_git(&p) {
            return Some(p);
        }
    }
    None
}

fn child_ci(dir: &Path, name: &str) -> Option<PathBuf> {
    let exact = dir.join(name);
    if exact.is_dir() {
        return Some(exact);
    }
    let lower = name.to_ascii_lowercase();
    std::fs::read_dir(dir).ok()?.flatten().find_map(|e| {
        (e.file_name().to_string_lossy().to_ascii_lowercase() == lower && e.path().is_dir())
            .then(|| e.path())
    })
}

fn looks_like_git(p: &Path) -> bool {
    p.join(".git").exists() || (p.join("HEAD").is_file() && p.join("objects").is_dir())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_repository_urls() {
        for (input, want) in [
            ("https://github.com/apache/struts.git", "apache/struts"),
            ("https://github.com/apache/struts", "apache/struts"),
            (
                "https://gitbox.apache.org/repos/asf/tapestry-5",
                "apache/tapestry-5",
            ),
            (
                "https://git-wip-us.apache.org/repos/asf/camel.git",
                "apache/camel",
            ),
            ("git@github.com:square/okhttp.git", "square/okhttp"),
            ("square/okhttp", "square/okhttp"),
            ("https://github.com/x-stream/xstream/", "x-stream/xstream"),
        ] {
            assert_eq!(normalize_repo(input), want, "{input}");
        }
    }

    #[test]
    fn project_map_is_read() {
        let m = parse_project_map(VSZZ_PROJECTS);
        assert_eq!(m["imagemagick"], "ImageMagick/ImageMagick");
        assert_eq!(m["linux-kernel"], "torvalds/linux");
    }

    #[test]
    fn bad_records_are_reported_not_fatal() {
        let text = r#"[{"id": 1, "repo_name": "a/b", "fix_commit_hash": "abcdef12", "bug_commit_hash": ["1234abcd"]},
                       {"id": 2, "repo_name": "a/b", "fix_commit_hash": "not-a-hash", "bug_commit_hash": []},
                       {"id": 3, "fix_commit_hash": "abcd", "bug_commit_hash": []}]"#;
        let ds = load_str(text, "x.json", None).unwrap();
        assert_eq!(ds.format, DatasetFormat::Rosa);
        assert_eq!(ds.fixes.len(), 1);
        assert_eq!(ds.problems.len(), 2);
        assert!(
            ds.problems[0].starts_with("x.json: record 2 (2): "),
            "{}",
            ds.problems[0]
        );
        assert!(load_str("{}", "y.json", None).is_err());
        assert!(load_str("[{\"q\": 1}]", "y.json", None).is_err());
    }
}
