//! `sage view`: a self-contained static HTML site of a localize run.
//!
//! An index with the Table-5 summary, filters and a search over message text, and one page per
//! case: a timeline of turns with the four scores as bars, quotes highlighted in place, writes
//! with their diffs, the origin turn, the introducing write and missed detection opportunities
//! marked, and the automatic checks. Everything (CSS, JS, data) is inline: no request leaves
//! the page. Long traces stay responsive because the browser skips laying out turns off screen
//! (`content-visibility: auto`) and long texts are folded.

use crate::localize::prepare;
pub(crate) use crate::readable::readable_arguments;
use crate::results::{CaseResult, ResultSet};
use sage_history::origin::Outcome;
use sage_judge::{Dimension, TurnOutcome};
use sage_trace::CanonicalTrace;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

const CSS: &str = r#"
:root{--bg:#fbfbfa;--fg:#1d1d1f;--mut:#6b6b70;--line:#e3e3e0;--accent:#b3261e;--iw:#1a5fb4;--miss:#a05a00;--ok:#26734d}
*{box-sizing:border-box}body{margin:0;font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;background:var(--bg);color:var(--fg)}
header{padding:16px 24px;border-bottom:1px solid var(--line);background:#fff}h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:20px 0 8px}
main{padding:16px 24px;max-width:1200px}.mut{color:var(--mut)}.notice{border-left:3px solid var(--mut);padding:4px 10px}a{color:var(--iw)}
table{border-collapse:collapse;width:100%;background:#fff}th,td{border-bottom:1px solid var(--line);padding:4px 8px;text-align:left;vertical-align:top;overflow-wrap:anywhere}
th{overflow-wrap:normal}#cases{table-layout:fixed;font-size:13px}#cases th:first-child,#cases td:first-child{width:22%}
th{font-weight:600;background:#f3f3f1}.num{text-align:right;font-variant-numeric:tabular-nums}
.filters{display:flex;gap:8px;flex-wrap:wrap;margin:8px 0}.filters input,.filters select{padding:4px 6px;font:inherit}
.turn{background:#fff;border:1px solid var(--line);border-radius:6px;margin:8px 0;padding:8px 12px;content-visibility:auto;contain-intrinsic-size:auto 160px}
.turn.origin{border:2px solid var(--accent)}.turn.iw{box-shadow:inset 4px 0 0 var(--iw)}.turn.admin{opacity:.65}
.th{display:flex;gap:12px;align-items:baseline;flex-wrap:wrap}.badge{font-size:12px;padding:1px 6px;border-radius:10px;border:1px solid currentColor}
.b-origin{color:var(--accent)}.b-iw{color:var(--iw)}.b-miss{color:var(--miss)}.b-fail{color:var(--accent)}
.bars{display:grid;grid-template-columns:190px 120px 16px;gap:2px 6px;font-size:12px;margin:6px 0}.bar{height:10px;background:#eee;border-radius:2px;margin-top:3px}.bar>i{display:block;height:100%;background:#555;border-radius:2px}.bar>i.s0{width:0}.bar>i.s1{width:33%}.bar>i.s2{width:66%}.bar>i.s3{width:100%}
.b-inject{color:#7a1fa2}.inject{color:#7a1fa2}
pre{white-space:pre-wrap;word-break:break-word;background:#f6f6f4;padding:8px;border-radius:4px;margin:4px 0;font:12px/1.4 ui-monospace,Menlo,monospace}
mark{background:#ffe58a}.add{color:#1b6b2a}.del{color:#a4161a}.hunk{color:var(--mut)}
.check-ok{color:var(--ok)}.check-fail{color:var(--accent);font-weight:600}
details>summary{cursor:pointer;color:var(--mut)}.hidden{display:none}
"#;

pub(crate) const INDEX_JS: &str = r#"
(function(){
  const q=document.getElementById('q'), rows=[...document.querySelectorAll('tr.case')];
  const sel=[...document.querySelectorAll('select[data-f]')];
  const idx=JSON.parse(document.getElementById('search-index').textContent);
  function apply(){
    const needle=q.value.trim().toLowerCase().replace(/\s+/g,' ');
    let shown=0;
    for(const r of rows){
      const id=r.dataset.id, t=Object.prototype.hasOwnProperty.call(idx,id)?String(idx[id]):'';
      let ok=!needle||t.includes(needle)||id.toLowerCase().includes(needle);
      for(const s of sel){ if(s.value && r.dataset[s.dataset.f]!==s.value) ok=false; }
      r.classList.toggle('hidden',!ok); if(ok) shown++;
    }
    document.getElementById('shown').textContent=shown;
  }
  q.addEventListener('input',apply); sel.forEach(s=>s.addEventListener('change',apply));
  const p=new URLSearchParams(location.search); if(p.get('q')){q.value=p.get('q');}
  for(const s of sel){ if(p.get(s.dataset.f)) s.value=p.get(s.dataset.f); }
  apply();
  // whether the page fits its window (no sideways scrolling): read by the browser tests
  document.documentElement.dataset.fits=document.documentElement.scrollWidth<=innerWidth?'yes':'no';
})();
"#;

/// HTML-escape text (the one escaping helper, [`sage_markup::html`]), scrubbed of secrets
/// first, so a secret is caught before escaping can change its form.
pub fn esc(s: &str) -> String {
    sage_markup::html(&sage_llm::secrets::scrub(s))
}

/// Escape `text` and wrap every occurrence of each quote (matched with any whitespace
/// between its words, as quotes are verified) in `<mark>`.
pub(crate) fn highlight(text: &str, quotes: &[&str]) -> String {
    let mut spans: Vec<(usize, usize)> = quotes.iter().flat_map(|q| quote_spans(text, q)).collect();
    spans.sort();
    let mut o = String::new();
    let mut at = 0;
    for (s, e) in spans {
        if s < at {
            continue;
        }
        o.push_str(&esc(&text[at..s]));
        o.push_str("<mark>");
        o.push_str(&esc(&text[s..e]));
        o.push_str("</mark>");
        at = e;
    }
    o.push_str(&esc(&text[at..]));
    o
}

/// Where `quote` occurs in `text`, any whitespace between its words.
fn quote_spans(text: &str, quote: &str) -> Vec<(usize, usize)> {
    let words: Vec<String> = quote.split_whitespace().map(regex::escape).collect();
    if words.is_empty() {
        return Vec::new();
    }
    match regex::Regex::new(&words.join(r"\s+")) {
        Ok(re) => re.find_iter(text).map(|m| (m.start(), m.end())).collect(),
        Err(_) => Vec::new(),
    }
}

pub(crate) fn diff_html(diff: &str) -> String {
    let mut o = String::new();
    for line in diff.lines() {
        let class = if line.starts_with("+++") || line.starts_with("---") || line.starts_with("@@")
        {
            "hunk"
        } else if line.starts_with('+') {
            "add"
        } else if line.starts_with('-') {
            "del"
        } else {
            ""
        };
        let _ = writeln!(o, "<span class=\"{class}\">{}</span>", esc(line));
    }
    o
}

/// The Content-Security-Policy of a page: nothing may load, and the only style and script
/// that run are the page's own, named by hash. Inline event handlers (`onerror=`), `style=`
/// attributes, `javascript:` URLs and any injected `<script>` are refused by the browser
/// even if a bug ever let markup from a trace through the escaping.
pub fn csp(script: &str) -> String {
    let script_src = if script.is_empty() {
        "'none'".to_string()
    } else {
        csp_hash(script)
    };
    format!(
        "default-src 'none'; style-src {}; script-src {script_src}; img-src data:; base-uri 'none'; form-action 'none'",
        csp_hash(CSS)
    )
}

/// `'sha256-BASE64'` of an inline element's text, as CSP names it.
fn csp_hash(text: &str) -> String {
    use sha2::{Digest, Sha256};
    format!("'sha256-{}'", base64(&Sha256::digest(text.as_bytes())))
}

fn base64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut o = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for (i, shift) in [18, 12, 6, 0].into_iter().enumerate() {
            if i <= c.len() {
                o.push(A[((n >> shift) & 63) as usize] as char);
            } else {
                o.push('=');
            }
        }
    }
    o
}

pub(crate) fn page(title: &str, body: &str, script: &str) -> String {
    let script_el = if script.is_empty() {
        String::new()
    } else {
        format!("<script>{script}</script>")
    };
    let html = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\
         <meta http-equiv=\"Content-Security-Policy\" content=\"{}\">\
         <title>{}</title><style>{CSS}</style></head><body>{body}{script_el}</body></html>\n",
        csp(script),
        esc(title)
    );
    sage_llm::secrets::scrubbed(html)
}

/// The file name of a case page ([`sage_trace::safe::file_stem`]: injective, length-capped,
/// safe in a URL).
pub(crate) fn case_file(case_id: &str) -> String {
    format!("{}.html", sage_trace::safe::file_stem(case_id))
}

fn origin_label(r: &CaseResult) -> (String, String) {
    match &r.origin.outcome {
        Outcome::Localized {
            origin_turn,
            origin_type,
        } => (
            format!("turn {origin_turn}"),
            origin_type.as_str().to_string(),
        ),
        Outcome::Undetermined { reason } => ("undetermined".into(), reason.as_str().to_string()),
    }
}

/// Escaped text with every `turn N` made a link to that turn's section (`href_base` before
/// the `#`: empty on the case's own page). Only turns the result lists are linked.
fn link_turns(text: &str, href_base: &str, turns: &std::collections::BTreeSet<usize>) -> String {
    let escaped = esc(text);
    let re = regex::Regex::new(r"\bturns? (\d+)\b").expect("static pattern");
    re.replace_all(&escaped, |c: &regex::Captures| {
        let n: usize = c[1].parse().unwrap_or(0);
        if turns.contains(&n) {
            format!("<a href=\"{href_base}#turn-{n}\">{}</a>", &c[0])
        } else {
            c[0].to_string()
        }
    })
    .into_owned()
}

fn turn_set(r: &CaseResult) -> std::collections::BTreeSet<usize> {
    r.turns.iter().map(|t| t.turn).collect()
}

/// What the index shows of one result: kept for the index while the result itself (its
/// scores and turns, megabytes for a long trace) is dropped once its case page is written.
struct IndexRow {
    case_id: String,
    trace: &'static str,
    constructed: bool,
    framework: String,
    cwe: String,
    provenance: &'static str,
    /// The introducing write's cell (a link to its turn, `none` or `cannot-determine`).
    introducing_write: String,
    /// The origin's cell: `turn N` linked to the turn, or `undetermined`.
    origin: String,
    /// The origin type or the reason it is undetermined.
    origin_type: String,
    missed: usize,
    failed_checks: usize,
    injection_turns: usize,
    /// `NAME run N`.
    judge: String,
}

impl IndexRow {
    fn of(r: &CaseResult) -> IndexRow {
        let (origin, origin_type) = origin_label(r);
        let page = format!("cases/{}", case_file(&r.case_id));
        IndexRow {
            case_id: r.case_id.clone(),
            trace: trace_kind(r),
            constructed: r.metadata.trace_source.map(|t| t.as_str()) == Some("constructed"),
            framework: r.framework.clone(),
            cwe: r.anchor.cwe.clone(),
            provenance: r.provenance.provenance.as_str(),
            introducing_write: match r.provenance.introducing_write {
                Some(w) => format!(
                    "<a href=\"cases/{}#turn-{t}\">turn {t}</a>",
                    esc(&case_file(&r.case_id)),
                    t = w.turn
                ),
                None if r.provenance.introducing_write_cannot_determine => {
                    "cannot-determine".into()
                }
                None => "none".into(),
            },
            origin: link_turns(&origin, &page, &turn_set(r)),
            origin_type,
            missed: r.origin.missed_opportunities.len(),
            failed_checks: r.failed_checks().len(),
            injection_turns: r
                .injection
                .iter()
                .map(|f| f.turn)
                .collect::<std::collections::BTreeSet<_>>()
                .len(),
            judge: format!("{} run {}", r.judge.name, r.run),
        }
    }
}

/// The index page: the Table-5 summaries, then a row per result.
fn index_html(
    judges: &[sage_judge::JudgeId],
    summaries: &[crate::results::Summary],
    rows: &[IndexRow],
    texts: &BTreeMap<String, String>,
) -> String {
    let mut b = String::new();
    let _ = write!(
        b,
        "<header><h1>sage — localization results</h1><div class=\"mut\">{} case result(s); judges: {}</div></header><main>",
        rows.len(),
        esc(&judges.iter().map(|j| j.to_string()).collect::<Vec<_>>().join(", "))
    );
    for s in summaries {
        let constructed_only = s.subset.as_deref() == Some("constructed")
            || (s.subset.is_none() && !rows.is_empty() && rows.iter().all(|r| r.constructed));
        if sage_judge::lexicon::is_lexicon(&s.judge) && !constructed_only {
            let _ = write!(
                b,
                "<p class=\"notice\">{}</p>",
                esc(sage_judge::lexicon::BASELINE_NOTICE)
            );
        }
        let _ = write!(b, "<h2>Table 5 — {}{} cases, judge {} run {}</h2><table class=\"summary\"><tr><th></th><th class=num>N</th><th class=num>%</th></tr>", s.subset.as_deref().map(|k| format!("{} ", esc(k))).unwrap_or_default(), s.cases, esc(&s.judge.to_string()), s.run);
        let mut block = |title: &str, m: &BTreeMap<String, crate::results::Count>| {
            let _ = write!(b, "<tr><th colspan=3>{}</th></tr>", esc(title));
            for (k, c) in m {
                let _ = write!(
                    b,
                    "<tr><td>{}</td><td class=num>{}</td><td class=num>{:.2}</td></tr>",
                    esc(k),
                    c.n,
                    c.pct
                );
            }
        };
        block("(a) Code provenance", &s.provenance);
        block("(b) Origin type", &s.origin_type);
        block(
            &format!("(c) Origin timing, agent-introduced (n = {})", s.timing_n),
            &s.timing_agent_introduced,
        );
        block("(d) Missed opportunities", &s.missed_opportunities);
        b.push_str("</table>");
    }
    let distinct = |f: &dyn Fn(&IndexRow) -> String| {
        let mut v: Vec<String> = rows.iter().map(f).collect();
        v.sort();
        v.dedup();
        v
    };
    let filters: [(&str, &str, Vec<String>); 5] = [
        ("trace", "trace", distinct(&|r| r.trace.to_string())),
        ("framework", "framework", distinct(&|r| r.framework.clone())),
        (
            "provenance",
            "code provenance",
            distinct(&|r| r.provenance.to_string()),
        ),
        (
            "origin",
            "origin type",
            distinct(&|r| r.origin_type.clone()),
        ),
        ("judge", "judge", distinct(&|r| r.judge.clone())),
    ];
    b.push_str("<h2>Cases</h2><div class=filters><input id=q type=search placeholder=\"search message text\" size=40>");
    for (key, label, values) in &filters {
        let _ = write!(b, "<select data-f=\"{key}\" aria-label=\"{label}\"><option value=\"\">any {label}</option>");
        for v in values {
            let _ = write!(b, "<option>{}</option>", esc(v));
        }
        b.push_str("</select>");
    }
    b.push_str("<span class=mut><span id=shown></span> shown</span></div>");
    b.push_str("<table id=cases><tr><th>case</th><th>trace</th><th>framework</th><th>CWE</th><th>code provenance</th><th>introducing write</th><th>origin turn</th><th>origin type / reason</th><th>missed detection opportunities</th><th>automatic checks</th><th>addresses the judge</th><th>judge</th></tr>");
    for r in rows {
        let _ = write!(
            b,
            "<tr class=case data-id=\"{id}\" data-trace=\"{tk}\" data-framework=\"{fw}\" data-provenance=\"{pv}\" data-origin=\"{ty}\" data-judge=\"{jd}\">\
             <td><a href=\"cases/{file}\">{id}</a></td><td>{tk}</td><td>{fw}</td><td>{cwe}</td><td>{pv}</td><td>{iw}</td><td>{origin}</td><td>{ty}</td><td>{missed}</td><td>{checks}</td><td>{inj}</td><td>{jd}</td></tr>",
            id = esc(&r.case_id),
            file = esc(&case_file(&r.case_id)),
            tk = r.trace,
            fw = esc(&r.framework),
            cwe = esc(&r.cwe),
            pv = r.provenance,
            iw = r.introducing_write,
            origin = r.origin,
            ty = esc(&r.origin_type),
            missed = r.missed,
            checks = if r.failed_checks == 0 { "<span class=check-ok>all passed</span>".to_string() } else { format!("<span class=check-fail>{} failed</span>", r.failed_checks) },
            jd = esc(&r.judge),
            inj = if r.injection_turns == 0 { "-".to_string() } else { format!("<span class=inject>{} turn(s)</span>", r.injection_turns) },
        );
    }
    b.push_str("</table>");
    // The search index: whitespace-normalized, lowercased message text per case, written so
    // that no text can end the element (`</script>`, `<!--<script>`).
    let idx = sage_markup::json_in_html(texts);
    let _ = write!(
        b,
        "<script type=\"application/json\" id=\"search-index\">{idx}</script></main>"
    );
    page("sage — localization results", &b, INDEX_JS)
}

/// `real`, `constructed` or `unmarked` (the case's `metadata.trace_source`).
fn trace_kind(r: &CaseResult) -> &'static str {
    r.metadata
        .trace_source
        .map(|t| t.as_str())
        .unwrap_or("unmarked")
}

/// `CWE-79, CVE-2021-29434` (or `no CWE`).
fn task_tags(r: &CaseResult) -> String {
    let mut t = vec![r.task_cwe.clone().unwrap_or_else(|| "no CWE".into())];
    t.extend(r.task_cve.clone());
    t.join(", ")
}

/// The page of one case result.
pub(crate) fn case_html(
    r: &CaseResult,
    trace: Option<&CanonicalTrace>,
    diffs: &BTreeMap<usize, String>,
    kinds: &sage_adapters::kinds::Classifier,
) -> String {
    let mut b = String::new();
    let (origin, ty) = origin_label(r);
    let turns = turn_set(r);
    let _ = write!(
        b,
        "<header><h1>{}</h1><div class=mut><a href=\"../index.html\">all cases</a> · framework {} · judge {} run {} · task {} ({})</div></header><main>",
        esc(&r.case_id),
        esc(&r.framework),
        esc(&r.judge.to_string()),
        r.run,
        esc(&r.task_id),
        esc(&task_tags(r))
    );
    if crate::report::baseline_notice_applies(r) {
        let _ = write!(
            b,
            "<p class=\"notice\">{}</p>",
            esc(sage_judge::lexicon::BASELINE_NOTICE)
        );
    }
    // What the agent was asked, in full: a reader must see when the task itself asked for
    // the risky behaviour.
    if !r.task_description.is_empty() {
        let _ = write!(
            b,
            "<h2>Task</h2><table id=task><tr><th>task</th><td>{}</td></tr><tr><th>CWE</th><td>{}</td></tr><tr><th>CVE</th><td>{}</td></tr></table><details id=task-statement{}><summary>Task statement as given to the agent ({} characters)</summary><pre>{}</pre></details>",
            esc(&r.task_id),
            esc(r.task_cwe.as_deref().unwrap_or("none")),
            esc(r.task_cve.as_deref().unwrap_or("none")),
            // a short statement is open; a long one folded, its length shown
            if r.task_description.chars().count() <= 1500 { " open" } else { "" },
            r.task_description.chars().count(),
            esc(&r.task_description)
        );
    }
    let _ = write!(
        b,
        "<h2>Failure anchor</h2><table><tr><th>artefact</th><td>{}</td></tr><tr><th>category</th><td>{}</td></tr><tr><th>CWE</th><td>{}</td></tr><tr><th>fragment</th><td>{}</td></tr><tr><th>description</th><td>{}</td></tr></table>",
        esc(&r.anchor.artefact),
        r.anchor.category.as_str(),
        esc(&r.anchor.cwe),
        r.anchor.fragment.as_deref().map(|f| format!("<pre>{}</pre>", esc(f))).unwrap_or_else(|| "none (no identifiable code location)".into()),
        esc(&r.anchor.description)
    );
    let _ = write!(
        b,
        "<h2>Outcome</h2><table id=outcome><tr><th>code provenance</th><td>{} — {}</td></tr><tr><th>introducing write</th><td>{}</td></tr><tr><th>reconstruction condition</th><td>{}</td></tr><tr><th>origin turn</th><td id=origin-summary>{}</td></tr><tr><th>{}</th><td id=origin-type>{}</td></tr><tr><th>missed detection opportunities</th><td>{}</td></tr><tr><th>turns addressing the judge</th><td id=injection-summary>{}</td></tr></table>",
        r.provenance.provenance.as_str(),
        link_turns(&r.provenance.reason, "", &turns),
        r.provenance.introducing_write.map(|w| if w.deduced { format!("<a href=\"#turn-{t}\">turn {t}</a> (deduced: only the final state shows the change)", t = w.turn) } else { format!("write {} at <a href=\"#turn-{t}\">turn {t}</a>{}", w.write, if w.reinstated { " (reinstated)" } else { "" }, t = w.turn) }).unwrap_or_else(|| if r.provenance.introducing_write_cannot_determine { "cannot-determine (only the final state shows the change)".into() } else { "none".into() }),
        r.reconstruction_condition.as_str(),
        link_turns(&origin, "", &turns),
        if r.origin.outcome.origin().is_some() { "origin type" } else { "undetermined: reason" },
        esc(&ty),
        if r.origin.missed_opportunities.is_empty() { "none".to_string() } else { r.origin.missed_opportunities.iter().map(|m| format!("<a href=\"#turn-{0}\">turn {0}</a>", m.turn)).collect::<Vec<_>>().join(", ") },
        if r.injection.is_empty() { "none".to_string() } else { r.injection.iter().map(|f| format!("<a href=\"#turn-{0}\">turn {0}</a> ({1})", f.turn, esc(&f.rule))).collect::<Vec<_>>().join(", ") }
    );
    b.push_str("<h2>Automatic checks</h2><ul id=checks>");
    for c in &r.checks {
        let _ = write!(
            b,
            "<li class=\"{}\">{} {} — {}</li>",
            if c.passed { "check-ok" } else { "check-fail" },
            if c.passed { "✓" } else { "✗ FAILED" },
            esc(&c.name),
            link_turns(&c.detail, "", &turns)
        );
    }
    for f in &r.write_failures {
        let _ = write!(
            b,
            "<li class=check-fail>write {} at <a href=\"#turn-{t}\">turn {t}</a> not applied: {}</li>",
            f.write,
            esc(&f.reason),
            t = f.turn
        );
    }
    b.push_str("</ul><h2>Timeline</h2><div id=timeline>");
    let origin_turn = r.origin.outcome.origin().map(|o| o.0);
    let iw_turn = r.provenance.introducing_write.map(|w| w.turn);
    for t in &r.turns {
        let outcome = r.scores.iter().find(|s| s.turn() == t.turn);
        let missed = r
            .origin
            .missed_opportunities
            .iter()
            .find(|m| m.turn == t.turn);
        let mut classes = vec!["turn"];
        if origin_turn == Some(t.turn) {
            classes.push("origin");
        }
        if iw_turn == Some(t.turn) {
            classes.push("iw");
        }
        if missed.is_some() {
            classes.push("missed");
        }
        if matches!(outcome, Some(TurnOutcome::Administrative { .. })) {
            classes.push("admin");
        }
        let _ = write!(
            b,
            "<section class=\"{}\" id=\"turn-{}\" data-turn=\"{}\"><div class=th><strong>turn {}</strong><span>{}{}</span><span class=mut>{}</span>",
            classes.join(" "),
            t.turn,
            t.turn,
            t.turn,
            esc(&t.actor.name),
            t.actor.role.as_deref().map(|r| format!(" / {}", esc(r))).unwrap_or_default(),
            t.kind.as_str()
        );
        if origin_turn == Some(t.turn) {
            let _ = write!(
                b,
                "<span class=\"badge b-origin\" data-marker=origin>origin turn · {}</span>",
                esc(&ty)
            );
        }
        if iw_turn == Some(t.turn) {
            b.push_str(
                "<span class=\"badge b-iw\" data-marker=introducing-write>introducing write</span>",
            );
        }
        if let Some(m) = missed {
            let _ = write!(b, "<span class=\"badge b-miss\" data-marker=missed>missed detection opportunity (VR {}, SA {})</span>", m.vr, m.sa);
        }
        let flags: Vec<&sage_judge::injection::InjectionFlag> =
            r.injection.iter().filter(|f| f.turn == t.turn).collect();
        if !flags.is_empty() {
            let rules: Vec<&str> = flags.iter().map(|f| f.rule.as_str()).collect();
            let _ = write!(
                b,
                "<span class=\"badge b-inject\" data-marker=injection title=\"{}\">addresses the judge</span>",
                esc(&rules.join(", "))
            );
        }
        let mut quotes: Vec<&str> = Vec::new();
        match outcome {
            Some(TurnOutcome::Scored(s)) => {
                if s.judgment.security_opportunity {
                    b.push_str("<span class=badge>security opportunity</span>");
                }
                b.push_str("</div><div class=bars>");
                for d in Dimension::ALL {
                    let v = s.score(d);
                    let _ = write!(
                        b,
                        "<span title=\"{}\">{} ({})</span><div class=bar><i class=s{}></i></div><span>{}</span>",
                        esc(s.judgment.dim(d).quote.as_deref().unwrap_or("")),
                        d.name(),
                        d,
                        v.min(3),
                        v
                    );
                }
                b.push_str("</div>");
                quotes = s.quotes.iter().map(|q| q.quote.as_str()).collect();
                for q in &s.quotes {
                    let _ = write!(
                        b,
                        "<div class=mut>{} ({}) {}: “{}”</div>",
                        q.dimension.name(),
                        q.dimension,
                        s.score(q.dimension),
                        esc(&sage_trace::normalize_ws(&q.quote))
                    );
                }
            }
            Some(TurnOutcome::Failed { reason, .. }) => {
                let _ = write!(b, "<span class=\"badge b-fail\">scoring failed</span></div><div class=check-fail>{}</div>", esc(reason));
            }
            Some(TurnOutcome::ContextOverflow {
                needed_tokens,
                budget_tokens,
                ..
            }) => {
                let _ = write!(b, "<span class=\"badge b-fail\">context overflow</span></div><div class=check-fail>needs ~{needed_tokens} tokens, the judge's context budget is {budget_tokens}</div>");
            }
            Some(TurnOutcome::Administrative { .. }) => {
                b.push_str("<span class=badge>administrative (not applicable)</span></div>")
            }
            _ => b.push_str("</div>"),
        }
        for f in &flags {
            let _ = write!(
                b,
                "<div class=inject>text addressed to the judge ({}), treated as data, never as evidence: “{}” [{}]</div>",
                esc(&f.rule),
                esc(&f.excerpt),
                esc(&f.raw.display())
            );
        }
        if let Some(turn) = trace.and_then(|tr| tr.turn(t.turn)) {
            // `label` is trace text (a tool name): escaped in both branches.
            let fold = |b: &mut String, label: &str, body: String, len: usize| {
                if len > 4000 {
                    let _ = write!(
                        b,
                        "<details><summary>{} ({len} characters)</summary><pre>{body}</pre></details>",
                        esc(label)
                    );
                } else {
                    let _ = write!(b, "<pre class=\"{}\">{body}</pre>", esc(label));
                }
            };
            // Trace text is shown as a terminal would show it: no escape sequence or other
            // control character reaches the page (`terminal_text`).
            use sage_markup::terminal_text;
            if let Some(m) = &turn.message {
                let text = terminal_text(&m.text);
                fold(&mut b, "message", highlight(&text, &quotes), text.len());
            }
            for c in &turn.tool_calls {
                let shown = terminal_text(&readable_arguments(c, kinds));
                fold(
                    &mut b,
                    &format!("tool call {}", c.name),
                    highlight(&shown, &quotes),
                    shown.len(),
                );
                // A quote is verified against the record, so one taken from the arguments as
                // recorded (JSON escapes and all) may not occur in the readable form: then
                // the recorded form is shown too, with the quote marked there.
                let recorded = terminal_text(&c.arguments);
                if recorded != shown
                    && quotes.iter().any(|q| {
                        quote_spans(&shown, q).is_empty() && !quote_spans(&recorded, q).is_empty()
                    })
                {
                    let _ = write!(
                        b,
                        "<details class=recorded><summary>arguments as recorded ({} characters)</summary><pre>{}</pre></details>",
                        recorded.len(),
                        highlight(&recorded, &quotes)
                    );
                }
            }
            for res in &turn.tool_results {
                let out = terminal_text(&res.output);
                fold(&mut b, "tool result", esc(&out), out.len());
            }
            for (w, no) in turn.writes.iter().zip(&t.writes) {
                let _ = write!(
                    b,
                    "<div class=mut>write {no} → {} ({}, via {})</div>",
                    esc(&w.artefact),
                    w.op.kind(),
                    esc(&w.via)
                );
                if let Some(d) = diffs.get(no) {
                    let _ = write!(b, "<pre class=diff>{}</pre>", diff_html(d));
                }
            }
        }
        b.push_str("</section>");
    }
    b.push_str("</div></main>");
    page(&format!("sage — {}", r.case_id), &b, "")
}

/// What a view wrote.
#[derive(Debug, Default)]
pub struct ViewReport {
    pub pages: usize,
    /// Cases whose folder could not be re-read: their pages lack text and diffs.
    pub warnings: Vec<String>,
}

/// Write the site: `OUT/index.html` and `OUT/cases/<case>.html` (the first judge run of each
/// case; the index lists every run), cases read again by `rules`, tool calls shown as their
/// classifier reads them. The set goes through a [`ViewSite`] result by result.
pub fn write_site(
    set: &ResultSet,
    locator: &crate::locate::CaseLocator,
    out: &Path,
    rules: &crate::Rules,
) -> std::io::Result<ViewReport> {
    // One id, one case folder, one page: a collision is an error before any page is written.
    crate::sink::results_by_case(set)
        .map_err(|m| std::io::Error::new(std::io::ErrorKind::InvalidData, m))?;
    let mut site = ViewSite::create(out, &set.judges, locator, rules)?;
    for r in &set.results {
        site.add(std::slice::from_ref(r))?;
    }
    site.finish_site(&set.summaries)
}

/// The view as a [`ResultSink`]: each case's page is written as its results arrive (the
/// first judge run's, the case folder read again for its trace and diffs); the index lists
/// every result, so the site keeps a small row per result and writes the index last.
pub struct ViewSite {
    out: PathBuf,
    cases: PathBuf,
    judges: Vec<sage_judge::JudgeId>,
    locator: crate::locate::CaseLocator,
    rules: crate::Rules,
    rows: Vec<IndexRow>,
    /// Each case's message text, for the index's search.
    texts: BTreeMap<String, String>,
    /// Case id → its folder: one id is one folder and one page.
    folders: BTreeMap<String, String>,
    /// A page's file name, lowercased → the case id whose page it is.
    files: BTreeMap<String, String>,
    report: ViewReport,
}

impl ViewSite {
    /// Start the site in `out` for a run of `judges`; case folders are found by `locator`
    /// and read by `rules`.
    pub fn create(
        out: &Path,
        judges: &[sage_judge::JudgeId],
        locator: &crate::locate::CaseLocator,
        rules: &crate::Rules,
    ) -> std::io::Result<ViewSite> {
        let cases = out.join("cases");
        std::fs::create_dir_all(&cases)?;
        Ok(ViewSite {
            out: out.to_path_buf(),
            cases,
            judges: judges.to_vec(),
            locator: locator.clone(),
            rules: rules.clone(),
            rows: Vec::new(),
            texts: BTreeMap::new(),
            folders: BTreeMap::new(),
            files: BTreeMap::new(),
            report: ViewReport::default(),
        })
    }

    /// One case's results: its page, if it has none yet, and their rows in the index.
    pub fn add(&mut self, results: &[CaseResult]) -> std::io::Result<()> {
        self.add_prepared(results, None)
    }

    /// [`ViewSite::add`] with the case the results were computed from, when the caller holds
    /// it (a localize run): the page needs its trace and history, read again without it.
    pub fn add_prepared(
        &mut self,
        results: &[CaseResult],
        prepared: Option<&crate::localize::PreparedCase>,
    ) -> std::io::Result<()> {
        let invalid = |m: String| std::io::Error::new(std::io::ErrorKind::InvalidData, m);
        for r in results {
            match self.folders.get(&r.case_id) {
                Some(dir) if *dir != r.case_dir => {
                    return Err(invalid(format!(
                        "case id {:?} names two case folders ({dir} and {}); give each case its \
                         own id",
                        r.case_id, r.case_dir
                    )))
                }
                Some(_) => {}
                None => {
                    let file = case_file(&r.case_id).to_ascii_lowercase();
                    if let Some(other) = self.files.get(&file) {
                        return Err(invalid(format!(
                            "case ids {other:?}, {:?} differ only in letter case and would share \
                             a file; rename one",
                            r.case_id
                        )));
                    }
                    self.page(r, prepared)?;
                    self.files.insert(file, r.case_id.clone());
                    self.folders.insert(r.case_id.clone(), r.case_dir.clone());
                }
            }
            self.rows.push(IndexRow::of(r));
        }
        Ok(())
    }

    /// The page of `r`'s case, with its trace and diffs: from the case as `given`, else
    /// when its folder can be read again.
    fn page(
        &mut self,
        r: &CaseResult,
        given: Option<&crate::localize::PreparedCase>,
    ) -> std::io::Result<()> {
        let read;
        let prepared = match given {
            Some(p) => Some(p),
            None => {
                read = match self.locator.locate(&r.case_dir) {
                    Err(m) => {
                        self.report.warnings.push(m.0);
                        None
                    }
                    Ok(dir) => match prepare(&dir, &self.rules) {
                        Ok((p, _)) => Some(p),
                        Err(s) => {
                            self.report
                                .warnings
                                .push(format!("{}: {}", s.case, s.message));
                            None
                        }
                    },
                };
                read.as_ref()
            }
        };
        let mut diffs = BTreeMap::new();
        if let Some(p) = prepared {
            for s in &p.history.snapshots {
                if let Some(d) = p.history.write_diff(s.write) {
                    diffs.insert(s.write, d);
                }
            }
            let text: Vec<String> = p
                .trace
                .turns
                .iter()
                .filter_map(|t| t.message.as_ref().map(|m| m.text.clone()))
                .collect();
            self.texts.insert(
                r.case_id.clone(),
                sage_trace::normalize_ws(&text.join(" ").to_lowercase()),
            );
        }
        std::fs::write(
            self.cases.join(case_file(&r.case_id)),
            case_html(r, prepared.map(|p| &p.trace), &diffs, self.rules.kinds()),
        )?;
        self.report.pages += 1;
        Ok(())
    }

    /// Write the index, which ends the site, and say what was written.
    pub fn finish_site(self, summaries: &[crate::results::Summary]) -> std::io::Result<ViewReport> {
        let index = index_html(&self.judges, summaries, &self.rows, &self.texts);
        std::fs::write(self.out.join("index.html"), index)?;
        Ok(self.report)
    }
}

impl crate::sink::ResultSink for ViewSite {
    fn name(&self) -> Option<String> {
        None
    }

    fn documents(&mut self, _: &str) -> std::io::Result<Vec<&mut dyn crate::sink::Entries>> {
        Ok(Vec::new())
    }

    fn case_done(
        &mut self,
        results: &[CaseResult],
        prepared: Option<&crate::localize::PreparedCase>,
    ) -> Result<(), crate::sink::SinkError> {
        let pages = self.cases.display().to_string();
        self.add_prepared(results, prepared)
            .map_err(crate::sink::SinkError::writing(pages))
    }

    fn warnings(&self) -> Vec<String> {
        self.report.warnings.clone()
    }

    /// The index (the pages written without trace text are the sink's `warnings`).
    fn finish(
        self: Box<Self>,
        end: &crate::sink::RunEnd<'_>,
    ) -> Result<(), crate::sink::SinkError> {
        let index = self.out.join("index.html");
        self.finish_site(end.summaries)
            .map(drop)
            .map_err(crate::sink::SinkError::writing(index.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_are_highlighted_across_whitespace_and_escaped() {
        let h = highlight("Use <AES>   in\nECB mode.", &["<AES> in ECB"]);
        assert_eq!(h, "Use <mark>&lt;AES&gt;   in\nECB</mark> mode.");
        assert_eq!(highlight("a & b", &[]), "a &amp; b");
    }

    #[test]
    fn the_view_as_a_sink_writes_the_site_write_site_writes() {
        use crate::sink::{ResultSinks, RunEnd};
        fn copy(from: &Path, to: &Path) {
            std::fs::create_dir_all(to).unwrap();
            for e in std::fs::read_dir(from).unwrap() {
                let e = e.unwrap();
                if e.file_type().unwrap().is_dir() {
                    copy(&e.path(), &to.join(e.file_name()));
                } else {
                    std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
                }
            }
        }
        // a folder of this test's own, so the count of its preparations is this test's
        let tmp = tempfile::tempdir().unwrap();
        let case = tmp.path().join("ag2-fig1a-aes-ecb");
        copy(
            &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../corpora/ag2-fig1a-aes-ecb"),
            &case,
        );
        let prepared = || crate::localize::PREPARED.lock().unwrap()[&case];
        let opts = crate::localize::Options::default();
        let mut set = futures::executor::block_on(crate::localize::localize_dir(&case, &opts));
        assert_eq!(set.results.len(), 1, "{:?}", set.skipped);
        let run = futures::executor::block_on(crate::localize::localize_case(&case, &opts));
        assert_eq!(prepared(), 2);
        // a second judge run of the case: one page, two rows
        let mut again = set.results[0].clone();
        again.run = 1;
        set.results.push(again);
        let rules = crate::Rules::default();
        let locator = crate::locate::CaseLocator::default();
        let (whole, streamed) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        // the case as the run prepared it: the page is made from it, the case is not read again
        let mut sinks = ResultSinks::default();
        sinks.push(ViewSite::create(streamed.path(), &set.judges, &locator, &rules).unwrap());
        sinks.case(&set.results, run.prepared.as_ref()).unwrap();
        let end = RunEnd {
            skipped: &set.skipped,
            problems: &set.problems,
            summaries: &set.summaries,
        };
        sinks.finish(&end).unwrap();
        assert_eq!(prepared(), 2);
        // from a results file, the case is read again
        let report = write_site(&set, &locator, whole.path(), &rules).unwrap();
        assert_eq!((report.pages, report.warnings.len()), (1, 0));
        assert_eq!(prepared(), 3);
        let page = format!("cases/{}", case_file(&set.results[0].case_id));
        for f in ["index.html", page.as_str()] {
            let read = |d: &Path| std::fs::read_to_string(d.join(f)).unwrap();
            assert_eq!(read(whole.path()), read(streamed.path()), "{f}");
        }
        assert!(std::fs::read_to_string(whole.path().join("index.html"))
            .unwrap()
            .contains("2 case result(s)"));

        // fed on its own, the site still refuses one id for two case folders
        let other = tempfile::tempdir().unwrap();
        let mut site = ViewSite::create(other.path(), &set.judges, &locator, &rules).unwrap();
        site.add(&set.results[..1]).unwrap();
        let mut moved = set.results[0].clone();
        moved.case_dir = "elsewhere".into();
        let e = site.add(&[moved]).unwrap_err();
        assert!(e.to_string().contains("names two case folders"), "{e}");
    }

    #[test]
    fn pages_make_no_outside_request() {
        let p = page("t", "<p>x</p>", "");
        assert!(p.contains("default-src 'none'"));
        assert!(!p.contains("http://") && !p.contains("https://"));
    }
}
