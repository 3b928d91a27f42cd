//! What a judge may see: the prefix-only request for turn k.

use crate::prefix;
use crate::prefix::PrefixChain;
use sage_trace::case::TaskContext;
use sage_trace::{CanonicalTrace, Turn};
use serde::Serialize;

/// What a judge may see when scoring turn k: the task context and turns 1..=k, nothing else.
#[derive(Debug, Clone, Serialize)]
pub struct TurnRequest<'a> {
    pub task: &'a TaskContext,
    /// Turns 1..=k; the last one is the turn to score.
    pub turns: &'a [Turn],
    /// On a retry: why the previous answer was rejected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub feedback: Option<String>,
    /// The trace's prefix hashes, when the caller computed them once for every turn.
    #[serde(skip)]
    pub(crate) chain: Option<&'a PrefixChain>,
    /// How many turns of the prefix precede `turns[0]` (0 for a request built by
    /// [`TurnRequest::prefix`]; non-zero only for a part made by [`TurnRequest::part`]).
    #[serde(skip)]
    offset: usize,
}

impl<'a> TurnRequest<'a> {
    /// The only constructor: the prefix of `trace` ending at turn `k` (1-based).
    /// Returns `None` when `k` is out of range.
    pub fn prefix(task: &'a TaskContext, trace: &'a CanonicalTrace, k: usize) -> Option<Self> {
        if k == 0 || k > trace.turns.len() {
            return None;
        }
        Some(TurnRequest {
            task,
            turns: &trace.turns[..k],
            feedback: None,
            chain: None,
            offset: 0,
        })
    }

    /// Use the trace's precomputed prefix hashes (`chain` must be [`PrefixChain::new`] of the
    /// same task and trace), so that [`TurnRequest::hash`] costs O(1) instead of O(k).
    pub(crate) fn with_chain(mut self, chain: &'a PrefixChain) -> Self {
        debug_assert!(chain.len() >= self.k());
        self.chain = Some(chain);
        self
    }

    /// Turns `from+1..=to` of this request (1-based, clamped to `1..=k`) as a request of
    /// their own, for rendering part of a prefix (the context digest). It can only narrow the
    /// prefix, never reach past turn k; its `k()` is `to`. A part is rendered, never hashed
    /// as a request of the trace (its hash covers only its own turns).
    pub fn part(&self, from: usize, to: usize) -> TurnRequest<'a> {
        let k = self.k();
        let to = to.clamp(self.offset + 1, k);
        let from = from.clamp(self.offset, to - 1);
        TurnRequest {
            task: self.task,
            turns: &self.turns[from - self.offset..to - self.offset],
            feedback: self.feedback.clone(),
            chain: None,
            offset: from,
        }
    }

    /// The turn being scored.
    pub fn target(&self) -> &'a Turn {
        self.turns.last().expect("a prefix is never empty")
    }

    /// The index of the turn being scored (1-based).
    pub fn k(&self) -> usize {
        self.offset + self.turns.len()
    }

    /// The chained sha256 (hex) of the request's content: task context, turns 1..=k,
    /// feedback ([`prefix`] defines it). O(1) with a chain, O(k) without.
    pub fn hash(&self) -> String {
        let k = self.k();
        let fresh;
        let h = match self.chain.and_then(|c| c.get(k)) {
            Some(h) => h,
            None => {
                fresh = PrefixChain::new(self.task, self.turns);
                fresh
                    .get(self.turns.len())
                    .expect("a prefix is never empty")
            }
        };
        prefix::request_hash(h, self.feedback.as_deref())
    }
}
