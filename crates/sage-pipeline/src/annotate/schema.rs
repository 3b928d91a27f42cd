//! The published format `sage.annotation-packet/1` (`packet/packets.json` and `key.json` of
//! `sage annotate export`, `docs/annotations.md`) as types of its own.
//!
//! The packets and the key are defined here, with their field names and serde attributes, and
//! converted explicitly from and to the values the export works with. The internal
//! [`crate::annotate::Key`] serializes only through its record (`#[serde(into, from)]`), and
//! keys already written (`sage annotate import --key` reads them) are read through it too; the
//! packets derive no serde at all and are written as [`Packets`]. Renaming a field of
//! [`crate::annotate::Packet`] stops the build here instead of changing every export.
//!
//! Written with the macros of `sage.results/1` ([`crate::results::schema`]): exhaustive struct
//! literals both ways, each internal field named once.

use super as annotate;
use crate::results::schema::{from_both, mirror, Conv};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `packet/packets.json`: every packet of one export, for one annotator.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Packets {
    /// `sage.annotation-packet/1`.
    pub version: String,
    pub annotator: String,
    pub packets: Vec<Packet>,
}

impl Packets {
    /// The document of an export's packets, in the export's order.
    pub fn new(annotator: &str, packets: Vec<annotate::Packet>) -> Packets {
        Packets {
            version: annotate::PACKET_VERSION.into(),
            annotator: annotator.into(),
            packets: packets.conv(),
        }
    }
}

mirror! {
    /// Everything an annotator gets for one case.
    pub struct Packet = annotate::Packet {
        packet_id: String,
        task: String,
        anchor_artefact: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        anchor_fragment: Option<String>,
        anchor_category: String,
        anchor_cwe: String,
        anchor_description: String,
        /// Artefact → baseline content.
        baselines: BTreeMap<String, String>,
        writes: Vec<PacketWrite>,
        /// Final states recorded outside the turns, as diffs from the baseline.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        final_states: Vec<PacketFinalState>,
        turns: Vec<PacketTurn>,
    }
}

mirror! {
    /// One write of the artefact history: its diff, or why it failed.
    pub struct PacketWrite = annotate::PacketWrite {
        write: usize,
        turn: usize,
        artefact: String,
        diff: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        failed: Option<String>,
    }
}

mirror! {
    /// A recorded final state: its source and its diff from the baseline.
    pub struct PacketFinalState = annotate::PacketFinalState {
        artefact: String,
        source: String,
        diff: String,
    }
}

mirror! {
    /// One turn of the trace as text.
    pub struct PacketTurn = annotate::PacketTurn {
        turn: usize,
        actor: String,
        kind: String,
        text: String,
    }
}

mirror! {
    /// `key.json`: packet id → case id, kept by the study lead.
    pub struct Key = annotate::Key {
        version: String,
        annotator: String,
        packets: BTreeMap<String, String>,
    }
}

from_both! {
    Packet = annotate::Packet;
    Key = annotate::Key;
}
