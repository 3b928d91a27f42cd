//! Reports: the paper's Table 5 summary of a localize run, as data and as a terminal table.

use crate::results::{CaseResult, Count, ResultSet, RunTally, Summary, SummaryRow};
use sage_history::origin::{OriginType, Outcome};
use sage_history::Provenance;
use sage_judge::JudgeId;
use std::collections::BTreeMap;

/// One summary per (judge, run), in order of appearance. When the results mix real and
/// constructed traces (`metadata.trace_source`), each kind is summarized apart (real first):
/// figures over hand-written cases are no evidence about agents and must not dilute the real
/// ones. Cases that do not say which they are form a third group, `unmarked`.
pub fn summaries(results: &[CaseResult]) -> Vec<Summary> {
    let rows: Vec<SummaryRow> = results.iter().map(SummaryRow::from).collect();
    summaries_of(&rows)
}

/// [`summaries`] from the rows a streamed run keeps of each result.
pub fn summaries_of(rows: &[SummaryRow]) -> Vec<Summary> {
    let kinds: std::collections::BTreeSet<&str> = rows.iter().map(|r| r.subset).collect();
    let split = kinds.len() > 1;
    let mut keys: Vec<(&JudgeId, u32)> = Vec::new();
    for r in rows {
        let k = (&r.judge, r.run);
        if !keys.contains(&k) {
            keys.push(k);
        }
    }
    let mut out = Vec::new();
    for (j, run) in keys {
        let group: Vec<&SummaryRow> = rows
            .iter()
            .filter(|r| &r.judge == j && r.run == run)
            .collect();
        if !split {
            out.push(summarize(j.clone(), run, &group));
            continue;
        }
        for kind in ["real", "constructed", "unmarked"] {
            let part: Vec<&SummaryRow> =
                group.iter().copied().filter(|r| r.subset == kind).collect();
            if !part.is_empty() {
                let mut s = summarize(j.clone(), run, &part);
                s.subset = Some(kind.to_string());
                out.push(s);
            }
        }
    }
    out
}

impl RunTally {
    /// The Table-5 summaries of the run.
    pub fn summaries(&self) -> Vec<Summary> {
        summaries_of(&self.rows)
    }

    /// The result set of the run, given its results.
    pub fn into_set(self, results: Vec<CaseResult>) -> ResultSet {
        let summaries = self.summaries();
        ResultSet {
            version: crate::results::RESULTS_VERSION.into(),
            sage_version: env!("CARGO_PKG_VERSION").into(),
            judges: self.judges,
            runs: self.runs,
            case_root: None,
            results,
            skipped: self.skipped,
            problems: self.problems,
            summaries,
        }
    }
}

/// Table 5 over one group of results.
pub fn summarize(judge: JudgeId, run: u32, group: &[&SummaryRow]) -> Summary {
    let n = group.len();
    let mut provenance = BTreeMap::new();
    for p in [
        Provenance::Inherited,
        Provenance::AgentIntroduced,
        Provenance::NoCodeLocation,
    ] {
        let c = group.iter().filter(|r| r.provenance == p).count();
        provenance.insert(p.as_str().to_string(), Count::of(c, n));
    }
    let mut origin_type = BTreeMap::new();
    for t in [
        OriginType::UnaddressedRequirement,
        OriginType::InadequateDefenceSelected,
        OriginType::DefectInCodeChange,
    ] {
        let c = group
            .iter()
            .filter(|r| r.origin.map(|o| o.1) == Some(t))
            .count();
        origin_type.insert(t.as_str().to_string(), Count::of(c, n));
    }
    let undetermined = group.iter().filter(|r| r.origin.is_none()).count();
    origin_type.insert("undetermined".into(), Count::of(undetermined, n));

    let timed: Vec<(usize, usize)> = group
        .iter()
        .filter(|r| r.provenance == Provenance::AgentIntroduced)
        .filter_map(|r| Some((r.origin?.0, r.introducing_turn?)))
        .collect();
    let tn = timed.len();
    let mut timing = BTreeMap::new();
    timing.insert(
        "before-introduction".to_string(),
        Count::of(timed.iter().filter(|(o, w)| o < w).count(), tn),
    );
    timing.insert(
        "at-introduction".to_string(),
        Count::of(timed.iter().filter(|(o, w)| o == w).count(), tn),
    );
    let with_missed = group.iter().filter(|r| r.missed).count();
    let mut missed = BTreeMap::new();
    missed.insert("at-least-one".to_string(), Count::of(with_missed, n));
    missed.insert("none".to_string(), Count::of(n - with_missed, n));
    let mut failed_check_names: BTreeMap<String, usize> = BTreeMap::new();
    for r in group {
        for name in &r.failed_checks {
            *failed_check_names.entry(name.clone()).or_default() += 1;
        }
    }
    Summary {
        judge,
        run,
        subset: None,
        cases: n,
        provenance,
        origin_type,
        timing_agent_introduced: timing,
        timing_n: tn,
        missed_opportunities: missed,
        failed_checks: group.iter().filter(|r| !r.failed_checks.is_empty()).count(),
        failed_check_names,
        turns_scored: group.iter().map(|r| r.turns_scored).sum(),
        turns_failed: group.iter().map(|r| r.turns_failed).sum(),
        turns_administrative: group.iter().map(|r| r.turns_administrative).sum(),
        injection_flagged: group.iter().filter(|r| r.injection_flagged).count(),
        constructed_only: !group.is_empty() && group.iter().all(|r| r.subset == "constructed"),
    }
}

fn row(table: &mut comfy_table::Table, label: &str, c: Option<&Count>) {
    let c = c.copied().unwrap_or(Count { n: 0, pct: 0.0 });
    table.add_row(vec![
        format!("  {label}"),
        c.n.to_string(),
        format!("{:.2}", c.pct),
    ]);
}

/// The summary as a terminal table in the layout of the paper's Table 5.
pub fn render_summary(s: &Summary) -> String {
    use comfy_table::{presets::UTF8_BORDERS_ONLY, Table};
    let mut t = Table::new();
    t.load_preset(UTF8_BORDERS_ONLY);
    // The title goes above the table, not in its header cell: a long judge name would
    // otherwise widen every row past a terminal's width.
    let title = format!(
        "Table 5 — {} {}cases, judge {}, run {}",
        s.cases,
        s.subset
            .as_deref()
            .map(|k| format!("{k} "))
            .unwrap_or_default(),
        s.judge,
        s.run
    );
    t.set_header(vec![String::new(), "N".into(), "%".into()]);
    t.add_row(vec!["(a) Code provenance", "", ""]);
    row(
        &mut t,
        "Inherited from the input file",
        s.provenance.get("inherited"),
    );
    row(
        &mut t,
        "Introduced by the agent",
        s.provenance.get("agent-introduced"),
    );
    row(
        &mut t,
        "No identifiable code location",
        s.provenance.get("no-code-location"),
    );
    t.add_row(vec!["(b) Origin type", "", ""]);
    for ty in [
        OriginType::UnaddressedRequirement,
        OriginType::InadequateDefenceSelected,
        OriginType::DefectInCodeChange,
    ] {
        row(&mut t, ty.label(), s.origin_type.get(ty.as_str()));
    }
    row(&mut t, "Undetermined", s.origin_type.get("undetermined"));
    t.add_row(vec![
        format!("(c) Origin timing, agent-introduced (n = {})", s.timing_n),
        String::new(),
        String::new(),
    ]);
    row(
        &mut t,
        "Before code introduction",
        s.timing_agent_introduced.get("before-introduction"),
    );
    row(
        &mut t,
        "At code introduction",
        s.timing_agent_introduced.get("at-introduction"),
    );
    t.add_row(vec!["(d) Missed opportunities for later detection", "", ""]);
    row(
        &mut t,
        "At least one missed opportunity recorded",
        s.missed_opportunities.get("at-least-one"),
    );
    row(
        &mut t,
        "No missed opportunity recorded",
        s.missed_opportunities.get("none"),
    );
    let mut out = format!("{title}\n{t}");
    out.push_str(&format!(
        "\nturns: {} scored, {} scoring failures, {} administrative (not scored)\n",
        s.turns_scored, s.turns_failed, s.turns_administrative
    ));
    if s.failed_checks > 0 {
        let by_name: Vec<String> = s
            .failed_check_names
            .iter()
            .map(|(n, c)| format!("{n} {c}"))
            .collect();
        out.push_str(&format!(
            "{} result(s) failed an automatic check ({}; see the per-case results).\n",
            s.failed_checks,
            by_name.join(", ")
        ));
    }
    if s.injection_flagged > 0 {
        out.push_str(&format!(
            "\n{} result(s) hold trace text addressed to the judge (see `injection` in the per-case results).\n",
            s.injection_flagged
        ));
    }
    // Constructed cases are written for the lexicon's rule; anything else gets the notice.
    if sage_judge::lexicon::is_lexicon(&s.judge) && !s.constructed_only {
        out.push_str(sage_judge::lexicon::BASELINE_NOTICE);
        out.push('\n');
    }
    out
}

/// How [`explain`] lays its text out: `fold` lines of each text, diff and quote before the
/// rest is counted (0: whole), each line cut to `width` columns when a width is given and
/// texts are folded (the CLI passes the terminal's; `--full` shows everything).
#[derive(Debug, Clone, Copy, Default)]
pub struct Layout {
    pub fold: usize,
    pub width: Option<usize>,
}

/// `text` under a first-line prefix and a continuation prefix, cut after `layout.fold`
/// lines (0: whole) with a count of what was left out, each line cut to the width; control
/// characters other than tabs are dropped so a trace cannot move the cursor or recolour the
/// terminal.
fn folded_to(first: &str, text: &str, layout: Layout, rest: &str) -> String {
    let fold = layout.fold;
    let lines: Vec<&str> = text.trim_end().lines().collect();
    let shown = if fold == 0 {
        lines.len()
    } else {
        fold.min(lines.len())
    };
    let mut o = String::new();
    for (i, l) in lines.iter().take(shown).enumerate() {
        let clean: String = l
            .chars()
            .filter(|c| !c.is_control() || *c == '\t')
            .collect();
        let line = format!("{}{}", if i == 0 { first } else { rest }, clean.trim_end());
        let line = match layout.width {
            Some(w) if fold != 0 => cut(line.trim_end(), w),
            _ => line.trim_end().to_string(),
        };
        o.push_str(&line);
        o.push('\n');
    }
    if shown < lines.len() {
        o.push_str(rest);
        o.push_str(&format!(
            "… {} more line(s) (--full shows all)\n",
            lines.len() - shown
        ));
    }
    o
}

/// `line` cut to `width` characters, the cut marked with `…`.
fn cut(line: &str, width: usize) -> String {
    if line.chars().count() <= width {
        return line.to_string();
    }
    let mut s: String = line.chars().take(width.saturating_sub(1)).collect();
    s.push('…');
    s
}

/// A quote as the text it quotes. A quote cut from a tool call's JSON arguments is shown as
/// `key: value` lines (as [`readable`] shows a whole call, also when the quote stops inside
/// the object), and any other quote with JSON string escapes (`\n`, `\"`, `\uXXXX`) decoded.
pub fn quote_text(q: &str) -> String {
    let t = q.trim();
    if t.starts_with("{\"") {
        if let Some(fields) = json_fields(t) {
            return fields;
        }
    }
    unescaped_quote(q)
}

/// The fields of a JSON object's text, whole or cut short, as `key: value` lines; `None`
/// when the text is not the start of an object of that shape.
fn json_fields(t: &str) -> Option<String> {
    let b = t.as_bytes();
    let mut i = 1; // after `{`
    let mut out = String::new();
    // a JSON string starting at b[i] == '"': its raw inner text and the index after it
    let string_at = |i: usize| -> (usize, usize) {
        let mut j = i + 1;
        while j < b.len() {
            match b[j] {
                b'\\' => j += 2,
                b'"' => return (j, j + 1),
                _ => j += 1,
            }
        }
        (b.len().min(j), b.len())
    };
    while i < b.len() {
        if b[i] != b'"' {
            return None;
        }
        let (kend, next) = string_at(i);
        let key = &t[i + 1..kend.max(i + 1)];
        i = next;
        if i >= b.len() {
            break;
        }
        if b[i] != b':' {
            return None;
        }
        i += 1;
        if i < b.len() && b[i] == b'"' {
            let (vend, next) = string_at(i);
            let value = unescaped_quote(&t[i + 1..vend.max(i + 1)]);
            if value.contains('\n') {
                out.push_str(&format!("{key}:\n"));
                for l in value.lines() {
                    out.push_str(&format!("  {l}\n"));
                }
            } else {
                out.push_str(&format!("{key}: {value}\n"));
            }
            i = next;
        } else {
            // a number, literal, array or object: up to the next top-level `,` or `}`
            let start = i;
            let mut depth = 0i32;
            while i < b.len() {
                match b[i] {
                    b'[' | b'{' => depth += 1,
                    b']' | b'}' if depth > 0 => depth -= 1,
                    b',' | b'}' if depth == 0 => break,
                    b'"' => {
                        i = string_at(i).1;
                        continue;
                    }
                    _ => {}
                }
                i += 1;
            }
            out.push_str(&format!("{key}: {}\n", &t[start..i]));
        }
        if i < b.len() && b[i] == b',' {
            i += 1;
        } else {
            break;
        }
    }
    (!out.is_empty()).then_some(out)
}

/// JSON string escapes (`\n`, `\"`, `\\`, `\uXXXX`) decoded, when the text carries them.
pub fn unescaped_quote(q: &str) -> String {
    if !(q.contains("\\n") || q.contains("\\\"") || q.contains("\\t") || q.contains("\\u")) {
        return q.to_string();
    }
    let mut out = String::with_capacity(q.len());
    let mut it = q.chars().peekable();
    while let Some(c) = it.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => {}
            Some('"') => out.push('"'),
            Some('\\') => out.push('\\'),
            Some('/') => out.push('/'),
            Some('u') => {
                let hex: String = it.clone().take(4).collect();
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(ch) if hex.len() == 4 => {
                        out.push(ch);
                        for _ in 0..4 {
                            it.next();
                        }
                    }
                    _ => out.push_str("\\u"),
                }
            }
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

/// What [`explain`] shows beyond the result: the case's trace, task text and history (the
/// parts of a prepared case; kept apart so `report` does not depend on `localize`).
#[derive(Clone, Copy)]
pub struct ExplainContext<'a> {
    pub trace: &'a sage_trace::CanonicalTrace,
    pub task: &'a str,
    pub history: &'a sage_history::ArtefactHistory,
    /// The turn classifier (which tools are shells, so a shell call shows as `$ COMMAND`).
    pub kinds: &'a sage_adapters::kinds::Classifier,
}

/// Whether a result carries the lexicon's baseline notice: scored by the lexicon, and not a
/// constructed case (those are written for the lexicon's rule).
pub fn baseline_notice_applies(r: &CaseResult) -> bool {
    sage_judge::lexicon::is_lexicon(&r.judge)
        && r.metadata.trace_source.map(|t| t.as_str()) != Some("constructed")
}

/// A turn-by-turn account of one result (what `sage explain` prints).
///
/// With the prepared case, it also shows the task, each turn's text and each write's diff,
/// folded to a few lines each (`fold` lines; 0 shows them whole).
pub fn explain(r: &CaseResult, prepared: Option<ExplainContext<'_>>, layout: Layout) -> String {
    let fold = layout.fold;
    use sage_judge::{Dimension, TurnOutcome};
    use std::fmt::Write as _;
    let trace = prepared.map(|p| p.trace);
    let mut o = String::new();
    let _ = writeln!(
        o,
        "case {} — framework {}{}{}, judge {}, run {}",
        r.case_id,
        r.framework,
        r.trace_format
            .as_deref()
            .map(|f| format!(" (read as {f})"))
            .unwrap_or_default(),
        r.metadata
            .trace_source
            .map(|t| format!(" ({} trace)", t.as_str()))
            .unwrap_or_default(),
        r.judge,
        r.run
    );
    if baseline_notice_applies(r) {
        let _ = writeln!(o, "{}", sage_judge::lexicon::BASELINE_NOTICE);
    }
    let mut tags = vec![r.task_cwe.clone().unwrap_or_else(|| "no CWE".into())];
    tags.extend(r.task_cve.clone());
    let _ = writeln!(
        o,
        "task {} ({}); anchor: {} · {} · {}",
        r.task_id,
        tags.join(", "),
        r.anchor.artefact,
        r.anchor.category.as_str(),
        r.anchor.cwe
    );
    // The statement (folded like the turns' text): whether the task itself asked for the
    // risky behaviour is part of reading an origin. Results keep it, so it shows without the
    // prepared case too.
    let task = prepared.map(|p| p.task).unwrap_or(&r.task_description);
    if !task.trim().is_empty() {
        let _ = write!(
            o,
            "{}",
            folded_to("description: ", task, layout, "             ")
        );
    }
    match &r.anchor.fragment {
        Some(f) => {
            let _ = writeln!(o, "fragment: {}", sage_trace::normalize_ws(f));
        }
        None => {
            let _ = writeln!(o, "fragment: none (no identifiable code location)");
        }
    }
    let iw = r.provenance.introducing_write;
    let _ = writeln!(
        o,
        "code provenance: {} — {}",
        r.provenance.provenance.as_str(),
        r.provenance.reason
    );
    let iw_text = match iw {
        Some(w) if w.deduced => format!(
            "turn {} (deduced{})",
            w.turn,
            if w.reinstated { ", reinstated" } else { "" }
        ),
        Some(w) => format!(
            "write {} at turn {}{}",
            w.write,
            w.turn,
            if w.reinstated { " (reinstated)" } else { "" }
        ),
        None if r.provenance.introducing_write_cannot_determine => "cannot-determine".into(),
        None => "none".into(),
    };
    let _ = writeln!(
        o,
        "introducing write: {iw_text}; reconstruction: {}",
        r.reconstruction_condition.as_str()
    );
    if let Some(b) = &r.provenance.introducing_write_basis {
        let _ = writeln!(o, "  ({b})");
    }
    for n in &r.notes {
        let _ = writeln!(o, "note: {n}");
    }
    let origin = r.origin.outcome.origin();
    let _ = writeln!(o);
    for t in &r.turns {
        let outcome = r.scores.iter().find(|s| s.turn() == t.turn);
        let scores = match outcome {
            Some(TurnOutcome::Scored(s)) => format!(
                "TR {} DI {} VR {} SA {}{}{}",
                s.score(Dimension::TR),
                s.score(Dimension::DI),
                s.score(Dimension::VR),
                s.score(Dimension::SA),
                if s.judgment.security_opportunity {
                    "  opportunity"
                } else {
                    ""
                },
                match s.context.as_ref().and_then(|c| c.digested.first()) {
                    Some([a, b]) => format!("  (turns {a}-{b} digested)"),
                    None => String::new(),
                }
            ),
            Some(TurnOutcome::Administrative { .. }) => "administrative (not scored)".into(),
            Some(TurnOutcome::Failed { reason, .. }) => format!("SCORING FAILED: {reason}"),
            Some(TurnOutcome::ContextOverflow {
                needed_tokens,
                budget_tokens,
                ..
            }) => format!(
                "CONTEXT OVERFLOW: needs ~{needed_tokens} tokens, the budget is {budget_tokens}"
            ),
            None => "no score".into(),
        };
        let mut marks = Vec::new();
        if let Some((ot, ty)) = origin {
            if ot == t.turn {
                marks.push(format!("◀ ORIGIN ({})", ty.as_str()));
            }
        }
        if iw.map(|w| w.turn) == Some(t.turn) {
            marks.push("◀ INTRODUCING WRITE".into());
        }
        for f in r.injection.iter().filter(|f| f.turn == t.turn) {
            marks.push(format!("◀ addresses the judge ({}: {})", f.rule, f.excerpt));
        }
        if let Some(m) = r
            .origin
            .missed_opportunities
            .iter()
            .find(|m| m.turn == t.turn)
        {
            marks.push(format!(
                "◀ missed detection opportunity (VR {}, SA {})",
                m.vr, m.sa
            ));
        }
        let role = t
            .actor
            .role
            .as_deref()
            .map(|r| format!("/{r}"))
            .unwrap_or_default();
        let _ = writeln!(
            o,
            "turn {:>3}  {}{} ({})  {}  {}",
            t.turn,
            t.actor.name,
            role,
            t.kind.as_str(),
            scores,
            marks.join(" ")
        );
        if let (Some(turn), Some(p)) = (trace.and_then(|tr| tr.turn(t.turn)), prepared) {
            let text = crate::readable::turn_text(turn, p.kinds);
            if !text.trim().is_empty() {
                let _ = write!(
                    o,
                    "{}",
                    folded_to("           │ ", &text, layout, "           │ ")
                );
            }
        }
        if let Some(TurnOutcome::Scored(s)) = outcome {
            for q in &s.quotes {
                // the quote as the text it quotes, then where it is in the raw trace
                let text = format!("“{}”", quote_text(&q.quote).trim());
                let head = format!("           {} {} ", q.dimension, s.score(q.dimension));
                let _ = write!(
                    o,
                    "{}",
                    folded_to(&head, &text, layout, "                  ")
                );
                let _ = writeln!(o, "                  [{}]", q.raw.display());
            }
        }
        if let Some(l) = r.origin.links.iter().find(|l| l.turn == t.turn) {
            let methods: Vec<String> = l
                .methods
                .iter()
                .map(|m| {
                    serde_json::to_value(m)
                        .ok()
                        .and_then(|v| v.as_str().map(String::from))
                        .unwrap_or_default()
                })
                .collect();
            let _ = writeln!(
                o,
                "           link to anchor: {}",
                if l.linked {
                    format!("{} ({})", methods.join(", "), l.evidence.join("; "))
                } else {
                    "not linked".into()
                }
            );
        }
        if let Some(turn) = trace.and_then(|tr| tr.turn(t.turn)) {
            for (w, no) in turn.writes.iter().filter(|w| !w.final_state).zip(&t.writes) {
                let _ = writeln!(
                    o,
                    "           write {} → {} ({}{}, via {})",
                    no,
                    w.artefact,
                    w.op.kind(),
                    if w.final_state { ", final state" } else { "" },
                    w.via
                );
                let diff = prepared
                    .and_then(|p| p.history.write_diff(*no))
                    .unwrap_or_default();
                if !diff.trim().is_empty() {
                    let _ = write!(
                        o,
                        "{}",
                        // A diff is worth more lines than a message before it is folded.
                        folded_to(
                            "             ",
                            &diff,
                            Layout {
                                fold: fold.saturating_mul(3),
                                ..layout
                            },
                            "             "
                        )
                    );
                }
            }
        }
    }
    let _ = writeln!(o);
    match &r.origin.outcome {
        Outcome::Localized {
            origin_turn,
            origin_type,
        } => {
            let _ = writeln!(
                o,
                "outcome: localized — origin turn {origin_turn}, {}",
                origin_type.label()
            );
        }
        Outcome::Undetermined { reason } => {
            let _ = writeln!(o, "outcome: undetermined — {}", reason.as_str());
        }
    }
    if let Some(u) = &r.origin.uncertainty {
        let _ = writeln!(o, "uncertainty: {u}");
    }
    if !r.origin.missed_unassessed.is_empty() {
        let _ = writeln!(
            o,
            "not assessed as missed opportunities (scoring failed): turns {:?}",
            r.origin.missed_unassessed
        );
    }
    if let Some(tr) = trace {
        for w in &tr.submissions {
            let _ = writeln!(
                o,
                "submission → {} ({}, via {}; verifies the replay, no turn's write)",
                w.artefact,
                w.op.kind(),
                w.via
            );
        }
    }
    // The rule's three candidates, each with what makes a turn one (SAGE.md, the origin
    // rule), so the line explains itself.
    let c = &r.origin.candidates;
    let fmt = |t: Option<usize>| {
        t.map(|t| format!("turn {t}"))
            .unwrap_or_else(|| "none".into())
    };
    let _ = writeln!(
        o,
        "candidates (the origin is the earlier of (i) and (ii); (iii) only when neither exists):"
    );
    for (label, turn, what) in [
        (
            "(i)   inadequate defence selected",
            c.inadequate_defence_selected,
            "first turn before the introducing write with a defence (DI > 0) linked to the anchor",
        ),
        (
            "(ii)  unaddressed requirement",
            c.unaddressed_requirement,
            "first turn with a security opportunity and TR = 0, DI = 0",
        ),
        (
            "(iii) defect in the code change",
            c.defect_in_code_change,
            "the introducing write itself, expressing TR or DI",
        ),
    ] {
        let _ = writeln!(o, "  {label:<34} {:<9} {what}", fmt(turn));
    }
    for f in &r.write_failures {
        let _ = writeln!(
            o,
            "write {} at turn {} not applied: {}",
            f.write, f.turn, f.reason
        );
    }
    for c in &r.checks {
        let _ = writeln!(
            o,
            "check {} {}: {}",
            if c.passed { "✓" } else { "✗ FAILED" },
            c.name,
            c.detail
        );
    }
    if let Some(e) = &r.expected {
        let _ = writeln!(
            o,
            "expectations of the case: {}",
            if e.matched {
                "all met".to_string()
            } else {
                e.mismatches.join("; ")
            }
        );
    }
    let _ = writeln!(o);
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_cut_from_tool_call_arguments_read_as_text() {
        let q = r#"{"command":"create","path":"/p/t.py","file_text":"import os\nprint(\"hi\")\n"#;
        assert_eq!(
            quote_text(q),
            "command: create\npath: /p/t.py\nfile_text:\n  import os\n  print(\"hi\")\n"
        );
        assert_eq!(quote_text(r#"a \"b\" \u00e9"#), "a \"b\" é");
        assert_eq!(quote_text("plain text"), "plain text");
        // not an object of that shape: shown as it is
        assert_eq!(quote_text("{not json"), "{not json");
    }

    #[test]
    fn folded_lines_are_cut_to_the_width_and_whole_with_full() {
        let text = format!("{}\nb\nc", "x".repeat(50));
        let f = folded_to(
            "> ",
            &text,
            Layout {
                fold: 2,
                width: Some(20),
            },
            "  ",
        );
        assert_eq!(
            f,
            format!(
                "> {}…\n  b\n  … 1 more line(s) (--full shows all)\n",
                "x".repeat(17)
            )
        );
        let full = folded_to(
            "> ",
            &text,
            Layout {
                fold: 0,
                width: Some(20),
            },
            "  ",
        );
        assert!(full.contains(&"x".repeat(50)));
    }
}
