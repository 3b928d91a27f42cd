//! `sage view` of what is not yet a result: a case folder, a single trace file or a folder
//! of them. Each trace gets a page with its turns, messages, tool calls (arguments readable,
//! results folded), writes with their diffs where the file's earlier content is known (the
//! case's baselines; for a bare trace, the whole files the trace itself shows), and a search
//! box over the turns; an index lists the traces with a search over their text. Nothing is
//! judged: scores come from `sage localize` and show in the view of its results.

use crate::readable::readable_arguments;
use crate::view::{diff_html, esc, page, INDEX_JS};
use sage_adapters::SourceFile;
use sage_history::ArtefactHistory;
use sage_trace::CanonicalTrace;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// One thing to show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// A case folder (holding `case.json` or `run.json`).
    Case(PathBuf),
    /// A trace file.
    Trace(PathBuf),
}

/// What `sage view PATH` was given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ViewInput {
    /// A `sage localize` results file or folder.
    Results(PathBuf),
    /// Cases and traces, with the files of a folder that were not read as either (and why).
    Items {
        items: Vec<Item>,
        skipped: Vec<(PathBuf, String)>,
    },
}

/// Why nothing could be shown.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    #[error("{0}: {1}")]
    Input(String, String),
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
}

/// Folders deeper than this below the given one are not searched for traces.
const MAX_DEPTH: usize = 4;
/// A folder with more files than this is refused as a trace folder (pass a narrower one).
const MAX_FILES: usize = 5_000;

fn is_case_dir(p: &Path) -> bool {
    p.join(sage_trace::case::MANIFEST_NAME).is_file()
        || p.join(sage_trace::case::RUN_MANIFEST_NAME).is_file()
}

fn is_results_file(p: &Path) -> bool {
    // A results document says so in its first bytes: `{ "version": "sage.results/1"`.
    let mut head = [0u8; 256];
    let n = std::fs::File::open(p)
        .and_then(|mut f| std::io::Read::read(&mut f, &mut head))
        .unwrap_or(0);
    String::from_utf8_lossy(&head[..n]).contains(crate::results::RESULTS_VERSION)
}

/// What `path` is: results, a case, a trace, or a folder of cases and traces (a file is a
/// trace when `rules` detect its format).
pub fn classify(path: &Path, rules: &crate::Rules) -> Result<ViewInput, ViewError> {
    let meta = std::fs::metadata(path)
        .map_err(|e| ViewError::Input(path.display().to_string(), e.to_string()))?;
    if meta.is_file() {
        return Ok(if is_results_file(path) {
            ViewInput::Results(path.to_path_buf())
        } else {
            ViewInput::Items {
                items: vec![Item::Trace(path.to_path_buf())],
                skipped: Vec::new(),
            }
        });
    }
    if path.join("results.json").is_file() {
        return Ok(ViewInput::Results(path.to_path_buf()));
    }
    if is_case_dir(path) {
        return Ok(ViewInput::Items {
            items: vec![Item::Case(path.to_path_buf())],
            skipped: Vec::new(),
        });
    }
    let mut items = Vec::new();
    let mut skipped = Vec::new();
    let mut seen = 0usize;
    let mut walk = walkdir::WalkDir::new(path)
        .max_depth(MAX_DEPTH)
        .follow_links(false)
        .sort_by_file_name()
        .into_iter();
    while let Some(entry) = walk.next() {
        let Ok(entry) = entry else { continue };
        let p = entry.path();
        if entry.depth() == 0 {
            continue;
        }
        let name = entry.file_name().to_string_lossy();
        if name.starts_with('.') && entry.file_type().is_dir() {
            walk.skip_current_dir();
            continue;
        }
        if entry.file_type().is_dir() {
            if is_case_dir(p) {
                items.push(Item::Case(p.to_path_buf()));
                walk.skip_current_dir();
            }
            continue;
        }
        if !entry.file_type().is_file() {
            continue;
        }
        seen += 1;
        if seen > MAX_FILES {
            return Err(ViewError::Input(
                path.display().to_string(),
                format!("more than {MAX_FILES} files: give a narrower folder"),
            ));
        }
        match sage_adapters::detect(p, &rules.adapters) {
            Ok(_) => items.push(Item::Trace(p.to_path_buf())),
            Err(e) => skipped.push((p.to_path_buf(), e.message.clone())),
        }
    }
    if items.is_empty() {
        return Err(ViewError::Input(
            path.display().to_string(),
            format!(
                "no case, trace or results here ({} file(s) looked at, none read as a trace)",
                skipped.len()
            ),
        ));
    }
    Ok(ViewInput::Items { items, skipped })
}

/// A trace read for the view: its turns, the history of its files, where it came from.
struct Shown {
    title: String,
    kind: &'static str,
    about: Vec<(String, String)>,
    trace: CanonicalTrace,
    history: ArtefactHistory,
}

fn read_item(item: &Item, rules: &crate::Rules) -> Result<Shown, String> {
    match item {
        Item::Case(dir) => {
            let (p, _) = crate::localize::prepare(dir, rules).map_err(|s| s.message)?;
            let mut about = vec![
                ("case folder".to_string(), dir.display().to_string()),
                ("task".into(), p.case.task().id.clone()),
                ("failure anchor".into(), {
                    let a = &p.anchor;
                    format!("{} · {} · {}", a.artefact, a.category.as_str(), a.cwe)
                }),
            ];
            if let Some(f) = &p.anchor.fragment {
                about.push(("fragment".into(), f.clone()));
            }
            Ok(Shown {
                title: p.case.id.clone(),
                kind: "case",
                about,
                trace: p.trace,
                history: p.history,
            })
        }
        Item::Trace(path) => {
            let files = [SourceFile::new(path.display().to_string(), path)];
            let (mut trace, seen) = sage_adapters::normalize_seen(
                &files,
                &sage_adapters::NormalizeOptions {
                    rules: rules.adapters.clone(),
                    ..Default::default()
                },
            )
            .map_err(|e| e.to_string())?;
            trace.separate_submissions();
            // What the trace shows of a file before the agent writes it is its earlier
            // content: whole, or the lines it shows (the one store of file knowledge).
            let mut known = sage_history::knowledge::FileKnowledge::new(&rules.workspace_roots);
            crate::knowledge::learn_from_trace(&mut known, &seen, &|a| a.to_string());
            let history = sage_history::reconstruct_known(&known, &trace, &[]);
            let title = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| path.display().to_string());
            Ok(Shown {
                title,
                kind: "trace",
                about: vec![
                    ("file".into(), path.display().to_string()),
                    (
                        "files shown whole (used as earlier content)".into(),
                        seen.full.len().to_string(),
                    ),
                    (
                        "files shown only in part (their known lines used)".into(),
                        known
                            .names()
                            .filter(|n| {
                                matches!(
                                    known.get(n),
                                    Some(sage_history::knowledge::Known::Lines { .. })
                                )
                            })
                            .count()
                            .to_string(),
                    ),
                ],
                trace,
                history,
            })
        }
    }
}

/// What a view of cases and traces wrote.
#[derive(Debug, Default)]
pub struct TraceViewReport {
    pub pages: usize,
    /// Items that could not be read (the item and why).
    pub failures: Vec<String>,
}

const TRACE_JS: &str = r#"
(function(){
  const q=document.getElementById('tq'), turns=[...document.querySelectorAll('section.turn')];
  function apply(){
    const n=q.value.trim().toLowerCase().replace(/\s+/g,' '); let shown=0;
    for(const t of turns){ const ok=!n||t.textContent.toLowerCase().replace(/\s+/g,' ').includes(n); t.classList.toggle('hidden',!ok); if(ok) shown++; }
    document.getElementById('tshown').textContent=shown;
  }
  q.addEventListener('input',apply);
  const p=new URLSearchParams(location.search); if(p.get('q')){q.value=p.get('q');}
  apply();
  document.documentElement.dataset.fits=document.documentElement.scrollWidth<=innerWidth?'yes':'no';
})();
"#;

/// The page of one trace (no scores: nothing was judged).
fn trace_html(s: &Shown, kinds: &sage_adapters::kinds::Classifier) -> String {
    let mut b = String::new();
    let fw = &s.trace.framework;
    let _ = write!(
        b,
        "<header><h1>{}</h1><div class=mut><a href=\"../index.html\">all traces</a> · {} · read as {} · {} turn(s), {} write(s) · not judged (run <code>sage localize</code> for scores)</div></header><main>",
        esc(&s.title),
        s.kind,
        esc(fw),
        s.trace.turns.len(),
        s.trace.writes().count(),
    );
    b.push_str("<table id=about>");
    for (k, v) in &s.about {
        let _ = write!(b, "<tr><th>{}</th><td>{}</td></tr>", esc(k), esc(v));
    }
    b.push_str("</table>");
    if !s.history.failures.is_empty() {
        b.push_str("<h2>Writes not applied</h2><ul id=failures>");
        for f in &s.history.failures {
            let _ = write!(
                b,
                "<li class=check-fail>write {} at <a href=\"#turn-{t}\">turn {t}</a> to {}: {}</li>",
                f.write,
                esc(&f.artefact),
                esc(&f.reason),
                t = f.turn
            );
        }
        b.push_str("</ul>");
    }
    b.push_str("<h2>Timeline</h2><div class=filters><input id=tq type=search placeholder=\"search this trace\" size=40><span class=mut><span id=tshown></span> turn(s) shown</span></div><div id=timeline>");
    use sage_markup::terminal_text;
    let fold = |b: &mut String, label: &str, text: &str| {
        let body = esc(text);
        if text.len() > 4000 {
            let _ = write!(
                b,
                "<details><summary>{} ({} characters)</summary><pre>{body}</pre></details>",
                esc(label),
                text.len()
            );
        } else {
            let _ = write!(
                b,
                "<div class=mut>{l}</div><pre class=\"{l}\">{body}</pre>",
                l = esc(label)
            );
        }
    };
    let mut write_no = 0usize;
    for t in &s.trace.turns {
        let _ = write!(
            b,
            "<section class=\"turn{}\" id=\"turn-{n}\" data-turn=\"{n}\"><div class=th><strong><a href=\"#turn-{n}\">turn {n}</a></strong><span>{}{}</span><span class=mut>{}</span></div>",
            if t.is_applicable() { "" } else { " admin" },
            esc(&t.actor.name),
            t.actor
                .role
                .as_deref()
                .map(|r| format!(" / {}", esc(r)))
                .unwrap_or_default(),
            t.kind.as_str(),
            n = t.index
        );
        if let Some(m) = &t.message {
            fold(&mut b, "message", &terminal_text(&m.text));
        }
        for c in &t.tool_calls {
            fold(
                &mut b,
                &format!("tool call {}", c.name),
                &terminal_text(&readable_arguments(c, kinds)),
            );
        }
        for r in &t.tool_results {
            fold(&mut b, "tool result", &terminal_text(&r.output));
        }
        for w in &t.writes {
            write_no += 1;
            let _ = write!(
                b,
                "<div class=mut>write {write_no} → {} ({}, via {})</div>",
                esc(&w.artefact),
                w.op.kind(),
                esc(&w.via)
            );
            if let Some(d) = s.history.write_diff(write_no) {
                let _ = write!(b, "<pre class=diff>{}</pre>", diff_html(&d));
            }
        }
        b.push_str("</section>");
    }
    b.push_str("</div></main>");
    page(&format!("sage — {}", s.title), &b, TRACE_JS)
}

/// Write `OUT/index.html` and one page per item under `OUT/traces/` (turns classified and
/// tool calls shown by the classifier of `rules`).
pub fn write_trace_site(
    items: &[Item],
    out: &Path,
    rules: &crate::Rules,
) -> Result<TraceViewReport, ViewError> {
    let pages = out.join("traces");
    std::fs::create_dir_all(&pages).map_err(|e| ViewError::Io(pages.display().to_string(), e))?;
    let mut report = TraceViewReport::default();
    let mut rows = String::new();
    let mut texts: BTreeMap<String, String> = BTreeMap::new();
    let mut used = std::collections::BTreeSet::new();
    for item in items {
        let path = match item {
            Item::Case(p) | Item::Trace(p) => p,
        };
        let s = match read_item(item, rules) {
            Ok(s) => s,
            Err(m) => {
                report.failures.push(format!("{}: {m}", path.display()));
                continue;
            }
        };
        // one page per item, named after it; a second item of the same name gets a number
        let stem = sage_trace::safe::file_stem(&s.title);
        let mut file = format!("{stem}.html");
        let mut k = 2;
        while !used.insert(file.clone()) {
            file = format!("{stem}-{k}.html");
            k += 1;
        }
        let p = pages.join(&file);
        std::fs::write(&p, trace_html(&s, rules.kinds()))
            .map_err(|e| ViewError::Io(p.display().to_string(), e))?;
        report.pages += 1;
        let text: Vec<String> = s
            .trace
            .turns
            .iter()
            .filter_map(|t| t.message.as_ref().map(|m| m.text.clone()))
            .collect();
        let id = file.trim_end_matches(".html").to_string();
        texts.insert(
            id.clone(),
            sage_trace::normalize_ws(&text.join(" ").to_lowercase()),
        );
        let _ = write!(
            rows,
            "<tr class=case data-id=\"{}\"><td><a href=\"traces/{}\">{}</a></td><td>{}</td><td>{}</td><td class=num>{}</td><td class=num>{}</td><td class=num>{}</td></tr>",
            esc(&id),
            esc(&file),
            esc(&s.title),
            s.kind,
            esc(&s.trace.framework),
            s.trace.turns.len(),
            s.trace.writes().count(),
            s.history.failures.len()
        );
    }
    let mut b = String::new();
    let _ = write!(
        b,
        "<header><h1>sage — traces</h1><div class=mut>{} trace(s), not judged: run <code>sage localize</code> on a case for its scores and origin</div></header><main>",
        report.pages
    );
    b.push_str("<div class=filters><input id=q type=search placeholder=\"search message text\" size=40><span class=mut><span id=shown></span> shown</span></div>");
    b.push_str("<table id=cases class=fit><tr><th>trace</th><th>kind</th><th>read as</th><th class=num>turns</th><th class=num>writes</th><th class=num>writes not applied</th></tr>");
    b.push_str(&rows);
    b.push_str("</table>");
    let idx = sage_markup::json_in_html(&texts);
    let _ = write!(
        b,
        "<script type=\"application/json\" id=\"search-index\">{idx}</script></main>"
    );
    let index = out.join("index.html");
    std::fs::write(&index, page("sage — traces", &b, INDEX_JS))
        .map_err(|e| ViewError::Io(index.display().to_string(), e))?;
    if report.pages == 0 {
        return Err(ViewError::Input(
            out.display().to_string(),
            format!(
                "no page written: {}",
                report.failures.first().cloned().unwrap_or_default()
            ),
        ));
    }
    Ok(report)
}
