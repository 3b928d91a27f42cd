//! LangChain Deep Agents / LangGraph: message lists by the mapping
//! `adapters/deepagents.toml` (AIMessage tool_calls, ToolMessage, write_file / edit_file),
//! plus the `files` state of a checkpoint when one is given (in the main file next to the
//! messages, or as an extra file): each file's content becomes a final-state full-content
//! write, placed on the last turn that wrote that path (else the last turn).

use super::mapping::{for_each_document, Mapping, MappingRun};
use super::{embedded_mapping, Adapter, AdapterError, SourceFile};
use crate::trace::{pointer_token, CanonicalTrace, DroppedRecord, RawRef, Write, WriteOp};
use serde_json::Value;
use std::sync::Arc;

/// Where a LangGraph state keeps the virtual filesystem.
const FILES_AT: &[&str] = &[
    "/files",
    "/values/files",
    "/channel_values/files",
    "/checkpoint/channel_values/files",
];

pub struct DeepAgents {
    mapping: Arc<Mapping>,
}

impl DeepAgents {
    pub fn embedded() -> Self {
        let m = embedded_mapping("deepagents")
            .unwrap_or_else(|e| panic!("embedded adapters/deepagents.toml is invalid: {e}"));
        DeepAgents {
            mapping: Arc::new(m),
        }
    }
}

impl Adapter for DeepAgents {
    fn name(&self) -> &'static str {
        "deepagents"
    }
    fn versions(&self) -> &'static str {
        "deepagents 0.1-0.3 message lists (dumpd, messages_to_dict, plain); LangGraph state/checkpoint `files` (FileData v1 lines, v2 content)"
    }
    fn detect(&self, head: &[u8]) -> u8 {
        self.mapping.detect(head)
    }
    fn normalize(&self, files: &[SourceFile]) -> Result<CanonicalTrace, AdapterError> {
        let main = files
            .first()
            .ok_or_else(|| AdapterError::new("-", None, "no trace file given"))?;
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
    fn mapping(&self) -> Option<&Mapping> {
        Some(&self.mapping)
    }
    fn with_mapping(&self, mapping: Mapping) -> Option<Box<dyn Adapter>> {
        Some(Box::new(DeepAgents {
            mapping: Arc::new(mapping),
        }))
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
                    run.trace.notes.push(format!(
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
                        run.trace.dropped.push(DroppedRecord {
                            raw: raw_at(""),
                            reason: "file state without content".into(),
                        });
                        continue;
                    }
                }
            }
            _ => {
                run.trace.dropped.push(DroppedRecord {
                    raw: raw_at(""),
                    reason: "file state of unknown shape".into(),
                });
                continue;
            }
        };
        let artefact = super::edits::clean_path(path);
        let turns = &mut run.trace.turns;
        let idx = turns
            .iter()
            .rposition(|t| t.writes.iter().any(|w| w.artefact == artefact))
            .or_else(|| turns.len().checked_sub(1));
        let Some(i) = idx else {
            run.trace.dropped.push(DroppedRecord {
                raw,
                reason: "file state with no agent turn to hold it".into(),
            });
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
