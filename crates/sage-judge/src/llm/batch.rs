//! Provider batch APIs: `--batch-export FILE` writes the calls a run still needs in the
//! OpenAI Batch API JSONL or Anthropic Message Batches format; `--batch-import FILE` reads the
//! provider's result file back. Each request's `custom_id` is its ledger id, so an imported
//! result lands on exactly the call it answers.
//!
//! A turn whose batch answer is rejected (invalid output, a quote that does not verify)
//! needs a retry with feedback: the next `--batch-export` after an import writes exactly
//! those retries, so export → import rounds converge like a live run.

use super::ledger::{self, BatchRecord, Ledger, LedgerKey, BATCH_SCHEMA};
use super::{BatchResults, LlmJudge, Lookup, Provider};
use crate::concurrent::ScoreItem;
use crate::prefix::PrefixChain;
use crate::{retry_feedback, verify_judgment, CallInfo, JudgeError, TurnRequest};
use serde_json::Value;
use std::collections::{BTreeMap, HashSet};
use std::io::Write;

/// One JSONL line of a batch input file. `body` is inserted byte for byte, so the exported
/// request is exactly the one whose hash keys the ledger.
pub(crate) fn export_line(provider: Provider, custom_id: &str, body: &[u8]) -> String {
    sage_llm::batch::request_line(provider, custom_id, body)
}

/// A batch file that cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("{origin}:{line}: {msg}")]
pub struct BatchError {
    pub origin: String,
    pub line: usize,
    pub msg: String,
}

/// What an import found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImportReport {
    pub succeeded: usize,
    /// Results the provider reports as errored, expired or canceled (re-exported next round).
    pub not_succeeded: usize,
}

/// Parse a result file of either provider (detected per line).
pub(crate) fn parse_results(
    text: &str,
    origin: &str,
) -> Result<(BatchResults, ImportReport), BatchError> {
    let mut out = BatchResults::new();
    let mut rep = ImportReport::default();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let err = |msg: String| BatchError {
            origin: origin.to_string(),
            line: i + 1,
            msg,
        };
        let v: Value = serde_json::from_str(line).map_err(|e| err(format!("not JSON: {e}")))?;
        let id = v
            .get("custom_id")
            .and_then(Value::as_str)
            .ok_or_else(|| err("no custom_id".into()))?
            .to_string();
        let body = if let Some(r) = v.get("response").filter(|r| !r.is_null()) {
            // OpenAI Batch API output line
            let status = r.get("status_code").and_then(Value::as_u64).unwrap_or(0);
            let ok = (200..300).contains(&status) && v.get("error").is_none_or(Value::is_null);
            r.get("body").filter(|_| ok)
        } else if let Some(r) = v.get("result") {
            // Anthropic Message Batches result line
            let ok = r.get("type").and_then(Value::as_str) == Some("succeeded");
            r.get("message").filter(|_| ok)
        } else if v.get("error").is_some() {
            None
        } else {
            return Err(err(
                "neither an OpenAI batch output line (response) nor an Anthropic result line (result)"
                    .into(),
            ));
        };
        match body {
            Some(b) => {
                out.insert(id, serde_json::to_vec(b).expect("a JSON value serializes"));
                rep.succeeded += 1;
            }
            None => rep.not_succeeded += 1,
        }
    }
    Ok((out, rep))
}

/// What an export wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExportReport {
    /// Requests written.
    pub requests: usize,
    /// Turns already settled by the ledger (accepted, or out of attempts).
    pub settled: usize,
    /// Estimated prompt tokens of the exported requests.
    pub prompt_tokens: u64,
    /// Turn-runs that cannot fit the judge's context budget (never exported).
    pub overflow: usize,
    /// Stored answers rejected on replay (invalid, or a quote that does not verify): each is
    /// followed by a retry with the reason, or, after the last attempt, a scoring failure.
    pub rejected: usize,
}

/// One call a run still needs: its ledger id (the batch `custom_id`), its key and the exact
/// request body.
#[derive(Debug, Clone)]
pub struct PendingCall {
    pub id: String,
    pub key: LedgerKey,
    pub body: Vec<u8>,
}

/// Write every call the run still needs as batch JSONL (see [`pending_calls`]).
pub fn export_requests(
    judge: &LlmJudge,
    items: &[ScoreItem<'_>],
    runs: std::num::NonZeroU32,
    max_attempts: std::num::NonZeroU32,
    out: &mut dyn Write,
) -> Result<ExportReport, JudgeError> {
    let provider = judge.settings().provider;
    pending_calls(judge, items, runs, max_attempts, &mut |c| {
        let line = export_line(provider, &c.id, &c.body);
        writeln!(out, "{line}")
            .map_err(|e| JudgeError::Fatal(format!("cannot write the batch file: {e}")))
    })
}

/// Every call the run still needs: for each applicable turn and run, replay the attempts
/// the ledger already answers (verifying quotes exactly as a live run does, and sending a
/// rejected answer back with the reason, as a live run does) and hand the first call it does
/// not answer to `sink`. A turn whose attempts are all rejected is settled: it is a scoring
/// failure, as online.
pub(crate) fn pending_calls(
    judge: &LlmJudge,
    items: &[ScoreItem<'_>],
    runs: std::num::NonZeroU32,
    max_attempts: std::num::NonZeroU32,
    sink: &mut dyn FnMut(PendingCall) -> Result<(), JudgeError>,
) -> Result<ExportReport, JudgeError> {
    let mut rep = ExportReport::default();
    for item in items {
        let store = item.store;
        // As a live run: one chain per trace, so each digest line is computed once.
        let chain = PrefixChain::new(item.task, &item.trace.turns);
        for run in 0..runs.get() {
            for k in 1..=item.trace.turns.len() {
                let Some(req) = TurnRequest::prefix(item.task, item.trace, k) else {
                    continue;
                };
                let mut req = req.with_chain(&chain);
                let turn = req.target();
                if !turn.is_applicable() {
                    continue;
                }
                let mut settled = true;
                for attempt in 1..=max_attempts.get() {
                    let rejection = match judge.lookup(&req, CallInfo { run, attempt }) {
                        Lookup::Miss { id, key, body, .. } => {
                            rep.requests += 1;
                            rep.prompt_tokens += (body.len() as u64).div_ceil(4);
                            sink(PendingCall { id, key, body })?;
                            settled = false;
                            break;
                        }
                        Lookup::Stored(Ok(a)) => {
                            match verify_judgment(store, turn, &a.judgment, &judge.parts.injection)
                            {
                                Ok(_) => break,
                                Err(e) => e.0,
                            }
                        }
                        // Nothing to send: the turn's outcome is context-overflow.
                        Lookup::Stored(Err(JudgeError::ContextOverflow { .. })) => {
                            rep.overflow += 1;
                            settled = false;
                            break;
                        }
                        Lookup::Stored(Err(JudgeError::Invalid(e)))
                        | Lookup::Stored(Err(JudgeError::Transient(e))) => e,
                        Lookup::Stored(Err(e)) => return Err(e),
                    };
                    rep.rejected += 1;
                    req.feedback = Some(retry_feedback(k, &rejection));
                }
                if settled {
                    rep.settled += 1;
                }
            }
        }
    }
    Ok(rep)
}

/// What `--batch submit` did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SubmitReport {
    pub export: ExportReport,
    /// Batches created, with their provider ids.
    pub batches: Vec<(String, usize)>,
    /// Calls left out because a batch still running already carries them.
    pub in_flight: usize,
    /// Calls asked for twice by the corpus (identical requests), sent once.
    pub duplicates: usize,
}

/// Ids of calls carried by this judge's outstanding batches.
fn outstanding_ids(judge: &LlmJudge, ledger: &Ledger) -> Result<HashSet<String>, JudgeError> {
    let mut ids = HashSet::new();
    for (_, r) in ledger
        .batches()
        .map_err(|e| JudgeError::Fatal(e.to_string()))?
    {
        if r.outstanding() && same_judge(judge, &r) {
            ids.extend(r.requests.keys().cloned());
        }
    }
    Ok(ids)
}

fn same_judge(judge: &LlmJudge, r: &BatchRecord) -> bool {
    let s = judge.settings();
    r.backend == s.provider.name() && r.model == s.model
}

fn need_ledger(judge: &LlmJudge) -> Result<&Ledger, JudgeError> {
    judge.ledger().ok_or_else(|| {
        JudgeError::Fatal(
            "--batch needs the ledger (it records the submitted batches and keeps their answers); drop --no-ledger"
                .into(),
        )
    })
}

/// `--batch submit`: send every call the run still needs (see [`pending_calls`]) to the
/// provider's batch API, in as many batches as its limits require, and record each batch
/// (its id and the key of every call it carries) in the ledger folder. Calls already in a
/// batch that is still running are not sent again.
pub async fn submit(
    judge: &LlmJudge,
    items: &[ScoreItem<'_>],
    runs: std::num::NonZeroU32,
    max_attempts: std::num::NonZeroU32,
) -> Result<SubmitReport, JudgeError> {
    let ledger = need_ledger(judge)?;
    let in_flight = outstanding_ids(judge, ledger)?;
    let s = judge.settings();
    let (max_n, max_bytes) = sage_llm::batch::limits(s.provider);
    // Calls are spooled to a file in the ledger folder, not held in memory: a corpus of long
    // traces needs gigabytes of request bodies.
    std::fs::create_dir_all(ledger.batch_dir())
        .map_err(|e| JudgeError::Fatal(format!("{}: {e}", ledger.batch_dir().display())))?;
    let spool_path = ledger.batch_dir().join(format!(
        ".spool.tmp.{}.{}",
        std::process::id(),
        rand::random::<u32>()
    ));
    let fatal = |e: std::io::Error| JudgeError::Fatal(format!("{}: {e}", spool_path.display()));
    let mut rep = SubmitReport::default();
    let mut keys: BTreeMap<String, LedgerKey> = BTreeMap::new();
    {
        let mut spool = std::io::BufWriter::new(std::fs::File::create(&spool_path).map_err(fatal)?);
        rep.export = pending_calls(judge, items, runs, max_attempts, &mut |c| {
            if in_flight.contains(&c.id) {
                rep.in_flight += 1;
                return Ok(());
            }
            if keys.contains_key(&c.id) {
                rep.duplicates += 1;
                return Ok(());
            }
            // a body is compact JSON: one line
            spool
                .write_all(c.id.as_bytes())
                .and_then(|_| spool.write_all(b"\t"))
                .and_then(|_| spool.write_all(&c.body))
                .and_then(|_| spool.write_all(b"\n"))
                .map_err(fatal)?;
            keys.insert(c.id, c.key);
            Ok(())
        })?;
        spool.flush().map_err(fatal)?;
    }
    let result = async {
        let file = std::fs::File::open(&spool_path).map_err(fatal)?;
        let mut chunk: Vec<(String, Vec<u8>)> = Vec::new();
        let mut bytes = 0usize;
        let mut lines = std::io::BufRead::lines(std::io::BufReader::new(file));
        loop {
            let next = lines.next().transpose().map_err(fatal)?;
            let full = next.as_ref().is_some_and(|l| {
                !chunk.is_empty() && (chunk.len() >= max_n || bytes + l.len() + 64 > max_bytes)
            });
            if (next.is_none() && !chunk.is_empty()) || full {
                let sent = std::mem::take(&mut chunk);
                bytes = 0;
                let n = sent.len();
                let created = sage_llm::batch::submit(s, &judge.transport, &sent)
                    .await
                    .map_err(JudgeError::from)?;
                let record = BatchRecord {
                    schema: BATCH_SCHEMA.into(),
                    backend: s.provider.name().into(),
                    model: s.model.clone(),
                    judge: s.who(),
                    batch_id: created.id.clone(),
                    input_file_id: created.input_file_id,
                    submitted_at: ledger::now_secs(),
                    state: "submitted".into(),
                    detail: String::new(),
                    requests: sent
                        .iter()
                        .filter_map(|(id, _)| keys.get(id).map(|k| (id.clone(), k.clone())))
                        .collect(),
                    imported: 0,
                    unanswered: 0,
                };
                ledger.put_batch(&record).map_err(|e| {
                    JudgeError::Fatal(format!(
                        "batch {} was submitted but cannot be recorded: {e}",
                        created.id
                    ))
                })?;
                rep.batches.push((created.id, n));
            }
            let Some(line) = next else { break };
            let (id, body) = line.split_once('\t').ok_or_else(|| {
                JudgeError::Fatal(format!(
                    "{}: a spooled call without id",
                    spool_path.display()
                ))
            })?;
            bytes += line.len() + 64;
            chunk.push((id.to_string(), body.as_bytes().to_vec()));
        }
        Ok::<(), JudgeError>(())
    }
    .await;
    let _ = std::fs::remove_file(&spool_path);
    result.map(|_| rep)
}

/// What `--batch poll` found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PollReport {
    /// Per batch: id and what became of it (`running: ...`, `imported N`, `failed: ...`).
    pub batches: Vec<(String, String)>,
    /// Answers written into the ledger.
    pub imported: u64,
    /// Requests of ended batches without a usable answer (submitted again next round).
    pub unanswered: u64,
    /// Batches still running.
    pub running: usize,
}

/// `--batch poll`: ask the provider about every outstanding batch of this judge recorded in
/// the ledger; import the results of those that ended into the ledger, each answer under
/// the key its `custom_id` names (parsed and scrubbed as a live answer; an envelope with no
/// answer is not stored, so its call is submitted again).
pub async fn poll(judge: &LlmJudge) -> Result<PollReport, JudgeError> {
    let ledger = need_ledger(judge)?;
    let s = judge.settings();
    let mut rep = PollReport::default();
    for (path, mut r) in ledger
        .batches()
        .map_err(|e| JudgeError::Fatal(e.to_string()))?
    {
        if !r.outstanding() || !same_judge(judge, &r) {
            continue;
        }
        let state = sage_llm::batch::status(s, &judge.transport, &r.batch_id)
            .await
            .map_err(JudgeError::from)?;
        match state {
            sage_llm::batch::BatchState::Running { detail } => {
                rep.running += 1;
                rep.batches
                    .push((r.batch_id.clone(), format!("running: {detail}")));
                r.detail = detail;
            }
            sage_llm::batch::BatchState::Failed { detail } => {
                rep.unanswered += r.requests.len() as u64;
                r.unanswered = r.requests.len() as u64;
                rep.batches.push((
                    r.batch_id.clone(),
                    format!("{detail}; its calls are submitted again"),
                ));
                r.state = "failed".into();
                r.detail = detail;
            }
            sage_llm::batch::BatchState::Ended { detail, files } => {
                let mut answered: HashSet<String> = HashSet::new();
                for url in &files {
                    let text = sage_llm::batch::fetch(s, &judge.transport, url)
                        .await
                        .map_err(JudgeError::from)?;
                    let origin = format!("batch {} result file", r.batch_id);
                    let (results, _) = parse_results(&text, &origin)
                        .map_err(|e| JudgeError::Fatal(e.to_string()))?;
                    for (id, body) in results {
                        let Some(key) = r.requests.get(&id) else {
                            return Err(JudgeError::Fatal(format!(
                                "{origin}: custom_id {id} is not a call of this batch ({})",
                                path.display()
                            )));
                        };
                        if let Ok((_, entry)) = judge.batch_entry(key.clone(), &body) {
                            ledger
                                .put(&entry)
                                .map_err(|e| JudgeError::Fatal(e.to_string()))?;
                            answered.insert(id);
                        }
                    }
                }
                r.imported = answered.len() as u64;
                r.unanswered = (r.requests.len() - answered.len()) as u64;
                rep.imported += r.imported;
                rep.unanswered += r.unanswered;
                rep.batches.push((
                    r.batch_id.clone(),
                    format!(
                        "{detail}: imported {} answer(s), {} without a usable answer",
                        r.imported, r.unanswered
                    ),
                ));
                r.state = "imported".into();
                r.detail = detail;
            }
        }
        ledger
            .put_batch(&r)
            .map_err(|e| JudgeError::Fatal(e.to_string()))?;
    }
    Ok(rep)
}

/// The calls the run still needs after the ledger's answers, without the ones in batches
/// still running: what the next `--batch submit` would send.
pub fn remaining(
    judge: &LlmJudge,
    items: &[ScoreItem<'_>],
    runs: std::num::NonZeroU32,
    max_attempts: std::num::NonZeroU32,
) -> Result<(ExportReport, usize), JudgeError> {
    let ledger = need_ledger(judge)?;
    let in_flight = outstanding_ids(judge, ledger)?;
    let mut running = 0;
    let mut rep = pending_calls(judge, items, runs, max_attempts, &mut |c| {
        if in_flight.contains(&c.id) {
            running += 1;
        }
        Ok(())
    })?;
    rep.requests -= running;
    Ok((rep, running))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn export_lines_embed_the_exact_body() {
        let body = br#"{"model":"m","messages":[]}"#;
        let l = export_line(Provider::OpenAi, "abc", body);
        let v: Value = serde_json::from_str(&l).unwrap();
        assert_eq!(v["url"], "/v1/chat/completions");
        assert_eq!(serde_json::to_vec(&v["body"]).unwrap(), body.to_vec());
        let l = export_line(Provider::Anthropic, "abc", body);
        let v: Value = serde_json::from_str(&l).unwrap();
        assert_eq!(v["params"]["model"], "m");
    }

    #[test]
    fn results_of_both_providers_parse() {
        let text = concat!(
            r#"{"id":"r1","custom_id":"a","response":{"status_code":200,"body":{"choices":[]}},"error":null}"#,
            "\n",
            r#"{"id":"r2","custom_id":"b","response":{"status_code":500,"body":{}},"error":null}"#,
            "\n",
            r#"{"custom_id":"c","result":{"type":"succeeded","message":{"content":[]}}}"#,
            "\n",
            r#"{"custom_id":"d","result":{"type":"expired"}}"#,
            "\n"
        );
        let (m, rep) = parse_results(text, "r.jsonl").unwrap();
        assert_eq!(
            rep,
            ImportReport {
                succeeded: 2,
                not_succeeded: 2
            }
        );
        assert_eq!(m["a"], br#"{"choices":[]}"#.to_vec());
        assert!(m.contains_key("c"));
        let e = parse_results("{\"custom_id\":\"x\"}\n", "r.jsonl").unwrap_err();
        assert!(e.to_string().starts_with("r.jsonl:1:"), "{e}");
    }
}
