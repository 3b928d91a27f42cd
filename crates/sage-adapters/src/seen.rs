//! What a trace itself shows of the files it works on, besides its writes: whole files and
//! numbered lines printed by views (`cat -n`, editor `view`, windows) and editors' pre-edit
//! contents (`old_content`, `originalFile`), the task statement and the model. `sage case init`
//! takes baselines from it, `sage case check` compares baselines and replays with it.
//!
//! Every adapter that records pre-edit views reports them here in one shape; the others report
//! nothing (and `case check` says that it could not compare).

use crate::{AdapterError, SourceFile};
use sage_trace::{CanonicalTrace, RawRef, TextItem};
use std::collections::BTreeMap;

/// A whole file as the trace shows it before the agent first wrote it.
#[derive(Debug, Clone, PartialEq)]
pub struct ShownFile {
    pub content: String,
    /// The record that shows it.
    pub raw: RawRef,
    /// How it was shown (`str_replace_editor view`, `old_content`, ...).
    pub how: String,
}

/// Numbered lines of one file as one tool result printed them.
#[derive(Debug, Clone, PartialEq)]
pub struct ShownView {
    pub artefact: String,
    /// How many writes of the trace (in trace order) came before this view: the view shows the
    /// artefact as it was after that many writes (0: the baseline).
    pub after_writes: usize,
    /// Line number (1-based) → text, tabs as the tool printed them (usually expanded).
    pub lines: BTreeMap<usize, String>,
    /// An edit's snippet (the lines around the change) rather than a view the agent asked for.
    pub snippet: bool,
    pub raw: RawRef,
}

/// Everything a trace shows besides its turns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Seen {
    /// Artefact → the first whole file shown before the agent first wrote it.
    pub full: BTreeMap<String, ShownFile>,
    /// Every numbered view of an artefact, in trace order.
    pub views: Vec<ShownView>,
    /// The first user/task message.
    pub task: Option<TextItem>,
    /// The model the run names, when it names one.
    pub model: Option<String>,
    /// The agent framework the trace comes from, when the adapter can tell (`openhands`).
    pub agent: Option<String>,
    /// False when the adapter records no views at all (nothing to compare with).
    pub reports_views: bool,
}

impl Seen {
    /// Every line shown of `artefact` before any write of the trace touched it, with the
    /// record that shows it: line → (text, raw).
    pub fn lines_before_first_write(&self, artefact: &str) -> BTreeMap<usize, (String, RawRef)> {
        let mut out = BTreeMap::new();
        for v in self
            .views
            .iter()
            .filter(|v| v.artefact == artefact && v.after_writes == 0)
        {
            for (n, l) in &v.lines {
                out.entry(*n).or_insert_with(|| (l.clone(), v.raw.clone()));
            }
        }
        out
    }
}

/// Normalize a trace and report what it shows besides its turns. `framework` forces the
/// adapter (else detected from content).
pub fn normalize_seen(
    files: &[SourceFile],
    framework: Option<&str>,
) -> Result<(CanonicalTrace, Seen), AdapterError> {
    let main = files
        .first()
        .ok_or_else(|| AdapterError::new("-", None, "no trace file given"))?;
    let adapter = match framework {
        Some(n) => crate::by_name(n).ok_or_else(|| {
            AdapterError::new(
                &main.name,
                None,
                format!("unknown framework {n:?}; see `sage adapters`"),
            )
        })?,
        None => crate::detect(&main.path).map_err(|mut e| {
            e.file = main.name.clone();
            e
        })?,
    };
    let head = crate::read_head(&main.path, &main.name)?;
    // Adapters forced onto the stream shape hand it over, so ask the stream adapter directly.
    if crate::claude_stream::is_stream(&head)
        && matches!(adapter.name(), "claude-stream" | "openhands" | "swe-agent")
    {
        let m = match adapter.mapping().filter(|m| m.name() == "claude-stream") {
            Some(m) => m.clone(),
            None => crate::embedded_mapping("claude-stream")?,
        };
        return crate::claude_stream::normalize_seen(&m, files);
    }
    let whole = |m: BTreeMap<String, String>, how: &str| -> BTreeMap<String, ShownFile> {
        m.into_iter()
            .map(|(a, content)| {
                let raw = RawRef::synthetic(&main.name, format!("{how} of {a}"));
                (
                    a,
                    ShownFile {
                        content,
                        raw,
                        how: how.to_string(),
                    },
                )
            })
            .collect()
    };
    let partial = |m: BTreeMap<String, crate::support::NumberedView>| -> Vec<ShownView> {
        m.into_iter()
            .map(|(a, v)| ShownView {
                raw: RawRef::synthetic(
                    &main.name,
                    format!("lines of {a} shown before its first write"),
                ),
                artefact: a,
                after_writes: 0,
                lines: v.lines,
                snippet: false,
            })
            .collect()
    };
    let (trace, seen) = match adapter.name() {
        "openhands" => {
            let (t, (full, part)) = crate::openhands::normalize_with_baselines(files)?;
            (
                t,
                Seen {
                    full: whole(full, "full view or old_content"),
                    views: partial(part),
                    reports_views: true,
                    ..Seen::default()
                },
            )
        }
        "claude-code" => {
            let (t, full) = crate::claude_code::normalize_with_baselines(files)?;
            (
                t,
                Seen {
                    full: whole(full, "whole-file Read or originalFile"),
                    reports_views: true,
                    ..Seen::default()
                },
            )
        }
        "openhands-sdk" => {
            let (t, full) = crate::openhands_sdk::normalize_with_baselines(files)?;
            (
                t,
                Seen {
                    full: whole(full, "old_content"),
                    reports_views: true,
                    ..Seen::default()
                },
            )
        }
        "swe-agent" => {
            let (t, part) = crate::swe_agent::normalize_with_baselines(files)?;
            let full = part
                .iter()
                .filter_map(|(a, v)| v.full_text().map(|c| (a.clone(), c)))
                .collect();
            (
                t,
                Seen {
                    full: whole(full, "window showing the whole file"),
                    views: partial(part),
                    reports_views: true,
                    ..Seen::default()
                },
            )
        }
        "mini-swe-agent" => {
            let (t, full) = crate::mini_swe_agent::normalize_with_baselines(files)?;
            (
                t,
                Seen {
                    full: whole(full, "cat of the whole file"),
                    reports_views: true,
                    ..Seen::default()
                },
            )
        }
        _ => (adapter.normalize(files)?, Seen::default()),
    };
    Ok((trace, seen))
}
