//! `sage.ledger/1` (a ledger entry) and `sage.batch/1` (a submitted batch's record) as types
//! of their own: the files a ledger holds on a user's disk, read back by every later run.
//!
//! Every record is defined here, with its field names and serde attributes, and converted
//! both ways from the ledger's values ([`super::LedgerEntry`], [`super::BatchRecord`] and the
//! key and token counts they hold), which derive no serde: renaming a field of theirs, or of
//! `sage-llm`'s `Usage`, stops the build here instead of silently changing the files or
//! making old ledgers unreadable. Written with `sage-schema`'s macros (both ways: the formats
//! are read back); `tests/fixtures/ledger-main` holds a ledger written before, which must read
//! back and write back byte for byte.

use sage_schema::{from_both, mirror};
use std::collections::BTreeMap;

mirror! {
    /// What identifies one judge call (flattened into its entry, and a batch's requests).
    pub struct LedgerKey = super::LedgerKey {
        backend: String,
        model: String,
        rubric_version: String,
        /// sha256 of the exact request body.
        prompt_hash: String,
        run: u32,
        attempt: u32,
    }
}

mirror! {
    /// Token counts of one call.
    pub struct Usage = sage_llm::cost::Usage {
        input_tokens: u64,
        #[serde(default)]
        cached_input_tokens: u64,
        #[serde(default)]
        cache_write_tokens: u64,
        output_tokens: u64,
    }
}

mirror! {
    /// One stored call (`sage.ledger/1`).
    pub struct LedgerEntry = super::LedgerEntry {
        schema: String,
        id: String,
        #[serde(flatten)]
        key: LedgerKey,
        source: String,
        response: String,
        usage: Usage,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost_usd: Option<f64>,
        latency_ms: u64,
        http_retries: u32,
        recorded_at: u64,
    }
}

mirror! {
    /// One batch submitted to a provider (`sage.batch/1`).
    pub struct BatchRecord = super::BatchRecord {
        schema: String,
        backend: String,
        model: String,
        judge: String,
        batch_id: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        input_file_id: Option<String>,
        submitted_at: u64,
        state: String,
        #[serde(default)]
        detail: String,
        requests: BTreeMap<String, LedgerKey>,
        #[serde(default)]
        imported: u64,
        #[serde(default)]
        unanswered: u64,
    }
}

from_both! {
    LedgerEntry = super::LedgerEntry;
    BatchRecord = super::BatchRecord;
}
