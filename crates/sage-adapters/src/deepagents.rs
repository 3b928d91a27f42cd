//! LangChain Deep Agents / LangGraph: message lists by the mapping
//! `crates/sage-adapters/mappings/deepagents.toml` (AIMessage tool_calls, ToolMessage, write_file / edit_file),
//! plus the `files` state of a checkpoint when one is given (in the main file next to the
//! messages, or as an extra file): each file's content becomes a final-state full-content
//! write, placed on the last turn that wrote that path (else the last turn).

use crate::mapping::{for_each_document, MappingRun};
use crate::{Adapter, AdapterError, SourceFile};
use sage_trace::{pointer_token, CanonicalTrace, RawRef, Write, WriteOp};
use serde_json::Value;

/// Where a LangGraph state keeps the virtual filesystem.
const FILES_AT: &[&str] = &[
    "/files",
    "/values/files",
    "/channel_values/files",
    "/checkpoint/channel_values/files",
];

mapping_adapter!(DeepAgents, "deepagents");

impl Adapter for DeepAgents {
    mapping_adapter_items!(DeepAgents, "deepagents");
    fn normalize(&self, files: &[SourceFile]) -> Result<CanonicalTrace, AdapterError> {
        let main = crate::support::main_file(files)?;
        let mut run = MappingRun::new(&self.mapping, files);
        let mut states = Vec::new();
        for_each_document(main, |doc, line| {
            run.feed_document(&doc, line);
            if let Some(fs) = files_state(&doc) {
                states.push((main.name.clone(), line, fs.0, fs.1.clone()));
            }
            Ok(())
        })?;
        for extra in &files[1..] {
            for_each_document(extra, |doc, line| {
                if let Some(fs) = files_state(&doc) {
                    states.push((extra.name.clone(), line, fs.0, fs.1.clone()));
                }
                Ok(())
            })?;
        }
        // The last state wins per path (a later checkpoint supersedes an earlier one).
        if let Some((file, line, at, fs)) = states.pop() {
            add_final_files(&mut run, &file, line, at, &fs);
        }
        Ok(run.finish())
    }
}

fn files_state(doc: &Value) -> Option<(&'static str, &Value)> {
    FILES_AT
        .iter()
        .find_map(|p| doc.pointer(p).filter(|v| v.is_object()).map(|v| (*p, v)))
}

fn add_final_files(run: &mut MappingRun, file: &str, line: Option<usize>, at: &str, fs: &Value) {
    let Some(map) = fs.as_object() else { return };
    for (path, data) in map {
        let base = format!("{at}/{}", pointer_token(path));
        let raw_at = |p: &str| RawRef::json(file, line, format!("{base}{p}"));
        let (content, raw) = match data {
            Value::Null => (None, raw_at("")),
            Value::String(s) => (Some(s.clone()), raw_at("")),
            Value::Object(o) => {
                if o.get("encoding").and_then(Value::as_str) == Some("base64") {
                    run.b.note(format!(
                        "{}: base64 file content not decoded; no final write for {path}",
                        raw_at("").display()
                    ));
                    continue;
                }
                match o.get("content") {
                    Some(Value::String(s)) => (Some(s.clone()), raw_at("/content")),
                    // FileData v1: a list of lines.
                    Some(Value::Array(lines)) => (
                        Some(
                            lines
                                .iter()
                                .map(|l| l.as_str().unwrap_or_default())
                                .collect::<Vec<_>>()
                                .join("\n"),
                        ),
                        raw_at("/content"),
                    ),
                    _ => {
                        run.b.drop_record(raw_at(""), "file state without content");
                        continue;
                    }
                }
            }
            _ => {
                run.b.drop_record(raw_at(""), "file state of unknown shape");
                continue;
            }
        };
        let artefact = crate::edits::clean_path(path);
        let turns = &mut run.b.trace.turns;
        let idx = turns
            .iter()
            .rposition(|t| t.writes.iter().any(|w| w.artefact == artefact))
            .or_else(|| turns.len().checked_sub(1));
        let Some(i) = idx else {
            run.b
                .drop_record(raw, "file state with no agent turn to hold it");
            continue;
        };
        turns[i].writes.push(Write {
            artefact,
            op: match content {
                Some(c) => WriteOp::FullContent { content: c },
                None => WriteOp::Delete,
            },
            via: "files state (checkpoint)".into(),
            final_state: true,
            raw,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sage_trace::{RawStore, TurnKind};

    fn run(json: &str, extra: Option<&str>) -> CanonicalTrace {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.json");
        std::fs::write(&p, json).unwrap();
        let mut files = vec![SourceFile::new("t.json", &p)];
        if let Some(x) = extra {
            let q = dir.path().join("c.json");
            std::fs::write(&q, x).unwrap();
            files.push(SourceFile::new("c.json", &q));
        }
        let t = DeepAgents::embedded().normalize(&files).unwrap();
        let mut store = RawStore::new();
        store.insert("t.json", json.as_bytes().to_vec());
        if let Some(x) = extra {
            store.insert("c.json", x.as_bytes().to_vec());
        }
        let bad = crate::verify_raw_refs(&t, &store);
        assert!(bad.is_empty(), "{bad:?}");
        t
    }

    #[test]
    fn messages_to_dict_with_writes_and_files_state() {
        let msgs = r#"{"messages": [
          {"type": "human", "data": {"content": "fix app.py"}},
          {"type": "ai", "data": {"content": "Writing it.", "tool_calls": [
            {"name": "write_file", "args": {"file_path": "/app.py", "content": "x = 1\n"}, "id": "t1"}]}},
          {"type": "tool", "data": {"content": "Updated file /app.py", "tool_call_id": "t1"}},
          {"type": "ai", "data": {"content": "", "tool_calls": [
            {"name": "edit_file", "args": {"file_path": "/app.py", "old_string": "1", "new_string": "2"}, "id": "t2"}]}},
          {"type": "tool", "data": {"content": "Error: not found", "tool_call_id": "t2", "status": "error"}}
        ], "files": {"/app.py": {"content": "x = 2\n", "created_at": "", "modified_at": ""}}}"#;
        let t = run(msgs, None);
        assert_eq!(t.turns.len(), 2);
        assert_eq!(t.dropped.len(), 1);
        assert_eq!(t.turns[0].kind, TurnKind::Implementation);
        assert_eq!(t.turns[0].writes[0].artefact, "/app.py");
        assert!(t.turns[1].tool_results[0].is_error);
        // edit + the final state from `files`, on the last turn that wrote the path
        assert_eq!(t.turns[1].writes.len(), 2);
        assert!(t.turns[1].writes[1].final_state);
    }

    #[test]
    fn checkpoint_as_extra_file_v1_lines() {
        let msgs = r#"[{"lc": 1, "type": "constructor", "id": ["langchain","schema","messages","AIMessage"],
                        "kwargs": {"content": "done", "type": "ai", "tool_calls": []}}]"#;
        let ckpt = r#"{"channel_values": {"files": {"/a.py": {"content": ["l1", "l2"]}}}}"#;
        let t = run(msgs, Some(ckpt));
        assert_eq!(t.turns.len(), 1);
        let w = &t.turns[0].writes[0];
        assert_eq!(
            w.op,
            WriteOp::FullContent {
                content: "l1\nl2".into()
            }
        );
        assert_eq!(w.raw.file, "c.json");
    }
}
