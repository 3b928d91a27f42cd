//! Whole-file states a trace records beside its writes, by write: Claude Code's
//! `toolUseResult.originalFile` (the file as the editor found it, before the edit) and the
//! OpenHands SDK's `FileEditorObservation.old_content`. A replay that is faithful reaches each
//! of them exactly before the write that records it (`sage replay` checks this chain).
//!
//! They are found through each write's own raw pointer: the recorded state is a sibling field
//! of the record the write was taken from, so no adapter needs to carry it.

use sage_trace::{CanonicalTrace, Locator, RawRef, RawStore};

/// The whole file `artefact` as the trace recorded it just before write `before_write`.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedState {
    /// The artefact as the write names it.
    pub artefact: String,
    /// 1-based position of the write among all turn writes (as `sage_history` numbers them).
    pub before_write: usize,
    pub content: String,
    /// `originalFile`, `old_content`.
    pub how: &'static str,
    pub raw: RawRef,
}

/// Where the pre-edit state of a write taken from `pointer` lives: (its pointer, the field's
/// name, the pointer of a flag that says there was no file before).
fn sibling(framework: &str, pointer: &str) -> Option<(String, &'static str, Option<String>)> {
    match framework {
        // `/toolUseResult/newString`, `/toolUseResult/content`, `/toolUseResult/edits/2/...`
        "claude-code" if pointer.starts_with("/toolUseResult/") => {
            Some(("/toolUseResult/originalFile".into(), "originalFile", None))
        }
        "openhands-sdk" => {
            let base = pointer.strip_suffix("/new_content")?;
            Some((
                format!("{base}/old_content"),
                "old_content",
                Some(format!("{base}/prev_exist")),
            ))
        }
        _ => None,
    }
}

/// Every recorded pre-edit state of `trace` (empty for a format that records none). One per
/// raw record: the several edits of one Claude Code `MultiEdit` share one `originalFile`,
/// which is the state before the first of them.
pub fn pre_edit_states(trace: &CanonicalTrace, store: &RawStore) -> Vec<RecordedState> {
    let mut out = Vec::new();
    let mut seen: std::collections::BTreeSet<(String, Option<usize>, String)> = Default::default();
    let writes = trace
        .turns
        .iter()
        .flat_map(|t| t.writes.iter())
        .filter(|w| !w.final_state);
    for (i, w) in writes.enumerate() {
        let Locator::Json {
            line,
            pointer,
            inner: None,
        } = &w.raw.at
        else {
            continue;
        };
        let Some((p, how, absent_flag)) = sibling(&trace.framework, pointer) else {
            continue;
        };
        if !seen.insert((w.raw.file.clone(), *line, p.clone())) {
            continue;
        }
        if let Some(flag) = absent_flag {
            let r = RawRef::json(&w.raw.file, *line, flag);
            if store.resolve(&r).is_ok_and(|v| v.trim() == "false") {
                continue;
            }
        }
        let raw = RawRef::json(&w.raw.file, *line, p);
        // A pointer that does not resolve is a record without the field (a Write that
        // creates a file has no `originalFile`); JSON null resolves as the text `null`.
        let Ok(content) = store.resolve(&raw) else {
            continue;
        };
        if content == "null" && is_null(store, &raw) {
            continue;
        }
        out.push(RecordedState {
            artefact: w.artefact.clone(),
            before_write: i + 1,
            content,
            how,
            raw,
        });
    }
    out
}

/// Whether the value at `raw` is JSON null rather than the string "null".
fn is_null(store: &RawStore, raw: &RawRef) -> bool {
    let Locator::Json { line, pointer, .. } = &raw.at else {
        return false;
    };
    let Some((parent, key)) = pointer.rsplit_once('/') else {
        return false;
    };
    let parent = RawRef::json(&raw.file, *line, parent);
    store.resolve(&parent).is_ok_and(|t| {
        serde_json::from_str::<serde_json::Value>(&t)
            .ok()
            .and_then(|v| v.get(key).map(serde_json::Value::is_null))
            .unwrap_or(false)
    })
}
