//! Git plumbing: every call runs the `git` binary through `sage_sandbox::child` with a
//! timeout and a cap on what it prints (the process is killed when either is passed), on a
//! working tree or a bare repository. A hostile repository can make `git show` or `git
//! blame` print gigabytes; nothing past the cap is read.
//!
//! git's own output is the reference (gix's blame disagreed with it on up to 1.3% of lines
//! even with rewrite tracking), so nothing here reimplements git.

use crate::SzzError;
use sage_sandbox::child;
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// Default timeout of one git call.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// Default cap on what one git call may print on stdout (`--git-max-output-mb`).
pub const DEFAULT_MAX_OUTPUT: u64 = 256 * 1024 * 1024;

/// What is kept of a git call's stderr (the rest is read and dropped).
const STDERR_KEPT: u64 = 64 * 1024;

/// Configuration passed with `-c` on every call so a user's or repository's settings cannot
/// change what blame and diff report (prefixes, rename detection, diff algorithm, colour), or
/// run anything.
const FIXED_CONFIG: &[&str] = &[
    "core.quotepath=off",
    "color.ui=never",
    "diff.algorithm=myers",
    "diff.renames=true",
    "diff.noprefix=false",
    "diff.mnemonicPrefix=false",
    "diff.relative=false",
    "diff.context=3",
    "blame.markUnblamableLines=false",
    "blame.markIgnoredLines=false",
    "log.showSignature=false",
    "core.pager=cat",
    // A repository is untrusted input: its config must not make a read run a program.
    // (Content-showing commands also pass --no-textconv / --no-ext-diff.)
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
];

/// Commit metadata used by the variants (dates, message, parents).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitInfo {
    pub hash: String,
    pub parents: Vec<String>,
    /// Committer time (Unix seconds): R-SZZ's `committed_date`, V-SZZ's "earliest".
    pub committed: i64,
    /// Author time (Unix seconds).
    pub authored: i64,
    pub author: String,
    pub subject: String,
    pub message: String,
}

impl CommitInfo {
    pub(crate) fn is_merge(&self) -> bool {
        self.parents.len() > 1
    }
    pub fn short(&self) -> &str {
        short(&self.hash)
    }
}

/// The first 12 characters of a hash.
pub fn short(h: &str) -> &str {
    &h[..h.len().min(12)]
}

/// A git repository (working tree or bare) and the timeout of each call.
pub struct Git {
    git_dir: PathBuf,
    timeout: Duration,
    max_output: u64,
    info_cache: RefCell<HashMap<String, CommitInfo>>,
    files_cache: RefCell<HashMap<String, usize>>,
    lines_cache: RefCell<HashMap<String, u64>>,
    calls: RefCell<u64>,
}

impl Git {
    /// Open `path` (a working tree, a subdirectory of one, or a bare repository). Fails on a
    /// path that is not a repository and on a shallow clone (blame would stop at the graft
    /// and report a boundary commit that did not introduce anything).
    pub fn open(path: &Path, timeout: Duration) -> Result<Git, SzzError> {
        if !path.exists() {
            return Err(SzzError::NotARepo {
                path: path.to_path_buf(),
                detail: "no such directory".into(),
            });
        }
        let out = run_raw(
            Some(path),
            None,
            &["rev-parse", "--absolute-git-dir"],
            timeout,
            DEFAULT_MAX_OUTPUT,
        )?;
        if !out.ok {
            return Err(SzzError::NotARepo {
                path: path.to_path_buf(),
                detail: out.stderr.trim().to_string(),
            });
        }
        let git_dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        let git = Git {
            git_dir,
            timeout,
            max_output: DEFAULT_MAX_OUTPUT,
            info_cache: RefCell::default(),
            files_cache: RefCell::default(),
            lines_cache: RefCell::default(),
            calls: RefCell::new(0),
        };
        if git.is_shallow()? {
            return Err(SzzError::Shallow {
                path: path.to_path_buf(),
            });
        }
        Ok(git)
    }

    pub fn git_dir(&self) -> &Path {
        &self.git_dir
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// This handle with a cap of `bytes` on what each git call may print: a call that prints
    /// more is killed and fails with [`SzzError::OutputTooLarge`].
    pub fn with_max_output(mut self, bytes: std::num::NonZeroU64) -> Git {
        self.max_output = bytes.get();
        self
    }

    /// The cap on what each git call may print.
    pub fn max_output(&self) -> std::num::NonZeroU64 {
        std::num::NonZeroU64::new(self.max_output).expect("set from a NonZeroU64 or the default")
    }

    /// How many git processes this handle has started.
    pub fn calls(&self) -> u64 {
        *self.calls.borrow()
    }

    /// A handle on the same repository, with the same limits and caches of its own, for
    /// work on another thread; [`Git::absorb`] counts its calls here when it is done.
    pub(crate) fn fork(&self) -> Git {
        Git {
            git_dir: self.git_dir.clone(),
            timeout: self.timeout,
            max_output: self.max_output,
            info_cache: RefCell::default(),
            files_cache: RefCell::default(),
            lines_cache: RefCell::default(),
            calls: RefCell::new(0),
        }
    }

    /// Count a forked handle's calls as this handle's own, and keep what it learned.
    pub(crate) fn absorb(&self, fork: Git) {
        *self.calls.borrow_mut() += fork.calls();
        fn merge<V>(into: &RefCell<HashMap<String, V>>, from: RefCell<HashMap<String, V>>) {
            let mut into = into.borrow_mut();
            for (k, v) in from.into_inner() {
                into.entry(k).or_insert(v);
            }
        }
        merge(&self.info_cache, fork.info_cache);
        merge(&self.files_cache, fork.files_cache);
        merge(&self.lines_cache, fork.lines_cache);
    }

    /// `git rev-parse --is-shallow-repository`.
    pub(crate) fn is_shallow(&self) -> Result<bool, SzzError> {
        Ok(self.run(&["rev-parse", "--is-shallow-repository"])?.trim() == "true")
    }

    /// Run git and return stdout (lossy UTF-8); a non-zero exit is an error with stderr.
    pub fn run(&self, args: &[&str]) -> Result<String, SzzError> {
        let out = self.run_bytes(args)?;
        Ok(String::from_utf8_lossy(&out).into_owned())
    }

    /// Run git and return stdout as bytes; a non-zero exit is an error with stderr.
    pub(crate) fn run_bytes(&self, args: &[&str]) -> Result<Vec<u8>, SzzError> {
        let out = self.run_status(args)?;
        if !out.ok {
            return Err(SzzError::Git {
                args: args.join(" "),
                stderr: out.stderr.trim().to_string(),
            });
        }
        Ok(out.stdout)
    }

    /// Run git and return the whole outcome, success or not.
    pub(crate) fn run_status(&self, args: &[&str]) -> Result<RawOutput, SzzError> {
        *self.calls.borrow_mut() += 1;
        run_raw(
            None,
            Some(&self.git_dir),
            args,
            self.timeout,
            self.max_output,
        )
    }

    /// Resolve `rev` (a full hash, a unique prefix, a ref) to a full commit hash. A prefix
    /// that git calls ambiguous is resolved when exactly one of the objects is a commit
    /// (datasets truncate hashes to 6 or 39 characters).
    pub fn resolve_commit(&self, rev: &str) -> Result<String, SzzError> {
        let rev = rev.trim();
        if rev.is_empty() || rev.starts_with('-') {
            return Err(SzzError::UnknownCommit {
                rev: rev.to_string(),
                detail: "empty or option-like revision".into(),
            });
        }
        let spec = format!("{rev}^{{commit}}");
        let out = self.run_status(&[
            "rev-parse",
            "--verify",
            "--quiet",
            "--end-of-options",
            &spec,
        ])?;
        if out.ok {
            return Ok(String::from_utf8_lossy(&out.stdout).trim().to_string());
        }
        if rev.len() >= 4 && rev.chars().all(|c| c.is_ascii_hexdigit()) {
            let arg = format!("--disambiguate={}", rev.to_ascii_lowercase());
            if let Ok(list) = self.run(&["rev-parse", &arg]) {
                let objects: Vec<&str> = list.lines().map(str::trim).collect();
                let commits: Vec<&str> = objects
                    .iter()
                    .copied()
                    .filter(|o| {
                        self.run(&["cat-file", "-t", o])
                            .map(|t| t.trim() == "commit")
                            .unwrap_or(false)
                    })
                    .collect();
                if commits.len() == 1 {
                    return Ok(commits[0].to_string());
                }
                if commits.len() > 1 {
                    return Err(SzzError::UnknownCommit {
                        rev: rev.to_string(),
                        detail: format!("ambiguous prefix: {} commits match", commits.len()),
                    });
                }
            }
        }
        Err(SzzError::UnknownCommit {
            rev: rev.to_string(),
            detail: format!("not a commit in {}", self.git_dir.display()),
        })
    }

    /// Metadata of a commit (cached).
    pub(crate) fn commit_info(&self, hash: &str) -> Result<CommitInfo, SzzError> {
        if let Some(i) = self.info_cache.borrow().get(hash) {
            return Ok(i.clone());
        }
        let out = self.run(&[
            "show",
            "-s",
            "--no-show-signature",
            "--format=%H%x00%P%x00%ct%x00%at%x00%an%x00%s%x00%B",
            "--end-of-options",
            hash,
        ])?;
        let parts: Vec<&str> = out.splitn(7, '\0').collect();
        if parts.len() < 7 {
            return Err(SzzError::Git {
                args: format!("show -s {hash}"),
                stderr: "unexpected output".into(),
            });
        }
        let info = CommitInfo {
            hash: parts[0].trim().to_string(),
            parents: parts[1].split_whitespace().map(String::from).collect(),
            committed: parts[2].trim().parse().unwrap_or(0),
            authored: parts[3].trim().parse().unwrap_or(0),
            author: parts[4].to_string(),
            subject: parts[5].to_string(),
            message: parts[6].trim_end().to_string(),
        };
        self.info_cache
            .borrow_mut()
            .insert(hash.to_string(), info.clone());
        if info.hash != hash {
            self.info_cache
                .borrow_mut()
                .insert(info.hash.clone(), info.clone());
        }
        Ok(info)
    }

    /// The content of `path` at `commit`, or `None` when the file does not exist there.
    pub(crate) fn file_at(&self, commit: &str, path: &str) -> Result<Option<Vec<u8>>, SzzError> {
        let spec = format!("{commit}:{path}");
        let out = self.run_status(&["cat-file", "blob", &spec])?;
        if out.ok {
            Ok(Some(out.stdout))
        } else {
            Ok(None)
        }
    }

    /// Number of files a commit modifies, as PyDriller counts `commit.modifications`: the diff
    /// against the first parent with rename detection, against the empty tree for a root
    /// commit, and zero for a merge commit.
    pub(crate) fn modified_files(&self, commit: &str) -> Result<usize, SzzError> {
        if let Some(n) = self.files_cache.borrow().get(commit) {
            return Ok(*n);
        }
        let info = self.commit_info(commit)?;
        let n = if info.is_merge() {
            0
        } else {
            let out = self.run_bytes(&[
                "diff-tree",
                "-r",
                "--root",
                "-M",
                "--no-commit-id",
                "--name-only",
                "-z",
                "--end-of-options",
                commit,
            ])?;
            out.split(|b| *b == 0).filter(|s| !s.is_empty()).count()
        };
        self.files_cache.borrow_mut().insert(commit.to_string(), n);
        Ok(n)
    }

    /// Lines added plus deleted by a commit over all its text files (PyDriller `LinesCount`
    /// for a single commit; merges count zero, binary files count zero).
    pub(crate) fn lines_changed(&self, commit: &str) -> Result<u64, SzzError> {
        if let Some(n) = self.lines_cache.borrow().get(commit) {
            return Ok(*n);
        }
        let info = self.commit_info(commit)?;
        let n = if info.is_merge() {
            0
        } else {
            let out = self.run(&[
                "diff-tree",
                "-r",
                "--root",
                "-M",
                "--no-commit-id",
                "--numstat",
                "--end-of-options",
                commit,
            ])?;
            out.lines()
                .map(|l| {
                    let mut it = l.split('\t');
                    let a = it.next().and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
                    let d = it.next().and_then(|s| s.parse::<u64>().ok()).unwrap_or(0);
                    a + d
                })
                .sum()
        };
        self.lines_cache.borrow_mut().insert(commit.to_string(), n);
        Ok(n)
    }

    /// Commits reachable from `commit` in `git log` order (newest first), `skip` then up to
    /// `count` of them.
    pub(crate) fn rev_list(
        &self,
        commit: &str,
        skip: usize,
        count: usize,
    ) -> Result<Vec<String>, SzzError> {
        let skip = format!("--skip={skip}");
        let count = format!("--max-count={count}");
        Ok(self
            .run(&["rev-list", &skip, &count, "--end-of-options", commit])?
            .lines()
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty())
            .collect())
    }
}

/// The outcome of one git process.
#[derive(Debug, Clone)]
pub struct RawOutput {
    pub ok: bool,
    pub stdout: Vec<u8>,
    pub stderr: String,
}

/// Spawn git with the fixed configuration and wait at most `timeout`, reading at most
/// `max_output` bytes of its stdout (the one bounded runner, `sage_sandbox::child`); on
/// expiry git and whatever it started are killed and [`SzzError::Timeout`] names the
/// command, past the cap likewise and [`SzzError::OutputTooLarge`] names the command and the
/// cap. Of stderr the first [`STDERR_KEPT`] bytes are kept.
fn run_raw(
    cwd: Option<&Path>,
    git_dir: Option<&Path>,
    args: &[&str],
    timeout: Duration,
    max_output: u64,
) -> Result<RawOutput, SzzError> {
    let mut cmd = child::command("git");
    if let Some(dir) = git_dir {
        cmd.arg("--git-dir").arg(dir);
    }
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    cmd.arg("--no-pager");
    for c in FIXED_CONFIG {
        cmd.arg("-c").arg(c);
    }
    cmd.args(args)
        .env("LC_ALL", "C")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_OPTIONAL_LOCKS", "0")
        .stdin(Stdio::null());
    let ran = child::run(
        cmd,
        timeout,
        child::Capture::Apart {
            stdout: max_output,
            stderr: STDERR_KEPT,
        },
    )
    .map_err(|e| SzzError::Spawn(e.to_string()))?;
    match ran.end {
        child::End::OutputCapped => Err(SzzError::OutputTooLarge {
            args: args.join(" "),
            limit: max_output,
        }),
        child::End::TimedOut => Err(SzzError::Timeout {
            args: args.join(" "),
            secs: timeout.as_secs_f64(),
        }),
        child::End::Exited(status) => Ok(RawOutput {
            ok: status.success(),
            stdout: ran.stdout,
            stderr: String::from_utf8_lossy(&ran.stderr).into_owned(),
        }),
    }
}

/// Open a repository with the default git timeout.
pub fn open(
    path: &std::path::Path,
    timeout: Option<std::time::Duration>,
) -> Result<Git, crate::error::SzzError> {
    Git::open(path, timeout.unwrap_or(DEFAULT_TIMEOUT))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hanging_command_is_killed_at_the_timeout() {
        let dir = std::env::temp_dir();
        let r = run_raw(
            Some(&dir),
            None,
            &["-c", "alias.hang=!sleep 30", "hang"],
            Duration::from_millis(300),
            DEFAULT_MAX_OUTPUT,
        );
        match r {
            Err(SzzError::Timeout { args, .. }) => assert!(args.contains("hang")),
            other => panic!("expected a timeout, got {other:?}"),
        }
    }

    #[test]
    fn endless_output_is_cut_at_the_cap_and_the_command_killed() {
        // `yes` prints forever: the call must end at the cap, long before the timeout.
        let dir = std::env::temp_dir();
        let start = std::time::Instant::now();
        let r = run_raw(
            Some(&dir),
            None,
            &["-c", "alias.flood=!yes", "flood"],
            Duration::from_secs(60),
            4096,
        );
        match r {
            Err(e @ SzzError::OutputTooLarge { .. }) => {
                let m = e.to_string();
                assert!(m.contains("flood") && m.contains("4096 bytes"), "{m}");
            }
            other => panic!("expected the cap, got {other:?}"),
        }
        assert!(start.elapsed() < Duration::from_secs(30));
    }

    #[test]
    fn not_a_repository_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let e = Git::open(dir.path(), DEFAULT_TIMEOUT).err().unwrap();
        assert!(matches!(e, SzzError::NotARepo { .. }), "{e}");
        let missing = dir.path().join("nope");
        assert!(Git::open(&missing, DEFAULT_TIMEOUT).is_err());
    }
}
