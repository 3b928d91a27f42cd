//! What a trace itself shows of the files it works on, besides its writes: whole files and
//! numbered lines printed by views (`cat -n`, editor `view`, windows) and editors' pre-edit
//! contents (`old_content`, `originalFile`), the task statement and the model. `sage case init`
//! takes baselines from it, `sage case check` compares baselines and replays with it.
//!
//! Every adapter that records pre-edit views reports them in this one shape
//! (`Adapter::normalize_seen`, reached through `adapters::normalize_seen`); the others report
//! nothing (and `case check` says that it could not compare).

use sage_trace::{RawRef, TextItem};
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
    /// What an adapter that records pre-edit views reports: whole files (`how` they were
    /// shown) and numbered views before the first write, each pointing at the main trace
    /// `main` as a whole (synthetic pointers).
    pub fn shown(
        main: &str,
        full: BTreeMap<String, String>,
        how: &str,
        views: BTreeMap<String, BTreeMap<usize, String>>,
    ) -> Seen {
        Seen {
            full: full
                .into_iter()
                .map(|(a, content)| {
                    let raw = RawRef::synthetic(main, format!("{how} of {a}"));
                    let how = how.to_string();
                    (a, ShownFile { content, raw, how })
                })
                .collect(),
            views: views
                .into_iter()
                .map(|(a, lines)| ShownView {
                    raw: RawRef::synthetic(
                        main,
                        format!("lines of {a} shown before its first write"),
                    ),
                    artefact: a,
                    after_writes: 0,
                    lines,
                    snippet: false,
                })
                .collect(),
            reports_views: true,
            ..Seen::default()
        }
    }

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
