//! Prefix hashes in linear time: the hash of the prefix ending at turn k is chained from the
//! hash of the prefix ending at turn k-1 and turn k's canonical bytes, so a trace of n turns
//! costs n turn serializations, not n²/2.
//!
//! The chain still identifies exactly the text a judgment was made on, and anyone can
//! recompute it from the canonical trace (`docs/judges.md`, "Prompt hashes"):
//!
//! ```text
//! h0 = sha256("sage.prefix/1" 0x00 len(task) task)        task  = the TaskContext as JSON
//! hk = sha256(h(k-1) len(turn_k) turn_k)                   turn_k = canonical turn k as JSON
//! request hash = hex(hk)                    without feedback
//!              = hex(sha256(hk len(f) f))   with the retry feedback f
//! ```
//! where `len(x)` is the byte length of `x` as a little-endian u64.

use sage_trace::case::TaskContext;
use sage_trace::Turn;
use sha2::{Digest, Sha256};

/// Version tag of the chain, hashed into its seed: a change of definition changes every hash.
pub const PREFIX_HASH_VERSION: &str = "sage.prefix/1";

type Digest32 = [u8; 32];

fn framed(h: &mut Sha256, bytes: &[u8]) {
    h.update((bytes.len() as u64).to_le_bytes());
    h.update(bytes);
}

fn seed(task: &TaskContext) -> Digest32 {
    let mut h = Sha256::new();
    h.update(PREFIX_HASH_VERSION.as_bytes());
    h.update([0u8]);
    framed(&mut h, &serde_json::to_vec(task).unwrap_or_default());
    h.finalize().into()
}

fn link(prev: &Digest32, turn: &Turn) -> Digest32 {
    let mut h = Sha256::new();
    h.update(prev);
    framed(&mut h, &serde_json::to_vec(turn).unwrap_or_default());
    h.finalize().into()
}

/// The chained hashes of every prefix of one trace, computed once; and the trace's context
/// digest lines, computed once on first use (see [`crate::digest_lines::DigestCache`]).
#[derive(Debug, Clone)]
pub struct PrefixChain {
    /// `hashes[k-1]` is the hash of the prefix ending at turn k.
    hashes: Vec<Digest32>,
    pub(crate) digest: std::sync::Arc<crate::digest_lines::DigestCache>,
    /// The trace's rendered turn blocks (see [`crate::digest_lines::BlockCache`]).
    pub(crate) blocks: std::sync::Arc<crate::digest_lines::BlockCache>,
}

impl PrefixChain {
    /// The chain of `turns` under `task`: one serialization and one hash per turn.
    pub fn new(task: &TaskContext, turns: &[Turn]) -> PrefixChain {
        let mut prev = seed(task);
        let mut hashes = Vec::with_capacity(turns.len());
        for t in turns {
            prev = link(&prev, t);
            hashes.push(prev);
        }
        PrefixChain {
            hashes,
            digest: Default::default(),
            blocks: Default::default(),
        }
    }

    /// The hash of the prefix ending at turn `k` (1-based).
    pub fn get(&self, k: usize) -> Option<&Digest32> {
        k.checked_sub(1).and_then(|i| self.hashes.get(i))
    }

    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }
}

/// The request hash of a prefix hash and an optional retry feedback.
pub(crate) fn request_hash(prefix: &Digest32, feedback: Option<&str>) -> String {
    match feedback {
        None => hex::encode(prefix),
        Some(f) => {
            let mut h = Sha256::new();
            h.update(prefix);
            framed(&mut h, f.as_bytes());
            hex::encode(h.finalize())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sage_trace::{Actor, RawRef, TextItem, TurnKind};

    fn turn(i: usize, text: &str) -> Turn {
        Turn {
            index: i,
            actor: Actor::new("a", None),
            kind: TurnKind::Implementation,
            message: Some(TextItem {
                text: text.into(),
                raw: RawRef::synthetic("t", "test"),
            }),
            tool_calls: vec![],
            tool_results: vec![],
            writes: vec![],
            edit_calls: vec![],
        }
    }

    #[test]
    fn the_chain_equals_hashing_each_prefix_from_scratch() {
        let task = TaskContext::default();
        let turns: Vec<Turn> = (1..=5).map(|i| turn(i, &format!("turn {i}"))).collect();
        let chain = PrefixChain::new(&task, &turns);
        for k in 1..=5 {
            let fresh = PrefixChain::new(&task, &turns[..k]);
            assert_eq!(chain.get(k), fresh.get(k));
        }
        assert_eq!(chain.get(0), None);
        assert_eq!(chain.get(6), None);
    }

    #[test]
    fn every_part_of_the_prefix_changes_the_hash() {
        let task = TaskContext::default();
        let turns: Vec<Turn> = (1..=3).map(|i| turn(i, &format!("turn {i}"))).collect();
        let base = PrefixChain::new(&task, &turns);
        let mut edited = turns.clone();
        edited[0].message.as_mut().unwrap().text = "turn one".into();
        let other = PrefixChain::new(&task, &edited);
        for k in 1..=3 {
            assert_ne!(
                base.get(k),
                other.get(k),
                "an earlier turn's edit must reach k={k}"
            );
        }
        let task2 = TaskContext {
            description: "another task".into(),
            ..Default::default()
        };
        assert_ne!(base.get(3), PrefixChain::new(&task2, &turns).get(3));
        // Framing: moving text across the boundary of two turns changes the hash.
        let a = [turn(1, "ab"), turn(2, "c")];
        let b = [turn(1, "a"), turn(2, "bc")];
        assert_ne!(
            PrefixChain::new(&task, &a).get(2),
            PrefixChain::new(&task, &b).get(2)
        );
        let h = base.get(3).unwrap();
        assert_ne!(request_hash(h, None), request_hash(h, Some("retry")));
    }
}
