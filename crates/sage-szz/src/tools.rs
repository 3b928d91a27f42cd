//! AgentSZZ's five git tools: blame, show, pickaxe (`log -S`), function log (`log -L`) and
//! grep at a commit. The fix's commit date is enforced as the upper bound of every search,
//! repeated queries are served from a cache, and an output above the size threshold is
//! compressed structurally (diffs keep only file headers, `@@` and `+`/`-` lines; blame
//! keeps one line per commit; trailers such as `Signed-off-by:` are dropped).

use crate::blame::{blame_lines, BlameFlags, BlameLine};
use crate::diff::{file_diff, name_status, ChangeKind, FileDiff};
use crate::git::{short, Git};
use crate::SzzError;
use serde::Serialize;
use std::cell::RefCell;
use std::collections::HashMap;

/// One tool call, as recorded in the agent report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolCall {
    pub tool: String,
    pub args: String,
    pub raw_bytes: usize,
    pub returned_bytes: usize,
    pub cached: bool,
}

/// The toolbox over one repository and one fix.
pub struct Toolbox<'a> {
    git: &'a Git,
    /// Every search is bounded by the fix: ancestors of it, committed no later than it.
    pub fix: String,
    pub fix_time: i64,
    /// Outputs longer than this (bytes) are compressed.
    pub threshold: usize,
    /// At most this many lines of a list output (log, grep).
    pub max_items: usize,
    cache: RefCell<HashMap<String, String>>,
    blame_cache: RefCell<HashMap<String, Option<BlameLine>>>,
    change_cache: RefCell<HashMap<String, Option<FileDiff>>>,
    pub calls: RefCell<Vec<ToolCall>>,
}

impl<'a> Toolbox<'a> {
    pub fn new(git: &'a Git, fix: &str) -> Result<Self, SzzError> {
        let info = git.commit_info(fix)?;
        Ok(Toolbox {
            git,
            fix: info.hash,
            fix_time: info.committed,
            threshold: 4000,
            max_items: 40,
            cache: RefCell::default(),
            blame_cache: RefCell::default(),
            change_cache: RefCell::default(),
            calls: RefCell::default(),
        })
    }

    fn cached(
        &self,
        tool: &str,
        args: String,
        f: impl FnOnce() -> Result<String, SzzError>,
    ) -> Result<String, SzzError> {
        let key = format!("{tool}\0{args}");
        if let Some(v) = self.cache.borrow().get(&key) {
            self.calls.borrow_mut().push(ToolCall {
                tool: tool.into(),
                args,
                raw_bytes: 0,
                returned_bytes: v.len(),
                cached: true,
            });
            return Ok(v.clone());
        }
        let raw = f()?;
        let out = if raw.len() > self.threshold {
            compress(tool, &raw, self.threshold)
        } else {
            raw.clone()
        };
        self.calls.borrow_mut().push(ToolCall {
            tool: tool.into(),
            args,
            raw_bytes: raw.len(),
            returned_bytes: out.len(),
            cached: false,
        });
        self.cache.borrow_mut().insert(key, out.clone());
        Ok(out)
    }

    /// A revision is allowed when it is the fix or one of its ancestors.
    fn check_bound(&self, rev: &str) -> Result<String, SzzError> {
        let h = self.git.resolve_commit(rev)?;
        if h == self.fix {
            return Ok(h);
        }
        let st = self
            .git
            .run_status(&["merge-base", "--is-ancestor", &h, &self.fix])?;
        if !st.ok {
            return Err(SzzError::Other(format!(
                "{} is not an ancestor of the fix {}: outside the search bound",
                short(&h),
                short(&self.fix)
            )));
        }
        Ok(h)
    }

    /// `git_blame`: lines `start..=end` of `path` at `rev`, one line each as
    /// `<commit> <orig-line> | <text>`.
    pub fn blame(
        &self,
        rev: &str,
        path: &str,
        start: usize,
        end: usize,
    ) -> Result<String, SzzError> {
        let rev = self.check_bound(rev)?;
        self.cached("git_blame", format!("{rev} {path} {start},{end}"), || {
            let lines: Vec<usize> = (start..=end.max(start)).collect();
            let b = blame_lines(self.git, &rev, path, &lines, &BlameFlags::default())?;
            Ok(b.lines
                .iter()
                .map(|l| {
                    format!(
                        "{} {} {}:{} | {}",
                        short(&l.commit),
                        l.final_line,
                        l.orig_path,
                        l.orig_line,
                        l.content
                    )
                })
                .collect::<Vec<_>>()
                .join("\n"))
        })
    }

    /// `git_show`: message and diff of a commit, optionally limited to one path.
    pub fn show(&self, rev: &str, path: Option<&str>) -> Result<String, SzzError> {
        let rev = self.check_bound(rev)?;
        self.cached("git_show", format!("{rev} {}", path.unwrap_or("")), || {
            let mut args = vec![
                "show",
                "--no-color",
                "--no-ext-diff",
                "-M",
                "--format=commit %H%nDate: %cI%n%n%B",
                rev.as_str(),
            ];
            if let Some(p) = path {
                args.push("--");
                args.push(p);
            }
            Ok(strip_trailers(&self.git.run(&args)?))
        })
    }

    /// `git_log_s`: commits (ancestors of the fix, up to its date) whose diff changes the
    /// number of occurrences of `needle` (pickaxe), newest first.
    pub fn log_s(&self, needle: &str, path: Option<&str>) -> Result<String, SzzError> {
        self.cached(
            "git_log_s",
            format!("{needle}\0{}", path.unwrap_or("")),
            || {
                let s = format!("-S{needle}");
                let until = format!("--until={}", self.fix_time);
                let n = format!("--max-count={}", self.max_items);
                let mut args = vec![
                    "log",
                    "--no-color",
                    &s,
                    &until,
                    &n,
                    "--format=%H %cI %s",
                    self.fix.as_str(),
                ];
                if let Some(p) = path {
                    args.push("--");
                    args.push(p);
                }
                Ok(self.git.run(&args)?.trim_end().to_string())
            },
        )
    }

    /// `git_log_func`: the history of function `func` in `path` (`git log -L :func:path`).
    pub fn log_func(&self, func: &str, path: &str) -> Result<String, SzzError> {
        self.cached("git_log_func", format!("{func}\0{path}"), || {
            let l = format!("-L:{func}:{path}");
            let until = format!("--until={}", self.fix_time);
            let n = format!("--max-count={}", self.max_items);
            let out = self.git.run(&[
                "log",
                "--no-color",
                &l,
                &until,
                &n,
                "--format=commit %H %cI %s",
                self.fix.as_str(),
            ])?;
            Ok(strip_trailers(&out))
        })
    }

    /// `git_grep`: fixed-string matches of `needle` at `rev` (an ancestor of the fix).
    pub fn grep(&self, rev: &str, needle: &str, path: Option<&str>) -> Result<String, SzzError> {
        let rev = self.check_bound(rev)?;
        self.cached(
            "git_grep",
            format!("{rev}\0{needle}\0{}", path.unwrap_or("")),
            || {
                let mut args = vec!["grep", "-n", "-F", "-I", "-e", needle, rev.as_str()];
                if let Some(p) = path {
                    args.push("--");
                    args.push(p);
                }
                let st = self.git.run_status(&args)?;
                // exit 1 = no match
                let text = String::from_utf8_lossy(&st.stdout).into_owned();
                Ok(text
                    .lines()
                    .take(self.max_items)
                    .map(|l| l.strip_prefix(&format!("{rev}:")).unwrap_or(l).to_string())
                    .collect::<Vec<_>>()
                    .join("\n"))
            },
        )
    }

    /// Structured blame of one line at `rev` (cached; recorded as a `git_blame` call).
    pub fn blame_line(
        &self,
        rev: &str,
        path: &str,
        line: usize,
    ) -> Result<Option<BlameLine>, SzzError> {
        let key = format!("{rev} {path} {line}");
        if let Some(v) = self.blame_cache.borrow().get(&key) {
            self.record("git_blame", key, 0, true);
            return Ok(v.clone());
        }
        let b = match blame_lines(self.git, rev, path, &[line], &BlameFlags::default()) {
            Ok(b) => b.lines.into_iter().next(),
            Err(SzzError::Git { .. }) => None,
            Err(e) => return Err(e),
        };
        self.record(
            "git_blame",
            key.clone(),
            b.as_ref().map(|l| l.content.len()).unwrap_or(0),
            false,
        );
        self.blame_cache.borrow_mut().insert(key, b.clone());
        Ok(b)
    }

    /// Structured change of `path` (its path in `commit`) by `commit`: kind, old path,
    /// deleted and added lines (cached; recorded as a `git_show` call).
    pub fn file_change(&self, commit: &str, path: &str) -> Result<Option<FileDiff>, SzzError> {
        let key = format!("{commit} {path}");
        if let Some(v) = self.change_cache.borrow().get(&key) {
            self.record("git_show", key, 0, true);
            return Ok(v.clone());
        }
        let files = name_status(self.git, commit)?;
        let fd = match files.iter().find(|f| f.new_path.as_deref() == Some(path)) {
            Some(f) if f.kind == ChangeKind::Added => Some(f.clone()),
            Some(f) => file_diff(self.git, commit, f, 0)?.or_else(|| Some(f.clone())),
            None => None,
        };
        let size = fd
            .as_ref()
            .map(|f| f.hunks.iter().map(|h| h.lines.len()).sum::<usize>())
            .unwrap_or(0);
        self.record("git_show", key.clone(), size, false);
        self.change_cache.borrow_mut().insert(key, fd.clone());
        Ok(fd)
    }

    fn record(&self, tool: &str, args: String, bytes: usize, cached: bool) {
        self.calls.borrow_mut().push(ToolCall {
            tool: tool.into(),
            args,
            raw_bytes: if cached { 0 } else { bytes },
            returned_bytes: bytes,
            cached,
        });
    }

    /// Calls served from the cache and bytes saved by compression.
    pub fn stats(&self) -> (usize, usize, usize) {
        let calls = self.calls.borrow();
        let hits = calls.iter().filter(|c| c.cached).count();
        let saved = calls
            .iter()
            .filter(|c| !c.cached)
            .map(|c| c.raw_bytes.saturating_sub(c.returned_bytes))
            .sum();
        (calls.len(), hits, saved)
    }
}

/// Drop commit trailers that only cost tokens.
pub fn strip_trailers(s: &str) -> String {
    const TRAILERS: &[&str] = &[
        "Signed-off-by:",
        "Reviewed-by:",
        "Acked-by:",
        "Tested-by:",
        "Cc:",
        "Reported-by:",
        "Change-Id:",
        "Co-authored-by:",
    ];
    s.lines()
        .filter(|l| !TRAILERS.iter().any(|t| l.trim_start().starts_with(t)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Structural compression by tool: diffs keep headers, `@@` and changed lines; blame keeps
/// the first line per commit; anything else keeps head and tail. The result ends with a
/// note saying how much was left out.
pub fn compress(tool: &str, raw: &str, threshold: usize) -> String {
    let lines: Vec<&str> = raw.lines().collect();
    let kept: Vec<&str> = match tool {
        "git_show" | "git_log_func" => lines
            .iter()
            .copied()
            .filter(|l| {
                l.starts_with("commit ")
                    || l.starts_with("diff --git")
                    || l.starts_with("@@")
                    || l.starts_with("+++")
                    || l.starts_with("---")
                    || (l.starts_with('+') || l.starts_with('-'))
                    || l.starts_with("Date:")
            })
            .collect(),
        "git_blame" => {
            let mut seen = std::collections::HashSet::new();
            lines
                .iter()
                .copied()
                .filter(|l| seen.insert(l.split(' ').next().unwrap_or("").to_string()))
                .collect()
        }
        _ => lines.clone(),
    };
    let mut out = String::new();
    let mut dropped = 0usize;
    for l in &kept {
        if out.len() + l.len() + 1 > threshold {
            dropped += 1;
            continue;
        }
        out.push_str(l);
        out.push('\n');
    }
    let omitted = lines.len() - kept.len() + dropped;
    if omitted > 0 {
        out.push_str(&format!("[... {omitted} line(s) omitted by compression]\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diff_compression_keeps_changes_only() {
        let mut raw = String::from("commit abc\nDate: x\n\n    long message\nSigned-off-by: a\ndiff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,3 +1,3 @@\n");
        for i in 0..500 {
            raw.push_str(&format!(" context line {i}\n"));
        }
        raw.push_str("-old\n+new\n");
        let c = compress("git_show", &raw, 1000);
        assert!(c.contains("-old\n+new"));
        assert!(!c.contains("context line 10"));
        assert!(c.contains("omitted by compression"));
        assert!(strip_trailers("a\nSigned-off-by: x\nb").eq("a\nb"));
    }

    #[test]
    fn blame_compression_keeps_one_line_per_commit() {
        let raw = "aaa 1 f:1 | x\naaa 2 f:2 | y\nbbb 3 f:3 | z\n";
        let c = compress("git_blame", raw, 10_000);
        assert_eq!(c.lines().count(), 3); // two commits + the omission note
    }
}
