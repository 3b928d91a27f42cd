//! Why an SZZ run failed.

use std::path::PathBuf;

/// Why an SZZ run could not produce an answer.
#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum SzzError {
    #[error("{path}: not a git repository ({detail})")]
    NotARepo { path: PathBuf, detail: String },
    #[error("{path}: shallow clone; blame would stop at the graft, fetch the full history (git fetch --unshallow)")]
    Shallow { path: PathBuf },
    #[error("unknown commit {rev:?}: {detail}")]
    UnknownCommit { rev: String, detail: String },
    #[error("commit {commit} has no parent: a root commit fixes nothing that blame can trace")]
    NoParent { commit: String },
    #[error("git {args} failed: {stderr}")]
    Git { args: String, stderr: String },
    #[error("git {args} timed out after {secs:.0}s and was killed")]
    Timeout { args: String, secs: f64 },
    #[error("git {args} printed more than {limit} bytes (the cap on a git call's output, --git-max-output-mb) and was killed")]
    OutputTooLarge { args: String, limit: u64 },
    #[error("could not run git: {0}")]
    Spawn(String),
    #[error("{file}: {record}: {msg}")]
    Dataset {
        file: String,
        record: String,
        msg: String,
    },
    #[error("{0}")]
    Other(String),
}
