//! AgentSZZ's five git tools: blame, show, pickaxe (`log -S`), function log (`log -L`) and
//! grep at a commit. The fix's commit date is enforced as the upper bound of every search,
//! repeated queries are served from a cache, and an output above the size threshold is
//! compressed structurally (diffs keep only file headers, `@@` and `+`/`-` lines; blame
//! keeps one line per commit; trailers such as `Signed-off-by:` are dropped).

use crate::blame::{blame_lines, BlameFlags, BlameLine};
use crate::diff::{file_diff, name_status, ChangeKind, FileDiff};
use crate::git::Git;
use crate::SzzError;
use std::cell::RefCell;
use std::collections::HashMap;

/// One tool call, as recorded in the agent report.
#[derive(Debug, Clone, PartialEq)]
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
            compress(&raw, self.threshold)
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
                    // the pickaxe runs a repository's textconv driver unless told not to
                    "--no-ext-diff",
                    "--no-textconv",
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

/// Keep a tool's output within `threshold` bytes, whole lines only, ending with a note
/// saying how many lines were left out.
pub(crate) fn compress(raw: &str, threshold: usize) -> String {
    let mut out = String::new();
    let mut omitted = 0usize;
    for l in raw.lines() {
        if out.len() + l.len() + 1 > threshold {
            omitted += 1;
            continue;
        }
        out.push_str(l);
        out.push('\n');
    }
    if omitted > 0 {
        out.push_str(&format!("[... {omitted} line(s) omitted by compression]\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compression_keeps_whole_lines_within_the_threshold() {
        let raw: String = (0..100)
            .map(|i| format!("{i:040} 2020-01-01 subject {i}\n"))
            .collect();
        let c = compress(&raw, 1000);
        assert!(c.len() <= 1000 + 60, "{}", c.len());
        assert!(c
            .lines()
            .all(|l| l.ends_with(char::is_numeric) || l.contains("omitted")));
        assert!(c.contains("line(s) omitted by compression"));
        assert_eq!(compress("a\nb\n", 1000), "a\nb\n");
    }
}
