//! The digest line of one turn (see the context digest (`llm::digest`)): its structural facts and the
//! first words of its message, from that turn only; and the per-trace cache of those lines,
//! held by the trace's prefix chain (`PrefixChain`) so that every request of a trace
//! shares them.

use sage_trace::{Turn, TurnKind};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Characters of a turn's message kept in its digest line.
pub(crate) const EXCERPT_CHARS: usize = 100;

/// Tokens assumed for the JSON framing of one block (`{"type":"text","text":""},` and the
/// like); an overestimate is harmless, the final request is measured exactly.
pub(crate) const BLOCK_OVERHEAD_TOKENS: u64 = 8;

pub(crate) fn est(s: &str) -> u64 {
    // About the JSON-escaped length, as the text appears in the request body: quotes,
    // backslashes and control characters take two bytes or more (six for `\u00XX`; counted
    // as six, an overestimate for `\n` and `\t`). The final request is measured exactly.
    let extra: usize = s
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' => 1,
            0..=0x1f => 5,
            _ => 0,
        })
        .sum();
    ((s.len() + extra + 2) as u64).div_ceil(4) + BLOCK_OVERHEAD_TOKENS
}

/// The digest facts of a trace's turns, computed once per trace and shared by every request
/// of it (held by the trace's prefix chain (`PrefixChain`)). It grows only as far as the
/// turns a request hands it, which are never past the request's own prefix: a later turn's
/// line is not even computed before a request reaches that turn.
#[derive(Debug, Default)]
pub struct DigestCache {
    turns: Mutex<Vec<Arc<Facts>>>,
}

impl DigestCache {
    /// The facts of `earlier` (a prefix of the trace's turns, from turn 1), computing the
    /// ones not cached yet.
    pub(crate) fn upto(&self, earlier: &[Turn]) -> Vec<Arc<Facts>> {
        let mut cached = self.turns.lock().unwrap_or_else(|p| p.into_inner());
        // a cache filled from another trace cannot happen (one chain per trace), but a
        // mismatch must never put another turn's line in a request: recompute then
        let consistent = cached.iter().zip(earlier).all(|(f, t)| f.index == t.index);
        if !consistent {
            return earlier.iter().map(|t| Arc::new(Facts::of(t))).collect();
        }
        for t in earlier.iter().skip(cached.len()) {
            cached.push(Arc::new(Facts::of(t)));
        }
        cached[..earlier.len()].to_vec()
    }
}

/// Each turn's rendered block and its token estimate under one rubric (keyed by its version,
/// which covers the templates), computed once per trace and shared by every request that
/// holds the turn whole: a request for turn k would otherwise render and fence every whole
/// turn before it again. Like [`DigestCache`], it holds only turns some request handed it.
#[derive(Debug, Default)]
pub struct BlockCache {
    blocks: Mutex<HashMap<String, Vec<Option<Arc<Block>>>>>,
}

/// A turn's rendered block: (turn index, text, token estimate).
pub(crate) type Block = (usize, String, u64);

impl BlockCache {
    /// The block of turn `t` at position `pos` (0-based) of the trace under rubric `version`,
    /// rendered by `render` when not cached yet.
    pub(crate) fn get(
        &self,
        version: &str,
        pos: usize,
        t: &Turn,
        render: impl FnOnce() -> String,
    ) -> Arc<Block> {
        {
            let cache = self.blocks.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(Some(b)) = cache.get(version).and_then(|v| v.get(pos)) {
                // never another turn's block: a mismatch is rendered afresh
                if b.0 == t.index {
                    return b.clone();
                }
            }
        }
        // rendered outside the lock, so the drivers do not wait on each other's rendering
        let text = render();
        let tokens = est(&text);
        let b = Arc::new((t.index, text, tokens));
        let mut cache = self.blocks.lock().unwrap_or_else(|p| p.into_inner());
        let v = cache.entry(version.to_string()).or_default();
        if v.len() <= pos {
            v.resize(pos + 1, None);
        }
        v[pos] = Some(b.clone());
        b
    }
}

/// What the digest says about one turn: structural facts and the first words of its
/// message, from the canonical turn only; with its line and the line's token estimate.
#[derive(Debug)]
pub struct Facts {
    pub(crate) index: usize,
    pub(crate) actor: String,
    pub(crate) kind: TurnKind,
    pub(crate) calls: Vec<String>,
    pub(crate) results: usize,
    pub(crate) errors: usize,
    pub(crate) writes: Vec<String>,
    pub(crate) excerpt: Option<String>,
    pub(crate) line: String,
    pub(crate) tokens: u64,
}

impl Facts {
    pub(crate) fn of(t: &Turn) -> Facts {
        let mut f = Facts::bare(t);
        f.line = f.render_line();
        f.tokens = est(&f.line);
        f
    }

    fn bare(t: &Turn) -> Facts {
        Facts {
            index: t.index,
            actor: one_line(&t.actor.name, 40),
            kind: t.kind,
            calls: t.tool_calls.iter().map(|c| one_line(&c.name, 40)).collect(),
            results: t.tool_results.len(),
            errors: t.tool_results.iter().filter(|r| r.is_error).count(),
            writes: t
                .writes
                .iter()
                .map(|w| format!("{} ({})", one_line(&w.artefact, 80), w.op.kind()))
                .collect(),
            excerpt: t
                .message
                .as_ref()
                .map(|m| one_line(&m.text, EXCERPT_CHARS))
                .filter(|s| !s.is_empty()),
            line: String::new(),
            tokens: 0,
        }
    }

    fn render_line(&self) -> String {
        let mut s = format!("- {} {} · {}", self.index, self.actor, self.kind.as_str());
        if !self.calls.is_empty() {
            s.push_str(&format!(" · calls: {}", self.calls.join(", ")));
        }
        if self.results > 0 {
            s.push_str(&format!(" · results: {}", self.results));
            if self.errors > 0 {
                s.push_str(&format!(" ({} errors)", self.errors));
            }
        }
        if !self.writes.is_empty() {
            s.push_str(&format!(" · writes: {}", self.writes.join(", ")));
        }
        if let Some(e) = &self.excerpt {
            s.push_str(&format!(" · says: \u{2039}{e}\u{203a}"));
        }
        s
    }
}

/// Whitespace collapsed to single spaces, at most `n` characters (an ellipsis marks a cut),
/// so no trace text can start a line of its own inside the digest.
pub(crate) fn one_line(s: &str, n: usize) -> String {
    // Only the head can survive the cut, so only the head is flattened (a turn's message may
    // be megabytes long, and every request digests every earlier turn).
    let head_end = s.char_indices().nth(n * 4).map_or(s.len(), |(i, _)| i);
    let flat = s[..head_end]
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    if flat.chars().count() <= n && head_end == s.len() {
        flat
    } else {
        let mut t: String = flat.chars().take(n).collect();
        t.push('…');
        t
    }
}
