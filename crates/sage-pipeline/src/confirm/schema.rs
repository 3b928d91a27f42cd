//! The published format `sage.confirm-key/1` (`key.json` of `sage confirm export`,
//! `docs/funnel.md`) as types of its own.
//!
//! The key's records are defined here, with their field names, and converted explicitly from
//! and to the values confirmation works with. The internal [`crate::confirm::Key`] serializes
//! only through them (`#[serde(into, from)]`), and keys already written (`sage confirm import`
//! and `sage confirm report` read them) are read through them too, so renaming a field of
//! [`crate::confirm::KeyEntry`] stops the build here instead of changing every key. The proposed
//! anchors are published as `sage.screen/1` publishes them ([`sage_screen::schema::Proposal`]).
//!
//! Written with the macros of `sage.results/1` ([`crate::results::schema`]): exhaustive struct
//! literals both ways, each internal field named once.

use super as confirm;
use sage_schema::{from_both, mirror};
use sage_screen::schema::Proposal;
use std::collections::BTreeMap;

mirror! {
    /// The export's key: which packet is which run, and who got which packets.
    pub struct Key = confirm::Key {
        schema: String,
        seed: u64,
        packets: Vec<KeyEntry>,
        annotators: BTreeMap<String, Vec<String>>,
    }
}

mirror! {
    /// One packet: its run, the run folder and the proposed anchors.
    pub struct KeyEntry = confirm::KeyEntry {
        packet: String,
        run: String,
        source: String,
        proposals: Vec<Proposal>,
    }
}

from_both! {
    Key = confirm::Key;
}
