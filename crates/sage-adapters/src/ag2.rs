//! AG2 / AutoGen: chat_history lists and group chats (by the mapping `crates/sage-adapters/mappings/ag2.toml`),
//! FileLogger runtime logs (by code, same mapping rules), and the Who&When logs (mapping
//! `crates/sage-adapters/mappings/who-and-when.toml`).
//!
//! Runtime log (`autogen_logs/runtime.log`): a plain-text banner line, then one JSON object
//! per line. A turn is a `reply_func_executed` event whose `json_state.reply` is set: the reply
//! of `generate_oai_reply` is the agent's message (actor = `source_name`), the reply of
//! `generate_code_execution_reply` is the result of the previous code blocks, and the reply of
//! `generate_tool_calls_reply` holds tool responses. `received_message` events repeat what the
//! sender said (dropped as copies, except the task from a user agent), chat-completion and
//! function-use records are the LLM and tool calls behind those replies (dropped, with reason).

use crate::mapping::{Mapping, MappingRun, NOT_AGENT_AUTHORED};
use crate::{Adapter, AdapterError, SourceFile};
use sage_trace::{CanonicalTrace, RawRef};
use serde_json::Value;
use std::io::BufRead;

mapping_adapter!(
    /// The AG2 adapter.
    Ag2,
    "ag2"
);

const BANNER: &str = "Started new session with Session ID";

/// Whether the file of `shape` is an AG2 FileLogger runtime log (its session banner, or its
/// event lines), read by its own streaming reader. Only the sampled text and the paths of
/// JSON Lines are read: a shape from [`crate::detect::form_of`] answers as a full one.
pub(crate) fn is_runtime_log(shape: &crate::shape::Shape) -> bool {
    shape.text.trim_start().starts_with(BANNER)
        || (shape.form == crate::shape::Form::Lines
            && ["/event_name", "/json_state", "/source_name"]
                .iter()
                .all(|p| shape.count(p) > 0))
}

impl Adapter for Ag2 {
    mapping_adapter_items!(Ag2, "ag2");
    fn normalize(&self, files: &[SourceFile]) -> Result<CanonicalTrace, AdapterError> {
        let main = crate::support::main_file(files)?;
        // The form only: a chat document is parsed once, by the mapping, not walked first.
        if is_runtime_log(&crate::detect::form_of(&main.path, &main.name, main.limit)?) {
            runtime_log(&self.mapping, files)
        } else {
            self.mapping.normalize(files)
        }
    }
}

/// Normalize a FileLogger runtime log, streaming it line by line.
pub(crate) fn runtime_log(
    m: &Mapping,
    files: &[SourceFile],
) -> Result<CanonicalTrace, AdapterError> {
    let main = &files[0];
    let f = std::fs::File::open(&main.path)
        .map_err(|e| AdapterError::new(&main.name, None, format!("cannot read: {e}")))?;
    let reader = std::io::BufReader::new(f);
    let mut run = MappingRun::new(m, files);
    // The mapping's own compiled pattern (it was compiled again for every log).
    let user = m.user_names();
    for (i, line) in reader.split(b'\n').enumerate() {
        let n = i + 1;
        let bytes = line.map_err(|e| {
            AdapterError::new(
                &main.name,
                Some(format!("line {n}")),
                format!("cannot read: {e}"),
            )
        })?;
        let drop = |run: &mut MappingRun, raw: RawRef, reason: &str| run.b.drop_record(raw, reason);
        let Ok(text) = std::str::from_utf8(&bytes) else {
            drop(&mut run, RawRef::lines(&main.name, n, n), "not UTF-8 text");
            continue;
        };
        if text.trim().is_empty() {
            continue;
        }
        let v: Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(_) if text.starts_with(BANNER) => {
                drop(
                    &mut run,
                    RawRef::lines(&main.name, n, n),
                    "session banner (not a message)",
                );
                continue;
            }
            Err(e) => {
                drop(
                    &mut run,
                    RawRef::lines(&main.name, n, n),
                    &format!("not JSON (logger message?): {e}"),
                );
                continue;
            }
        };
        let source = v
            .get("source_name")
            .and_then(Value::as_str)
            .unwrap_or("agent");
        let event = v.get("event_name").and_then(Value::as_str);
        let state: Option<Value> = v
            .get("json_state")
            .and_then(Value::as_str)
            .and_then(|s| serde_json::from_str(s).ok());
        let here = RawRef::json(&main.name, Some(n), "");
        match (event, state) {
            (Some("reply_func_executed"), Some(st)) => {
                let reply = st.get("reply");
                let final_ = st.get("final").and_then(Value::as_bool).unwrap_or(false);
                if reply.is_none_or(Value::is_null) || !final_ {
                    drop(
                        &mut run,
                        here,
                        "reply function produced no reply (bookkeeping)",
                    );
                    continue;
                }
                run.feed_message_as(&st, Some(n), Some("/json_state"), "/reply", Some(source));
            }
            (Some("received_message"), Some(st)) => {
                let sender = st.get("sender").and_then(Value::as_str).unwrap_or("");
                if user.as_ref().is_some_and(|re| re.is_match(sender))
                    && !st
                        .get("message")
                        .map(crate::mapping::value_text)
                        .is_some_and(|s| s.contains("tool_responses"))
                {
                    drop(&mut run, here, NOT_AGENT_AUTHORED);
                } else {
                    drop(
                        &mut run,
                        here,
                        "received copy of a message (the sender's reply is the turn)",
                    );
                }
            }
            (Some(_), _) => drop(&mut run, here, "agent event without a reply (bookkeeping)"),
            (None, _) if v.get("invocation_id").is_some() => drop(
                &mut run,
                here,
                "LLM call record (the agent's reply is taken from reply_func_executed)",
            ),
            (None, _) if v.get("input_args").is_some() => drop(
                &mut run,
                here,
                "function execution record (its result is the tool response)",
            ),
            (None, _) => drop(
                &mut run,
                here,
                "logger record (client, wrapper or agent creation)",
            ),
        }
    }
    Ok(run.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use sage_trace::{RawStore, TurnKind, WriteOp};

    /// The form-only shape answers `is_runtime_log` as the full one does, for a chat
    /// document larger than the detection sample and for a runtime log.
    #[test]
    fn form_of_answers_is_runtime_log_as_shape_of() {
        let dir = tempfile::tempdir().unwrap();
        let msg = r#"{"content": "x", "role": "assistant", "name": "engineer"}"#;
        let big = format!(r#"{{"chat_history": [{}]}}"#, vec![msg; 20_000].join(","));
        let events = "{\"event_name\": \"e\", \"json_state\": \"{}\", \"source_name\": \"a\"}\n";
        let log = format!("{BANNER} 1\n{}", events.repeat(10));
        for (name, text, runtime) in [("chat.json", big, false), ("runtime.log", log, true)] {
            let p = dir.path().join(name);
            std::fs::write(&p, text).unwrap();
            let limit = sage_trace::safe::DEFAULT_MAX_INPUT_BYTES;
            let full = crate::detect::shape_of(&p, name, limit).unwrap();
            let light = crate::detect::form_of(&p, name, limit).unwrap();
            assert_eq!(is_runtime_log(&full), runtime, "{name}");
            assert_eq!(is_runtime_log(&light), runtime, "{name}");
            assert_eq!(light.form, full.form);
        }
    }

    #[test]
    fn chat_history_group_chat_with_executor() {
        let j = r#"{"chat_id": 1, "chat_history": [
          {"content": "Write app.py that hashes passwords.", "role": "assistant", "name": "Admin"},
          {"content": "Plan: use hashlib.", "role": "user", "name": "planner"},
          {"content": "```python\n# filename: app.py\nimport hashlib\n```", "role": "user", "name": "engineer"},
          {"content": "exitcode: 0 (execution succeeded)\nCode output: ", "role": "user", "name": "executor"},
          {"content": "", "role": "user", "name": "reviewer", "tool_calls": [
             {"id": "c1", "type": "function", "function": {"name": "lint", "arguments": "{\"path\": \"app.py\"}"}}]},
          {"content": "ok", "role": "tool", "name": "executor", "tool_responses": [
             {"tool_call_id": "c1", "role": "tool", "content": "clean"}]},
          {"content": "TERMINATE", "role": "user", "name": "reviewer"}
        ], "summary": "", "cost": {}, "human_input": []}"#;
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("chat.json");
        std::fs::write(&p, j).unwrap();
        let a = Ag2::embedded();
        assert!(a
            .detect(
                &crate::shape::Shape::of_json_text(j),
                crate::rules::DetectRules::embedded()
            )
            .is_some());
        let t = a.normalize(&[SourceFile::new("chat.json", &p)]).unwrap();
        let kinds: Vec<_> = t
            .turns
            .iter()
            .map(|x| (x.actor.name.as_str(), x.kind))
            .collect();
        assert_eq!(
            kinds,
            vec![
                ("planner", TurnKind::Planning),
                ("engineer", TurnKind::Implementation),
                ("reviewer", TurnKind::Review),
                ("reviewer", TurnKind::Administrative)
            ]
        );
        assert_eq!(t.dropped.len(), 1);
        let w = &t.turns[1].writes[0];
        assert_eq!(w.artefact, "app.py");
        assert_eq!(
            w.op,
            WriteOp::FullContent {
                content: "# filename: app.py\nimport hashlib\n".into()
            }
        );
        assert_eq!(t.turns[1].tool_results.len(), 1);
        assert_eq!(t.turns[2].tool_results[0].output, "clean");
        let mut store = RawStore::new();
        store.insert("chat.json", j.as_bytes().to_vec());
        assert!(crate::verify_raw_refs(&t, &store).is_empty());
    }
}
