//! SZZ on a git history: given a fixing commit (and optionally a CVE description), which
//! commit introduced the bug or vulnerability?
//!
//! - [`git`]: the `git` binary with a timeout on every call, on a working tree or a bare
//!   repository; [`blame`]: `git blame --porcelain`; [`diff`]: a commit's patch, parsed.
//! - [`variants`]: B-SZZ, AG-SZZ, MA-SZZ, R-SZZ, L-SZZ and V-SZZ's walk-back, following
//!   PySZZ's conventions (see `docs/szz.md`).
//! - [`agent`]: the agentic tracer (MAS-SZZ stages, AgentSZZ tools) driven by an
//!   [`oracle::SzzOracle`]; [`oracle::LexiconOracle`] works offline.
//! - [`dataset`] and [`eval`]: the four labelled dataset formats and Rosa et al.'s
//!   pair-level precision, recall and F1.

pub mod agent;
pub mod bench;
pub mod blame;
pub mod comments;
pub mod dataset;
pub mod diff;
pub mod eval;
mod find;
pub mod git;
pub mod oracle;
pub mod oracle_data;
pub mod schema;
pub mod tools;
pub mod variants;

mod error;
mod model;
mod report;

pub use error::SzzError;
pub use find::find_inducing;
pub use git::{open, Git};
pub use model::{Candidate, Chain, LineRef, SzzResult, Variant};
pub use variants::Options;

/// What a thread returned; its panic goes on in the thread that waits for it.
pub(crate) fn joined<T>(result: std::thread::Result<T>) -> T {
    match result {
        Ok(v) => v,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// Each distinct item with how many times it occurs, in order of first appearance (runs of
/// one item, the common case, cost a comparison each, not a hash).
pub(crate) fn tally<K: Copy + Eq + std::hash::Hash>(
    items: impl IntoIterator<Item = K>,
) -> Vec<(K, usize)> {
    let mut counts: Vec<(K, usize)> = Vec::new();
    let mut index: std::collections::HashMap<K, usize> = std::collections::HashMap::new();
    for k in items {
        if let Some(last) = counts.last_mut().filter(|(c, _)| *c == k) {
            last.1 += 1;
            continue;
        }
        match index.get(&k) {
            Some(&i) => counts[i].1 += 1,
            None => {
                index.insert(k, counts.len());
                counts.push((k, 1));
            }
        }
    }
    counts
}
