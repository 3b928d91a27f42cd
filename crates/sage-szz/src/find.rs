//! One entry point for every variant: load the fix, run the classic variant or the agentic
//! tracer, and record the cost of the run.

use crate::oracle::SzzOracle;
use crate::variants::{classic, load_fix, Options};
use crate::{Git, SzzError, SzzResult, Variant};
use std::time::Instant;

/// Run one variant on one fix. `oracle` is needed by [`Variant::Agent`] only.
pub fn find_inducing(
    git: &Git,
    fix: &str,
    variant: Variant,
    opts: &Options,
    oracle: Option<&dyn SzzOracle>,
) -> Result<SzzResult, SzzError> {
    let start = Instant::now();
    let calls0 = git.calls();
    let fix = load_fix(git, fix)?;
    let mut result = SzzResult {
        variant,
        fix: fix.hash.clone(),
        candidates: Vec::new(),
        selected: None,
        ignored: Vec::new(),
        chains: Vec::new(),
        notes: Vec::new(),
        agent: None,
        git_calls: 0,
        elapsed_ms: 0,
    };
    if variant == Variant::Agent {
        let oracle =
            oracle.ok_or_else(|| SzzError::Other("the agent variant needs an oracle".into()))?;
        crate::agent::run(git, &fix, opts, oracle, &mut result)?;
    } else {
        classic(git, &fix, variant, opts, &mut result)?;
    }
    result.git_calls = git.calls() - calls0;
    result.elapsed_ms = start.elapsed().as_millis() as u64;
    Ok(result)
}
