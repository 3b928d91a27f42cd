//! The judgment ledger: every answer an LLM judge received, kept on disk.
//!
//! One JSON file per call, at
//! `DIR/<backend>/<model>/<rubric-version>/<id[0..2]>/<id>.json`, where `id` is the sha256 of
//! (backend, model, rubric version, prompt hash, run, attempt). A re-run finds the entry and
//! replays the stored raw response instead of calling the API, so an offline replay produces
//! the same judgments byte for byte. Entries are written to a temporary file and renamed, so a
//! killed run leaves either a whole entry or none. The ledger holds no request headers and
//! therefore no API key.

pub mod schema;

use sage_llm::cost::Usage;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Schema tag of a ledger entry.
pub const LEDGER_SCHEMA: &str = "sage.ledger/1";
/// Where the ledger lives unless `--ledger DIR` says otherwise.
pub const DEFAULT_LEDGER_DIR: &str = ".sage/ledger";

/// What identifies one judge call.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LedgerKey {
    pub backend: String,
    pub model: String,
    pub rubric_version: String,
    /// sha256 of the exact request body.
    pub prompt_hash: String,
    pub run: u32,
    pub attempt: u32,
}

impl LedgerKey {
    /// 64 hex characters: also the batch `custom_id` of this call.
    pub fn id(&self) -> String {
        let mut h = Sha256::new();
        for part in [
            LEDGER_SCHEMA,
            &self.backend,
            &self.model,
            &self.rubric_version,
            &self.prompt_hash,
            &self.run.to_string(),
            &self.attempt.to_string(),
        ] {
            h.update(part.as_bytes());
            h.update([0u8]);
        }
        hex::encode(h.finalize())
    }
}

/// One stored call (`sage.ledger/1`, published through [`schema::LedgerEntry`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "schema::LedgerEntry", from = "schema::LedgerEntry")]
pub struct LedgerEntry {
    pub schema: String,
    pub id: String,
    pub key: LedgerKey,
    /// `api` (answered live) or `batch` (imported from a batch result file).
    pub source: String,
    /// The provider's raw response body.
    pub response: String,
    pub usage: Usage,
    /// Cost of the call in USD when the model's price is known.
    pub cost_usd: Option<f64>,
    pub latency_ms: u64,
    /// Transport retries before the answer (429, 5xx, timeouts).
    pub http_retries: u32,
    /// Seconds since the Unix epoch.
    pub recorded_at: u64,
}

/// A ledger problem (disk full, unreadable entry, ...).
#[derive(Debug, thiserror::Error)]
#[error("ledger {path}: {msg}")]
pub struct LedgerError {
    pub path: String,
    pub msg: String,
}

/// The on-disk ledger.
#[derive(Debug, Clone)]
pub struct Ledger {
    dir: PathBuf,
}

/// Path-safe form of a key component.
fn component(s: &str) -> String {
    // the one file-name helper: injective, length-capped, never `.` or `..`
    sage_trace::safe::file_stem(s)
}

impl Ledger {
    pub fn new(dir: impl Into<PathBuf>) -> Ledger {
        Ledger { dir: dir.into() }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn path_of(&self, key: &LedgerKey, id: &str) -> PathBuf {
        self.dir
            .join(component(&key.backend))
            .join(component(&key.model))
            .join(component(&key.rubric_version))
            .join(&id[..2])
            .join(format!("{id}.json"))
    }

    /// The stored entry for `key`, if any. An unreadable entry counts as absent (it is
    /// re-requested and overwritten), never as an answer.
    pub fn get(&self, key: &LedgerKey) -> Option<LedgerEntry> {
        let id = key.id();
        let text = std::fs::read(self.path_of(key, &id)).ok()?;
        let e: LedgerEntry = serde_json::from_slice(&text).ok()?;
        (e.id == id && &e.key == key).then_some(e)
    }

    pub fn contains(&self, key: &LedgerKey) -> bool {
        self.path_of(key, &key.id()).is_file()
    }

    /// Store an entry atomically (temporary file in the same folder, then rename).
    pub fn put(&self, entry: &LedgerEntry) -> Result<PathBuf, LedgerError> {
        let path = self.path_of(&entry.key, &entry.id);
        let bytes = serde_json::to_vec_pretty(entry).map_err(|e| LedgerError {
            path: path.display().to_string(),
            msg: e.to_string(),
        })?;
        write_atomic(&path, &bytes)?;
        Ok(path)
    }

    /// Every entry file (and leftover temporary file) under the ledger; the records of
    /// submitted batches (`batches/`) are not entries.
    fn files(&self) -> impl Iterator<Item = walkdir::DirEntry> {
        let batches = self.batch_dir();
        walkdir::WalkDir::new(&self.dir)
            .sort_by_file_name()
            .into_iter()
            .filter_entry(move |e| e.path() != batches)
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_file())
    }

    /// Where the records of submitted provider batches are kept (`DIR/batches/<backend>/`).
    pub(crate) fn batch_dir(&self) -> PathBuf {
        self.dir.join(BATCH_DIR)
    }

    fn batch_path(&self, r: &BatchRecord) -> PathBuf {
        self.batch_dir()
            .join(component(&r.backend))
            .join(format!("{}.json", component(&r.batch_id)))
    }

    /// Store a batch record atomically (it is rewritten when its results are imported).
    pub(crate) fn put_batch(&self, r: &BatchRecord) -> Result<PathBuf, LedgerError> {
        let path = self.batch_path(r);
        let bytes = serde_json::to_vec_pretty(r).map_err(|e| LedgerError {
            path: path.display().to_string(),
            msg: e.to_string(),
        })?;
        write_atomic(&path, &bytes)?;
        Ok(path)
    }

    /// Every batch record, in file-name order. A record that cannot be read is an error
    /// naming its file: it may hold the only link to answers already paid for.
    pub fn batches(&self) -> Result<Vec<(PathBuf, BatchRecord)>, LedgerError> {
        let mut out = Vec::new();
        let dir = self.batch_dir();
        if !dir.exists() {
            return Ok(out);
        }
        for e in walkdir::WalkDir::new(&dir)
            .sort_by_file_name()
            .into_iter()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_type().is_file())
        {
            let name = e.file_name().to_string_lossy();
            if name.contains(".tmp.") || !name.ends_with(".json") {
                continue;
            }
            let err = |msg: String| LedgerError {
                path: e.path().display().to_string(),
                msg,
            };
            let bytes = std::fs::read(e.path()).map_err(|x| err(x.to_string()))?;
            let r: BatchRecord = serde_json::from_slice(&bytes)
                .map_err(|x| err(format!("not a batch record ({x})")))?;
            if r.schema != BATCH_SCHEMA {
                return Err(err(format!(
                    "schema {:?}, expected {BATCH_SCHEMA}",
                    r.schema
                )));
            }
            out.push((e.path().to_path_buf(), r));
        }
        Ok(out)
    }

    /// Counts per backend / model / rubric version.
    pub fn stats(&self) -> Result<LedgerStats, LedgerError> {
        let mut st = LedgerStats::default();
        if !self.dir.exists() {
            return Ok(st);
        }
        for f in self.files() {
            let name = f.file_name().to_string_lossy();
            if name.contains(".tmp.") {
                st.temp_files += 1;
                continue;
            }
            if !name.ends_with(".json") {
                continue;
            }
            let size = f.metadata().map(|m| m.len()).unwrap_or(0);
            let Some(e) = std::fs::read(f.path())
                .ok()
                .and_then(|b| serde_json::from_slice::<LedgerEntry>(&b).ok())
            else {
                st.unreadable += 1;
                continue;
            };
            let g = st
                .groups
                .entry((e.key.backend, e.key.model, e.key.rubric_version))
                .or_default();
            g.entries += 1;
            g.bytes += size;
            g.input_tokens += e.usage.input_tokens;
            g.cached_input_tokens += e.usage.cached_input_tokens;
            g.output_tokens += e.usage.output_tokens;
            g.cost_usd += e.cost_usd.unwrap_or(0.0);
            g.latency_ms += e.latency_ms;
            if e.source == "batch" {
                g.from_batch += 1;
            }
        }
        Ok(st)
    }

    /// Remove entries matching `filter` (and always leftover temporary files).
    pub fn prune(&self, filter: &PruneFilter) -> Result<PruneReport, LedgerError> {
        let mut rep = PruneReport::default();
        if !self.dir.exists() {
            return Ok(rep);
        }
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_secs();
        for f in self.files() {
            let name = f.file_name().to_string_lossy().into_owned();
            let size = f.metadata().map(|m| m.len()).unwrap_or(0);
            let remove = if name.contains(".tmp.") {
                true
            } else if !name.ends_with(".json") {
                false
            } else {
                match std::fs::read(f.path())
                    .ok()
                    .and_then(|b| serde_json::from_slice::<LedgerEntry>(&b).ok())
                {
                    None => filter.unreadable,
                    Some(e) => filter.matches(&e, now),
                }
            };
            if remove {
                rep.files += 1;
                rep.bytes += size;
                if !filter.dry_run {
                    std::fs::remove_file(f.path()).map_err(|e| LedgerError {
                        path: f.path().display().to_string(),
                        msg: e.to_string(),
                    })?;
                }
            } else {
                rep.kept += 1;
            }
        }
        if !filter.dry_run {
            remove_empty_dirs(&self.dir);
        }
        Ok(rep)
    }
}

/// Write `bytes` and a newline to `path` through a temporary file in the same folder and a
/// rename: a killed run leaves the whole file or none.
fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), LedgerError> {
    let dir = path.parent().expect("ledger paths have a parent");
    let err = |msg: String| LedgerError {
        path: path.display().to_string(),
        msg,
    };
    std::fs::create_dir_all(dir).map_err(|e| err(e.to_string()))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(
        ".{name}.tmp.{}.{}",
        std::process::id(),
        rand::random::<u32>()
    ));
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.write_all(b"\n")?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    };
    write().map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        err(e.to_string())
    })
}

/// The folder of batch records inside a ledger.
pub const BATCH_DIR: &str = "batches";
/// Schema tag of a batch record.
pub const BATCH_SCHEMA: &str = "sage.batch/1";

/// One batch submitted to a provider (`sage localize --batch submit`): which calls it
/// carries, so that `--batch poll` (in any later process) can import its results into the
/// ledger under exactly the keys they answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(into = "schema::BatchRecord", from = "schema::BatchRecord")]
pub struct BatchRecord {
    pub schema: String,
    pub backend: String,
    pub model: String,
    /// The judge's name (`openai:gpt-4o` or the `sage.toml` name).
    pub judge: String,
    /// The provider's batch id.
    pub batch_id: String,
    pub input_file_id: Option<String>,
    pub submitted_at: u64,
    /// `submitted` (outstanding), `imported` (results are in the ledger) or `failed` (the
    /// provider refused the batch; its calls are submitted again).
    pub state: String,
    /// The provider's last status line.
    pub detail: String,
    /// custom_id (the ledger id) → the call it stands for.
    pub requests: BTreeMap<String, LedgerKey>,
    /// Answers imported into the ledger.
    pub imported: u64,
    /// Requests the batch did not answer usably (errored, expired, cancelled, a broken
    /// envelope): submitted again in the next round.
    pub unanswered: u64,
}

impl BatchRecord {
    pub fn outstanding(&self) -> bool {
        self.state == "submitted"
    }
}

/// Two ledgers hold different answers for one call.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error("{0}")]
    Conflict(String),
}

/// What a merge did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MergeReport {
    /// Entries written into the output ledger.
    pub copied: u64,
    /// Entries present with the same answer in more than one ledger (kept once).
    pub identical: u64,
    /// Batch records copied.
    pub batches: u64,
}

/// The entries of a ledger by id; an unreadable entry is an error naming its file (a merge
/// must not drop an answer silently).
fn entries_of(l: &Ledger) -> Result<Vec<(PathBuf, LedgerEntry)>, LedgerError> {
    let mut out = Vec::new();
    if !l.dir.exists() {
        return Ok(out);
    }
    for f in l.files() {
        let name = f.file_name().to_string_lossy();
        if name.contains(".tmp.") || !name.ends_with(".json") {
            continue;
        }
        let err = |msg: String| LedgerError {
            path: f.path().display().to_string(),
            msg,
        };
        let bytes = std::fs::read(f.path()).map_err(|e| err(e.to_string()))?;
        let e: LedgerEntry = serde_json::from_slice(&bytes).map_err(|e| {
            err(format!(
                "not a ledger entry ({e}); `sage cache prune --unreadable` removes it"
            ))
        })?;
        if e.id != e.key.id() {
            return Err(err("its id does not match its key".into()));
        }
        out.push((f.path().to_path_buf(), e));
    }
    Ok(out)
}

/// Merge the ledgers of shards into `out` (which may already hold entries). Two entries
/// for the same call (same backend, model, rubric version, prompt hash, run and attempt)
/// must carry the same answer; if any pair differs nothing is written and every conflict is
/// named. Batch records are copied alike.
pub fn merge(inputs: &[Ledger], out: &Ledger) -> Result<MergeReport, MergeError> {
    let mut rep = MergeReport::default();
    // id → (where it came from, entry); the output's own entries first
    let mut seen: BTreeMap<String, (String, LedgerEntry)> = BTreeMap::new();
    for (_, e) in entries_of(out)? {
        seen.insert(e.id.clone(), (out.dir.display().to_string(), e));
    }
    let mut conflicts = Vec::new();
    let mut to_copy: Vec<LedgerEntry> = Vec::new();
    for l in inputs {
        for (path, e) in entries_of(l)? {
            match seen.get(&e.id) {
                Some((from, prev)) => {
                    if prev.response == e.response && prev.key == e.key {
                        rep.identical += 1;
                    } else {
                        conflicts.push(format!(
                            "{} and {} answer the same call differently ({}/{}/{}, prompt {}, run {}, attempt {}; entry {})",
                            from,
                            path.display(),
                            e.key.backend,
                            e.key.model,
                            e.key.rubric_version,
                            &e.key.prompt_hash[..e.key.prompt_hash.len().min(12)],
                            e.key.run,
                            e.key.attempt,
                            e.id
                        ));
                    }
                }
                None => {
                    seen.insert(e.id.clone(), (path.display().to_string(), e.clone()));
                    to_copy.push(e);
                }
            }
        }
    }
    let mut records: BTreeMap<PathBuf, BatchRecord> = BTreeMap::new();
    for (_, r) in out.batches()? {
        records.insert(out.batch_path(&r), r);
    }
    let mut new_records = Vec::new();
    for l in inputs {
        for (path, r) in l.batches()? {
            let dest = out.batch_path(&r);
            match records.get(&dest) {
                Some(prev) if *prev == r => {}
                Some(_) => conflicts.push(format!(
                    "batch {} has different records in two ledgers (one is {})",
                    r.batch_id,
                    path.display()
                )),
                None => {
                    records.insert(dest, r.clone());
                    new_records.push(r);
                }
            }
        }
    }
    if !conflicts.is_empty() {
        let n = conflicts.len();
        conflicts.truncate(5);
        return Err(MergeError::Conflict(format!(
            "{n} conflicting entr{} (nothing written): {}{}; the shards judged the same call \
             twice with different answers: keep one ledger's answer by pruning the other (`sage cache prune`) \
             or merge without it",
            if n == 1 { "y" } else { "ies" },
            conflicts.join("; "),
            if n > 5 { "; ..." } else { "" }
        )));
    }
    for e in to_copy {
        out.put(&e)?;
        rep.copied += 1;
    }
    for r in new_records {
        out.put_batch(&r)?;
        rep.batches += 1;
    }
    Ok(rep)
}

fn remove_empty_dirs(dir: &Path) {
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            if e.path().is_dir() {
                remove_empty_dirs(&e.path());
                let _ = std::fs::remove_dir(e.path()); // fails (kept) when not empty
            }
        }
    }
}

/// Which entries `sage cache prune` removes. Conditions combine with AND; an entry is
/// removed only when every given condition holds, and at least one must be given (or
/// `all`).
#[derive(Debug, Clone, Default)]
pub struct PruneFilter {
    pub all: bool,
    pub backend: Option<String>,
    pub model: Option<String>,
    /// Remove entries of this rubric version (exact, or prefix before `#`).
    pub rubric_version: Option<String>,
    /// Remove entries of any rubric version other than this one.
    pub keep_rubric_version: Option<String>,
    pub older_than: Option<Duration>,
    pub unreadable: bool,
    pub dry_run: bool,
}

impl PruneFilter {
    pub fn is_empty(&self) -> bool {
        !self.all
            && self.backend.is_none()
            && self.model.is_none()
            && self.rubric_version.is_none()
            && self.keep_rubric_version.is_none()
            && self.older_than.is_none()
    }

    fn matches(&self, e: &LedgerEntry, now: u64) -> bool {
        if self.all {
            return true;
        }
        if self.is_empty() {
            return false;
        }
        let rv = |want: &str| {
            e.key.rubric_version == want || e.key.rubric_version.split('#').next() == Some(want)
        };
        self.backend.as_deref().is_none_or(|b| e.key.backend == b)
            && self.model.as_deref().is_none_or(|m| e.key.model == m)
            && self.rubric_version.as_deref().is_none_or(rv)
            && self.keep_rubric_version.as_deref().is_none_or(|k| !rv(k))
            && self
                .older_than
                .is_none_or(|d| now.saturating_sub(e.recorded_at) > d.as_secs())
    }
}

/// What prune removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PruneReport {
    pub files: u64,
    pub bytes: u64,
    pub kept: u64,
}

/// Totals of one (backend, model, rubric version).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GroupStats {
    pub entries: u64,
    pub from_batch: u64,
    pub bytes: u64,
    pub input_tokens: u64,
    pub cached_input_tokens: u64,
    pub output_tokens: u64,
    pub cost_usd: f64,
    pub latency_ms: u64,
}

/// What `sage cache stats` shows.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LedgerStats {
    pub groups: BTreeMap<(String, String, String), GroupStats>,
    pub temp_files: u64,
    pub unreadable: u64,
}

/// Seconds since the Unix epoch.
pub(crate) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO)
        .as_secs()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The entries and batch records of `tests/fixtures/ledger-main`: every field of both
    /// records set, an optional one absent, a key component that needs escaping.
    fn fixture_records() -> (Vec<LedgerEntry>, Vec<BatchRecord>) {
        let k = |backend: &str, model: &str, run: u32, attempt: u32| LedgerKey {
            backend: backend.into(),
            model: model.into(),
            rubric_version: "sage-rubric/4#6f1c".into(),
            prompt_hash: format!("{:064x}", 0xabcdef_u64 + u64::from(run)),
            run,
            attempt,
        };
        let keys = [
            k("openai", "gpt-4.1-mini", 0, 1),
            k("openai", "gpt-4.1-mini", 1, 2),
            k("anthropic", "claude/3:haiku", 0, 1),
        ];
        let entries = keys
            .iter()
            .enumerate()
            .map(|(i, key)| LedgerEntry {
                schema: LEDGER_SCHEMA.into(),
                id: key.id(),
                key: key.clone(),
                source: if i == 2 { "batch" } else { "api" }.into(),
                response: format!(
                    "{{\"choices\":[{{\"message\":{{\"content\":\"answer {i}\"}}}}]}}"
                ),
                usage: Usage {
                    input_tokens: 1200 + i as u64,
                    cached_input_tokens: if i == 1 { 1024 } else { 0 },
                    cache_write_tokens: if i == 2 { 512 } else { 0 },
                    output_tokens: 90,
                },
                cost_usd: (i != 1).then_some(0.000_42 * (i as f64 + 1.0)),
                latency_ms: 812 + i as u64,
                http_retries: i as u32,
                recorded_at: 1_765_000_000 + i as u64,
            })
            .collect();
        let batch = |id: &str, state: &str, file: Option<&str>, keys: &[LedgerKey]| BatchRecord {
            schema: BATCH_SCHEMA.into(),
            backend: keys[0].backend.clone(),
            model: keys[0].model.clone(),
            judge: format!("{}:{}", keys[0].backend, keys[0].model),
            batch_id: id.into(),
            input_file_id: file.map(Into::into),
            submitted_at: 1_765_000_100,
            state: state.into(),
            detail: if state == "imported" {
                "completed".into()
            } else {
                String::new()
            },
            requests: keys.iter().map(|k| (k.id(), k.clone())).collect(),
            imported: if state == "imported" {
                keys.len() as u64
            } else {
                0
            },
            unanswered: 0,
        };
        let batches = vec![
            batch("batch_01", "imported", Some("file-9"), &keys[..2]),
            batch("msgbatch_02", "submitted", None, &keys[2..]),
        ];
        (entries, batches)
    }

    /// A ledger written by sage before `sage.ledger/1` and `sage.batch/1` had types of their
    /// own (`tests/fixtures/ledger-main`) reads as the records it was written from, and
    /// writes back byte for byte, file for file.
    #[test]
    fn a_ledger_written_before_reads_and_writes_back_byte_for_byte() {
        let fixture =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/ledger-main");
        let old = Ledger::new(&fixture);
        let (want_entries, want_batches) = fixture_records();
        let mut entries: Vec<LedgerEntry> = entries_of(&old)
            .unwrap()
            .into_iter()
            .map(|(_, e)| e)
            .collect();
        entries.sort_by_key(|e| e.recorded_at);
        assert_eq!(entries, want_entries);
        let batches: Vec<BatchRecord> =
            old.batches().unwrap().into_iter().map(|(_, b)| b).collect();
        assert_eq!(batches.len(), 2);
        for b in &want_batches {
            assert!(batches.contains(b), "{}", b.batch_id);
        }
        let d = tempfile::tempdir().unwrap();
        let new = Ledger::new(d.path());
        for e in &entries {
            new.put(e).unwrap();
        }
        for b in &batches {
            new.put_batch(b).unwrap();
        }
        let files = |root: &Path| -> Vec<(PathBuf, Vec<u8>)> {
            walkdir::WalkDir::new(root)
                .sort_by_file_name()
                .into_iter()
                .filter_map(|e| e.ok())
                .filter(|e| {
                    e.file_type().is_file() && e.path().extension().is_some_and(|x| x == "json")
                })
                .map(|e| {
                    let rel = e.path().strip_prefix(root).unwrap().to_path_buf();
                    (rel, std::fs::read(e.path()).unwrap())
                })
                .collect()
        };
        let (was, is) = (files(&fixture), files(d.path()));
        assert_eq!(was.len(), 5);
        assert_eq!(is, was);
    }

    fn key(run: u32) -> LedgerKey {
        LedgerKey {
            backend: "openai".into(),
            model: "gpt/4o:mini".into(),
            rubric_version: "sage-rubric/1#abcd".into(),
            prompt_hash: "00ff".into(),
            run,
            attempt: 1,
        }
    }

    fn entry(k: LedgerKey) -> LedgerEntry {
        LedgerEntry {
            schema: LEDGER_SCHEMA.into(),
            id: k.id(),
            key: k,
            source: "api".into(),
            response: "{\"x\":1}".into(),
            usage: Usage::default(),
            cost_usd: Some(0.01),
            latency_ms: 5,
            http_retries: 0,
            recorded_at: now_secs(),
        }
    }

    #[test]
    fn put_get_round_trip_and_run_is_part_of_the_key() {
        let d = tempfile::tempdir().unwrap();
        let l = Ledger::new(d.path());
        assert!(l.get(&key(0)).is_none());
        let p = l.put(&entry(key(0))).unwrap();
        // each key component is one folder, named injectively (`/` and `:` escaped)
        assert!(p.starts_with(
            d.path()
                .join("openai/gpt~2F4o~3Amini/sage-rubric~2F1~23abcd")
        ));
        assert_eq!(l.get(&key(0)).unwrap().response, "{\"x\":1}");
        assert!(l.get(&key(1)).is_none());
        assert_ne!(key(0).id(), key(1).id());
        let s = l.stats().unwrap();
        assert_eq!(s.groups.values().next().unwrap().entries, 1);
    }

    #[test]
    fn a_torn_entry_is_not_an_answer_and_prune_cleans_temp_files() {
        let d = tempfile::tempdir().unwrap();
        let l = Ledger::new(d.path());
        let k = key(0);
        let p = l.path_of(&k, &k.id());
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, "{\"schema\":").unwrap();
        std::fs::write(p.with_file_name(".x.tmp.1.2"), "partial").unwrap();
        assert!(l.get(&k).is_none());
        let st = l.stats().unwrap();
        assert_eq!((st.unreadable, st.temp_files), (1, 1));
        let f = PruneFilter {
            unreadable: true,
            ..Default::default()
        };
        assert_eq!(l.prune(&f).unwrap().files, 2);
        l.put(&entry(k.clone())).unwrap();
        let f = PruneFilter {
            keep_rubric_version: Some("sage-rubric/1".into()),
            ..Default::default()
        };
        assert_eq!(l.prune(&f).unwrap().files, 0);
        let f = PruneFilter {
            model: Some("gpt/4o:mini".into()),
            ..Default::default()
        };
        assert_eq!(l.prune(&f).unwrap().files, 1);
        assert!(l.get(&k).is_none());
    }
}
