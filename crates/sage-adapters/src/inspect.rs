//! Inspect AI eval logs (`UKGovernmentBEIS/inspect_ai`, log format version 2): a `.json`
//! log (one object with `samples`) or a zipped `.eval` (`header.json`,
//! `samples/<id>_epoch_<n>.json`, ...).
//!
//! A sample is one run: the first sample of a log is the trace (the others are reported as
//! dropped; [`normalize_sample`] picks another). Turns come from the sample's `messages`
//! (system → administrative, user → user, assistant → agent turn with its `tool_calls`,
//! tool → result); `events` repeat them and are not mapped again. `attachment://` texts are
//! resolved through the sample's `attachments` and point there. Writes: `text_editor` /
//! `str_replace_based_edit_tool` calls (`create`, `str_replace`, `insert`) and plain shell
//! edits in `bash` calls, when their result is not an error.
//!
//! Raw pointers into a `.eval` name the member: `log.eval!/samples/1_epoch_1.json`, which
//! [`sage_trace::RawStore::load`] reads out of the archive.

use crate::support::*;
use crate::{Adapter, AdapterError, SourceFile};
use sage_trace::{Actor, CanonicalTrace, RawRef, TextItem, Turn, TurnKind, WriteOp};
use serde_json::Value;
use std::io::Read;

pub struct Inspect;

impl Adapter for Inspect {
    fn name(&self) -> &'static str {
        "inspect-ai"
    }
    fn versions(&self) -> &'static str {
        "Inspect AI eval logs, format version 2: .json and zipped .eval"
    }
    fn normalize(&self, files: &[SourceFile]) -> Result<CanonicalTrace, AdapterError> {
        normalize_sample(files, 0)
    }
    fn holds_runs(&self) -> bool {
        true
    }
    fn normalize_run(
        &self,
        files: &[SourceFile],
        n: usize,
    ) -> Result<(CanonicalTrace, crate::seen::Seen), AdapterError> {
        Ok((
            normalize_sample(files, n - 1)?,
            crate::seen::Seen::default(),
        ))
    }
}

use sage_trace::archive::{member_names, read_zip_member};

/// The sample members of a `.eval` archive, in order.
fn zip_samples(f: &SourceFile) -> Result<Vec<String>, AdapterError> {
    let mut names: Vec<String> = member_names(&f.path)
        .map_err(|e| AdapterError::new(&f.name, None, e.to_string()))?
        .into_iter()
        .filter(|n| n.starts_with("samples/") && n.ends_with(".json"))
        .collect();
    names.sort_by_key(|n| sample_order(n));
    Ok(names)
}

fn sample_order(n: &str) -> (u64, u64, String) {
    // samples/<id>_epoch_<n>.json: numeric ids in numeric order.
    let stem = n.trim_start_matches("samples/").trim_end_matches(".json");
    let (id, ep) = stem.rsplit_once("_epoch_").unwrap_or((stem, "0"));
    (
        id.parse().unwrap_or(u64::MAX),
        ep.parse().unwrap_or(0),
        stem.to_string(),
    )
}

/// Normalize sample `index` (0-based, in log order) of an Inspect log.
pub(crate) fn normalize_sample(
    files: &[SourceFile],
    index: usize,
) -> Result<CanonicalTrace, AdapterError> {
    let main = crate::support::main_file(files)?;
    let mut head = [0u8; 4];
    let is_zip = std::fs::File::open(&main.path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok()
        && &head == b"PK\x03\x04";
    if is_zip {
        let names = zip_samples(main)?;
        let member = names.get(index).ok_or_else(|| {
            AdapterError::new(
                &main.name,
                None,
                format!(
                    "the log has {} samples, no sample {}",
                    names.len(),
                    index + 1
                ),
            )
        })?;
        let bytes = read_zip_member(&main.path, member, main.limit)
            .map_err(|e| AdapterError::new(&main.name, Some(member.clone()), e.to_string()))?;
        let name = format!("{}!/{}", main.name, member);
        let text = String::from_utf8(bytes).map_err(|e| {
            AdapterError::new(
                &name,
                Some(format!("byte {}", e.utf8_error().valid_up_to())),
                "not UTF-8 text",
            )
        })?;
        let sample = parse_json(&name, &text, None)?;
        let mut b = TraceBuilder::new("inspect-ai", files);
        b.trace.sources.push(name.clone());
        for (k, other) in names.iter().enumerate() {
            if k != index {
                b.drop_record(
                    RawRef::json(&format!("{}!/{}", main.name, other), None, ""),
                    "another sample (run) of the log; sage normalizes one sample per trace",
                );
            }
        }
        sample_turns(&mut b, &sample, &name, "")?;
        return Ok(b.finish());
    }
    let v = read_json(main)?;
    let samples = v.get("samples").and_then(Value::as_array).ok_or_else(|| {
        AdapterError::new(
            &main.name,
            Some("/samples".into()),
            "the log holds no samples (header-only log?)",
        )
    })?;
    let sample = samples.get(index).ok_or_else(|| {
        AdapterError::new(
            &main.name,
            Some("/samples".into()),
            format!(
                "the log has {} samples, no sample {}",
                samples.len(),
                index + 1
            ),
        )
    })?;
    let mut b = TraceBuilder::new("inspect-ai", files);
    for k in 0..samples.len() {
        if k != index {
            b.drop_record(
                RawRef::json(&main.name, None, ptr("/samples", k)),
                "another sample (run) of the log; sage normalizes one sample per trace",
            );
        }
    }
    sample_turns(&mut b, sample, &main.name, &ptr("/samples", index))?;
    Ok(b.finish())
}

fn sample_turns(
    b: &mut TraceBuilder,
    sample: &Value,
    file: &str,
    base: &str,
) -> Result<(), AdapterError> {
    let raw = |p: &str| RawRef::json(file, None, p);
    let messages = sample
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| {
            AdapterError::new(file, Some(ptr(base, "messages")), "sample without messages")
        })?;
    let attachments = sample.get("attachments").cloned().unwrap_or(Value::Null);
    let attach_base = ptr(base, "attachments");
    // Resolve `attachment://<hash>` to the attachment's text and pointer.
    let resolve = |t: &str, p: &str| -> (String, String) {
        match t.strip_prefix("attachment://") {
            Some(h) => match attachments.get(h).and_then(Value::as_str) {
                Some(x) => (x.to_string(), ptr(&attach_base, h)),
                None => (t.to_string(), p.to_string()),
            },
            None => (t.to_string(), p.to_string()),
        }
    };
    let roots = PathRoots::default();
    let mbase = ptr(base, "messages");
    for (i, m) in messages.iter().enumerate() {
        let p = ptr(&mbase, i);
        let role = s(m, "role").unwrap_or("");
        let mut texts: Vec<(String, String)> = Vec::new();
        match m.get("content") {
            Some(Value::String(t)) => texts.push(resolve(t, &ptr(&p, "content"))),
            Some(Value::Array(blocks)) => {
                for (k, bl) in blocks.iter().enumerate() {
                    let bp = ptr(&ptr(&p, "content"), k);
                    for f in ["text", "reasoning"] {
                        if let Some(t) = ne(bl, f) {
                            texts.push(resolve(t, &ptr(&bp, f)));
                        }
                    }
                }
            }
            _ => {}
        }
        match role {
            "system" => {
                for (t, tp) in texts {
                    b.admin("system", &t, raw(&tp));
                }
            }
            "user" => {
                for (t, tp) in texts {
                    b.user(&t, raw(&tp));
                }
            }
            "assistant" => {
                let mut texts = texts.into_iter().filter(|(t, _)| !t.trim().is_empty());
                let mut turn = Turn::new(
                    Actor::new(s(m, "model").unwrap_or("assistant"), Some("assistant")),
                    TurnKind::Planning,
                );
                if let Some((t, tp)) = texts.next() {
                    turn.message = Some(TextItem {
                        text: t,
                        raw: raw(&tp),
                    });
                }
                let mut at = b.push(turn);
                for (t, tp) in texts {
                    at = b.message(
                        Actor::new(s(m, "model").unwrap_or("assistant"), Some("assistant")),
                        TurnKind::Planning,
                        &t,
                        raw(&tp),
                    );
                }
                for (k, c) in m
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .enumerate()
                {
                    let cp = ptr(&ptr(&p, "tool_calls"), k);
                    let name = s(c, "function").unwrap_or("tool");
                    let args = c.get("arguments").map(value_text).unwrap_or_default();
                    b.call(
                        at,
                        tool_call(s(c, "id"), name, &args, raw(&ptr(&cp, "arguments"))),
                    );
                }
            }
            "tool" => {
                let (t, tp) = texts
                    .into_iter()
                    .next()
                    .unwrap_or_else(|| (String::new(), ptr(&p, "content")));
                let err = m.get("error").is_some_and(|e| !e.is_null());
                let id = s(m, "tool_call_id");
                let r = tool_result(id, &t, err, raw(&tp));
                let Some(at) = b.result(r) else {
                    b.drop_record(raw(&p), "tool message before any assistant message");
                    continue;
                };
                if err {
                    continue;
                }
                // The write of the call this result answers.
                let call = id.and_then(|id| {
                    b.trace.turns[at]
                        .tool_calls
                        .iter()
                        .find(|c| c.id.as_deref() == Some(id))
                        .cloned()
                });
                if let Some(call) = call {
                    let args: Value = serde_json::from_str(&call.arguments).unwrap_or(Value::Null);
                    match call.name.as_str() {
                        "text_editor" | "str_replace_based_edit_tool" | "str_replace_editor" => {
                            let Some(path) = s(&args, "path") else {
                                continue;
                            };
                            let a = roots.rel(path);
                            let (op, field) = match s(&args, "command") {
                                Some("create") => (
                                    s(&args, "file_text")
                                        .map(|t| WriteOp::FullContent { content: t.into() }),
                                    "file_text",
                                ),
                                Some("str_replace") => (
                                    s(&args, "old_str").map(|o| WriteOp::StrReplace {
                                        old: o.into(),
                                        new: s(&args, "new_str").unwrap_or("").into(),
                                        all: false,
                                        tolerance: sage_trace::Tolerance::TrimmedRetry,
                                    }),
                                    "new_str",
                                ),
                                Some("insert") => (
                                    match (
                                        args.get("insert_line").and_then(Value::as_u64),
                                        s(&args, "new_str"),
                                    ) {
                                        (Some(l), Some(t)) => Some(WriteOp::Insert {
                                            after_line: l as usize,
                                            text: t.into(),
                                        }),
                                        _ => None,
                                    },
                                    "new_str",
                                ),
                                Some("view") | None => continue,
                                Some(_) => (None, ""),
                            };
                            let mut wraw = call.raw.clone();
                            if let sage_trace::Locator::Json { pointer, .. } = &mut wraw.at {
                                *pointer = ptr(pointer, field);
                            }
                            match op {
                                Some(op) => b.write(at, write(a, op, &call.name, false, wraw)),
                                None => b.drop_record(
                                    call.raw.clone(),
                                    format!("{} call on {a} not interpreted", call.name),
                                ),
                            }
                        }
                        "bash" => {
                            if let Some(cmd) = s(&args, "cmd").or_else(|| s(&args, "command")) {
                                let mut wraw = call.raw.clone();
                                if let sage_trace::Locator::Json { pointer, .. } = &mut wraw.at {
                                    *pointer = ptr(
                                        pointer,
                                        if args.get("cmd").is_some() {
                                            "cmd"
                                        } else {
                                            "command"
                                        },
                                    );
                                }
                                for w in shell_writes(cmd, &roots, wraw.clone()) {
                                    match w {
                                        Ok(w) => b.write(at, w),
                                        Err(e) => b.drop_record(wraw.clone(), e),
                                    }
                                }
                            }
                        }
                        _ => {}
                    }
                }
            }
            other => b.drop_record(raw(&p), format!("message with unknown role {other:?}")),
        }
    }
    if let Some(n) = sample.get("events").and_then(Value::as_array).map(Vec::len) {
        b.note(format!(
            "{n} sample events not mapped: the messages carry the same turns"
        ));
    }
    Ok(())
}
