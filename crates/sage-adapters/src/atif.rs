//! Harbor's Agent Trajectory Interchange Format (ATIF, `laude-institute/harbor`
//! `docs/rfcs/0001-trajectory-format.md`, schema versions `ATIF-v1.0` … `ATIF-v1.7`).
//!
//! One JSON object per trajectory: `schema_version`, `session_id`, `agent {name, version,
//! model_name}`, `steps[]` and `final_metrics`. A step is `{step_id, timestamp, source
//! (system | user | agent), model_name, message, reasoning_content, tool_calls
//! [{tool_call_id, function_name, arguments}], observation {results [{source_call_id,
//! content}]}, metrics}`. Agent steps are turns (their `message`, else the
//! `reasoning_content`), their tool calls the calls, the observation results the results
//! (matched by `source_call_id`); user steps are the task (dropped), system steps are
//! administrative. Writes are the plain shell edits of shell-like calls; other tools' effects
//! are not in the format. Delegated subagent trajectories (`subagent_trajectory_ref` of a
//! result: other files, by session id) are noted, not read.

use crate::support::*;
use crate::{Adapter, AdapterError, SourceFile};
use sage_trace::{Actor, CanonicalTrace, RawRef, TextItem, Turn, TurnKind};
use serde_json::Value;

pub struct Atif;

impl Adapter for Atif {
    fn name(&self) -> &'static str {
        "atif"
    }
    fn versions(&self) -> &'static str {
        "Harbor Agent Trajectory Interchange Format ATIF-v1.0 to v1.7 (trajectory.json)"
    }
    fn normalize(&self, files: &[SourceFile]) -> Result<CanonicalTrace, AdapterError> {
        let main = crate::support::main_file(files)?;
        let doc = read_json(main)?;
        let steps = doc
            .get("steps")
            .and_then(Value::as_array)
            .ok_or_else(|| AdapterError::new(&main.name, Some("/steps".into()), "no steps list"))?;
        let f = main.name.as_str();
        let raw = |p: String| RawRef::json(f, None, p);
        let mut b = TraceBuilder::new("atif", files);
        let agent = doc
            .pointer("/agent/name")
            .and_then(Value::as_str)
            .unwrap_or("agent")
            .to_string();
        let roots = PathRoots::default();
        for (i, st) in steps.iter().enumerate() {
            let sp = format!("/steps/{i}");
            let message = ne(st, "message").map(|m| (m, format!("{sp}/message")));
            let message = message.or_else(|| {
                ne(st, "reasoning_content").map(|m| (m, format!("{sp}/reasoning_content")))
            });
            match s(st, "source").unwrap_or("") {
                "user" => match message {
                    Some((m, p)) => b.user(m, raw(p)),
                    None => b.drop_record(raw(sp.clone()), "user step without a message"),
                },
                "system" => match message {
                    Some((m, p)) => {
                        b.admin("system", m, raw(p));
                    }
                    None => b.drop_record(raw(sp.clone()), "system step without a message"),
                },
                "agent" => {
                    let model = s(st, "model_name")
                        .or_else(|| doc.pointer("/agent/model_name").and_then(Value::as_str));
                    let mut t = Turn::new(Actor::new(&agent, model), TurnKind::Planning);
                    t.message = message.map(|(m, p)| TextItem {
                        text: m.to_string(),
                        raw: raw(p),
                    });
                    let calls = st
                        .get("tool_calls")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default();
                    if t.message.is_none() && calls.is_empty() {
                        b.drop_record(raw(sp.clone()), "agent step without message or tool call");
                        continue;
                    }
                    let at = b.push(t);
                    for (j, c) in calls.iter().enumerate() {
                        let cp = format!("{sp}/tool_calls/{j}");
                        let name = s(c, "function_name").unwrap_or("tool");
                        let args = c.get("arguments").map(value_text).unwrap_or_default();
                        let ar = if c.get("arguments").is_some() {
                            raw(format!("{cp}/arguments"))
                        } else {
                            raw(cp.clone())
                        };
                        b.call(at, tool_call(s(c, "tool_call_id"), name, &args, ar.clone()));
                        // Plain shell edits of shell-like tools.
                        let cmd = ["command", "cmd"].iter().find_map(|k| {
                            c.pointer(&format!("/arguments/{k}"))
                                .and_then(Value::as_str)
                                .map(|x| (x, raw(format!("{cp}/arguments/{k}"))))
                        });
                        if let Some((cmd, ar)) = cmd {
                            for w in shell_writes(cmd, &roots, ar.clone()) {
                                match w {
                                    Ok(w) => b.write(at, w),
                                    Err(e) => b.drop_record(ar.clone(), e),
                                }
                            }
                        }
                    }
                    let results = st
                        .pointer("/observation/results")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default();
                    for (k, r) in results.iter().enumerate() {
                        let rp = if r.get("content").is_some() {
                            format!("{sp}/observation/results/{k}/content")
                        } else {
                            format!("{sp}/observation/results/{k}")
                        };
                        let text = r.get("content").map(value_text).unwrap_or_default();
                        let id = s(r, "source_call_id");
                        if b.result(tool_result(id, &text, false, raw(rp.clone())))
                            .is_none()
                        {
                            b.drop_record(raw(rp), "observation before any agent turn");
                        }
                    }
                }
                other => b.drop_record(
                    raw(sp.clone()),
                    format!("step source {other:?} is not system, user or agent"),
                ),
            }
        }
        // RFC 0001: a result may reference the trajectories of subagents it delegated to,
        // each its own file; this trace holds only what the parent agent did.
        let refs: Vec<&str> = steps
            .iter()
            .filter_map(|st| st.pointer("/observation/results").and_then(Value::as_array))
            .flatten()
            .filter_map(|r| r.get("subagent_trajectory_ref").and_then(Value::as_array))
            .flatten()
            .map(|x| s(x, "session_id").unwrap_or("?"))
            .collect();
        if !refs.is_empty() {
            b.note(format!(
                "{} delegated subagent trajector{} not read (session {}): each is its own ATIF file",
                refs.len(),
                if refs.len() == 1 { "y" } else { "ies" },
                refs.join(", ")
            ));
        }
        Ok(b.finish())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delegated_subagent_trajectory_is_noted() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("trajectory.json");
        std::fs::write(
            &p,
            r#"{"schema_version": "ATIF-v1.4", "session_id": "s", "agent": {"name": "a", "version": "1"},
 "steps": [
  {"step_id": 1, "source": "user", "message": "Summarise the repo."},
  {"step_id": 2, "source": "agent", "message": "Delegating.",
   "tool_calls": [{"tool_call_id": "d1", "function_name": "delegate", "arguments": {}}],
   "observation": {"results": [{"source_call_id": "d1",
     "subagent_trajectory_ref": [{"session_id": "sub-1", "trajectory_path": "sub-1.json"}]}]}}
 ]}"#,
        )
        .unwrap();
        let t = Atif
            .normalize(&[SourceFile::new("trajectory.json", &p)])
            .unwrap();
        assert_eq!(t.turns.len(), 1);
        assert_eq!(t.turns[0].tool_results.len(), 1);
        assert!(
            t.notes
                .iter()
                .any(|n| n.contains("1 delegated subagent trajectory not read (session sub-1)")),
            "{:?}",
            t.notes
        );
    }
}
