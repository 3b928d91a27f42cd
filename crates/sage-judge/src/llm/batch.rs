//! Provider batch APIs: `--batch-export FILE` writes the calls a run still needs in the
//! OpenAI Batch API JSONL or Anthropic Message Batches format; `--batch-import FILE` reads the
//! provider's result file back. Each request's `custom_id` is its ledger id, so an imported
//! result lands on exactly the call it answers.
//!
//! A turn whose batch answer is rejected (invalid output, a quote that does not verify)
//! needs a retry with feedback: the next `--batch-export` after an import writes exactly
//! those retries, so export → import rounds converge like a live run.

use super::{BatchResults, LlmJudge, Lookup, Provider};
use crate::concurrent::ScoreItem;
use crate::{retry_feedback, verify_judgment, CallInfo, JudgeError, TurnRequest};
use serde_json::Value;
use std::io::Write;

/// One JSONL line of a batch input file. `body` is inserted byte for byte, so the exported
/// request is exactly the one whose hash keys the ledger.
pub fn export_line(provider: Provider, custom_id: &str, body: &[u8]) -> String {
    let body = String::from_utf8_lossy(body);
    match provider {
        Provider::OpenAi => format!(
            "{{\"custom_id\":\"{custom_id}\",\"method\":\"POST\",\"url\":\"/v1/chat/completions\",\"body\":{body}}}"
        ),
        Provider::Anthropic => format!("{{\"custom_id\":\"{custom_id}\",\"params\":{body}}}"),
    }
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
pub fn parse_results(text: &str, origin: &str) -> Result<(BatchResults, ImportReport), BatchError> {
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
}

/// Write every call the run still needs: for each applicable turn and run, replay the
/// attempts the ledger already answers (verifying quotes exactly as a live run does) and
/// export the first call it does not.
pub fn export_requests(
    judge: &LlmJudge,
    items: &[ScoreItem<'_>],
    runs: u32,
    max_attempts: u32,
    out: &mut dyn Write,
) -> Result<ExportReport, JudgeError> {
    let mut rep = ExportReport::default();
    let provider = judge.settings().provider;
    for item in items {
        let mut store = item.store.clone();
        for run in 0..runs {
            for k in 1..=item.trace.turns.len() {
                let Some(mut req) = TurnRequest::prefix(item.task, item.trace, k) else {
                    continue;
                };
                let turn = req.target();
                if !turn.is_applicable() {
                    continue;
                }
                let mut settled = true;
                for attempt in 1..=max_attempts.max(1) {
                    let rejection = match judge.lookup(&req, CallInfo { run, attempt }) {
                        Lookup::Miss { id, body, .. } => {
                            let line = export_line(provider, &id, &body);
                            writeln!(out, "{line}").map_err(|e| {
                                JudgeError::Fatal(format!("cannot write the batch file: {e}"))
                            })?;
                            rep.requests += 1;
                            rep.prompt_tokens += (body.len() as u64).div_ceil(4);
                            settled = false;
                            break;
                        }
                        Lookup::Stored(Ok(a)) => {
                            match verify_judgment(&mut store, turn, &a.judgment) {
                                Ok(_) => break,
                                Err(e) => e,
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
