//! The paper's reliability report (Tables 6 and 7, Figures 5 and 6) from simple inputs: cases
//! with their subgroups and SAGE's artefact labels, origin assignments per (judge, run), and
//! human annotations. Rendering to Markdown and SVG lives here too; writing files is the CLI's.
//!
//! Consistency (runs, judges; origin type and turn) and agreement with humans (code provenance,
//! introducing write) are separate sections and are never pooled.

use crate::measures::{
    consistency, pair_agreement, ArtefactField, ArtefactLabel, Coefficient, Consistency,
    OriginRating, PairAgreement, Share, Source, DIMENSIONS,
};
use crate::resample::{
    leave_one_task_out, task_disjoint_partitions, LeaveOneOut, PartitionSummary,
};
use crate::stats::Level;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

pub mod schema;

/// Version tag of `reliability.json`.
pub const REPORT_VERSION: &str = "sage.reliability/1";

/// Groups smaller than this are marked (the paper's asterisk).
pub const SMALL_GROUP: usize = 10;

/// Subgroup dimensions, in report order.
pub const SUBGROUPS: [&str; 4] = ["framework", "base model", "deficiency", "condition"];

/// One case: task, subgroup values and SAGE's artefact labels.
#[derive(Debug, Clone, PartialEq)]
pub struct CaseInfo {
    pub case_id: String,
    pub task_id: String,
    /// Subgroup name (see [`SUBGROUPS`]) → value.
    pub subgroups: BTreeMap<String, String>,
    /// SAGE's code provenance and introducing write (judge-independent).
    pub sage: ArtefactLabel,
}

/// Origin assignments of one judge in one run.
#[derive(Debug, Clone, PartialEq)]
pub struct RatingSource {
    pub judge: String,
    pub run: u32,
    pub ratings: Vec<OriginRating>,
}

/// One annotator's labels.
#[derive(Debug, Clone, PartialEq)]
pub struct Annotations {
    pub annotator: String,
    pub labels: Vec<ArtefactLabel>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ReportInput {
    pub cases: Vec<CaseInfo>,
    pub sources: Vec<RatingSource>,
    pub annotators: Vec<Annotations>,
    /// The primary judge; default: the judge of the first source.
    pub primary_judge: Option<String>,
    pub partitions: usize,
    pub seed: u64,
    /// Level of the origin-turn alpha.
    pub turn_level: Level,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ConsistencySection {
    /// The primary judge's runs (Table 6(a) "Repeated scoring").
    pub repeated: Option<Consistency>,
    /// The first run of every judge ("Cross judge").
    pub cross_judge: Option<Consistency>,
    /// All runs of all judges ("All four ratings" in the paper).
    pub all_ratings: Option<Consistency>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct HumanComparison {
    /// `R1 vs R2`, `SAGE vs R1`, ...
    pub comparison: String,
    /// Which cases: `shared` (labelled by every annotator) or `all`.
    pub cases: String,
    pub provenance: PairAgreement,
    pub introducing_write: PairAgreement,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ResamplingField {
    /// Percent agreement on all cases.
    pub all: Option<f64>,
    pub n: usize,
    pub partitions: PartitionSummary,
    pub leave_one_task_out: LeaveOneOut,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Resampling {
    /// The annotator SAGE is compared with (the first).
    pub annotator: String,
    pub tasks: usize,
    pub provenance: ResamplingField,
    pub introducing_write: ResamplingField,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SubgroupRow {
    pub group: String,
    pub n: usize,
    /// Fewer than ten cases.
    pub small: bool,
    /// SAGE vs the first annotator.
    pub provenance: Option<Share>,
    pub introducing_write: Option<Share>,
    /// Exact origin-turn agreement among jointly localized cases.
    pub turn_repeated: Option<Share>,
    pub turn_cross_judge: Option<Share>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SubgroupTable {
    pub subgroup: String,
    pub rows: Vec<SubgroupRow>,
}

/// Everything `sage reliability` reports.
#[derive(Debug, Clone, PartialEq)]
pub struct ReliabilityReport {
    pub version: String,
    pub cases: usize,
    pub primary_judge: Option<String>,
    pub judges: Vec<String>,
    pub runs_of_primary: Vec<u32>,
    pub annotators: Vec<String>,
    pub consistency: ConsistencySection,
    pub human: Vec<HumanComparison>,
    pub resampling: Option<Resampling>,
    pub subgroups: Vec<SubgroupTable>,
    pub notes: Vec<String>,
}

fn to_source(s: &RatingSource, cases: Option<&BTreeSet<String>>) -> Source {
    Source {
        name: format!("{} run {}", s.judge, s.run),
        ratings: s
            .ratings
            .iter()
            .filter(|r| cases.is_none_or(|c| c.contains(&r.case_id)))
            .cloned()
            .collect(),
    }
}

struct Groups<'a> {
    repeated: Vec<&'a RatingSource>,
    cross: Vec<&'a RatingSource>,
    all: Vec<&'a RatingSource>,
}

fn groups<'a>(input: &'a ReportInput, primary: Option<&str>) -> Groups<'a> {
    let mut repeated: Vec<&RatingSource> = input
        .sources
        .iter()
        .filter(|s| Some(s.judge.as_str()) == primary)
        .collect();
    repeated.sort_by_key(|s| s.run);
    // First run of every judge, primary first.
    let mut cross: Vec<&RatingSource> = Vec::new();
    if let Some(p) = repeated.first() {
        cross.push(p);
    }
    let mut others: BTreeMap<&str, &RatingSource> = BTreeMap::new();
    for s in &input.sources {
        if Some(s.judge.as_str()) != primary {
            let e = others.entry(s.judge.as_str()).or_insert(s);
            if s.run < e.run {
                *e = s;
            }
        }
    }
    cross.extend(others.values());
    Groups {
        repeated,
        cross,
        all: input.sources.iter().collect(),
    }
}

fn consistency_of(
    sources: &[&RatingSource],
    cases: Option<&BTreeSet<String>>,
    level: Level,
) -> Option<Consistency> {
    (sources.len() >= 2).then(|| {
        let s: Vec<Source> = sources.iter().map(|s| to_source(s, cases)).collect();
        consistency(&s, level)
    })
}

fn labels_of(cases: &[CaseInfo]) -> Vec<ArtefactLabel> {
    cases.iter().map(|c| c.sage.clone()).collect()
}

/// Builds the report.
pub fn build(input: &ReportInput) -> ReliabilityReport {
    let primary = input
        .primary_judge
        .clone()
        .or_else(|| input.sources.first().map(|s| s.judge.clone()));
    let g = groups(input, primary.as_deref());
    let mut judges: Vec<String> = input.sources.iter().map(|s| s.judge.clone()).collect();
    judges.sort();
    judges.dedup();
    let mut notes = Vec::new();
    let level = input.turn_level;

    let consistency = ConsistencySection {
        repeated: consistency_of(&g.repeated, None, level),
        cross_judge: consistency_of(&g.cross, None, level),
        all_ratings: (judges.len() > 1 && g.all.len() > g.cross.len())
            .then(|| consistency_of(&g.all, None, level))
            .flatten(),
    };
    if consistency.repeated.is_none() {
        notes.push("repeated scoring: the primary judge has fewer than two runs".into());
    }
    if consistency.cross_judge.is_none() || judges.len() < 2 {
        notes.push("cross-judge comparison: only one judge in the results".into());
    }

    // Agreement with humans.
    let sage = labels_of(&input.cases);
    let mut human = Vec::new();
    let shared: BTreeSet<String> = {
        let mut it = input.annotators.iter().map(|a| {
            a.labels
                .iter()
                .map(|l| l.case_id.clone())
                .collect::<BTreeSet<_>>()
        });
        match it.next() {
            Some(first) => it.fold(first, |acc, s| acc.intersection(&s).cloned().collect()),
            None => BTreeSet::new(),
        }
    };
    let compare =
        |name: String, which: &str, a: &[ArtefactLabel], b: &[ArtefactLabel], c| HumanComparison {
            comparison: name,
            cases: which.into(),
            provenance: pair_agreement(a, b, ArtefactField::Provenance, c),
            introducing_write: pair_agreement(a, b, ArtefactField::IntroducingWrite, c),
        };
    let multi = input.annotators.len() > 1;
    for (i, a) in input.annotators.iter().enumerate() {
        for b in &input.annotators[i + 1..] {
            human.push(compare(
                format!("{} vs {}", a.annotator, b.annotator),
                "shared",
                &a.labels,
                &b.labels,
                None,
            ));
        }
    }
    if multi {
        for a in &input.annotators {
            human.push(compare(
                format!("SAGE vs {}", a.annotator),
                "shared",
                &sage,
                &a.labels,
                Some(&shared),
            ));
        }
    }
    for a in &input.annotators {
        human.push(compare(
            format!("SAGE vs {}", a.annotator),
            "all",
            &sage,
            &a.labels,
            None,
        ));
    }
    if input.annotators.is_empty() {
        notes.push("no human annotations given: Table 6(b), 6(c) and Table 7 are empty".into());
    }

    // Task-disjoint resampling: SAGE vs the first annotator.
    let task_of: BTreeMap<&str, &str> = input
        .cases
        .iter()
        .map(|c| (c.case_id.as_str(), c.task_id.as_str()))
        .collect();
    let resampling = input.annotators.first().map(|r1| {
        let field_items = |f: ArtefactField| -> Vec<(String, bool)> {
            let r1m: BTreeMap<&str, &ArtefactLabel> =
                r1.labels.iter().map(|l| (l.case_id.as_str(), l)).collect();
            input
                .cases
                .iter()
                .filter_map(|c| {
                    let h = r1m.get(c.case_id.as_str())?;
                    let (x, y) = (f.get(&c.sage)?, f.get(h)?);
                    Some((task_of[c.case_id.as_str()].to_string(), x == y))
                })
                .collect()
        };
        let pct = |items: &[&(String, bool)]| -> Option<f64> {
            (!items.is_empty()).then(|| {
                100.0 * items.iter().filter(|(_, same)| *same).count() as f64 / items.len() as f64
            })
        };
        let field = |f: ArtefactField| -> ResamplingField {
            let items = field_items(f);
            let refs: Vec<&(String, bool)> = items.iter().collect();
            ResamplingField {
                all: pct(&refs),
                n: items.len(),
                partitions: task_disjoint_partitions(
                    &items,
                    |i| i.0.clone(),
                    input.partitions,
                    input.seed,
                    pct,
                ),
                leave_one_task_out: leave_one_task_out(&items, |i| i.0.clone(), pct),
            }
        };
        let tasks: BTreeSet<&str> = input.cases.iter().map(|c| c.task_id.as_str()).collect();
        Resampling {
            annotator: r1.annotator.clone(),
            tasks: tasks.len(),
            provenance: field(ArtefactField::Provenance),
            introducing_write: field(ArtefactField::IntroducingWrite),
        }
    });

    // Subgroups.
    let mut subgroups = Vec::new();
    for sg in SUBGROUPS {
        let mut by: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for c in &input.cases {
            if let Some(v) = c.subgroups.get(sg) {
                by.entry(v.clone()).or_default().insert(c.case_id.clone());
            }
        }
        if by.is_empty() {
            continue;
        }
        let rows = by
            .into_iter()
            .map(|(group, ids)| {
                let (prov, iw) = match input.annotators.first() {
                    Some(r1) => (
                        Some(
                            pair_agreement(
                                &sage,
                                &r1.labels,
                                ArtefactField::Provenance,
                                Some(&ids),
                            )
                            .agreement,
                        ),
                        Some(
                            pair_agreement(
                                &sage,
                                &r1.labels,
                                ArtefactField::IntroducingWrite,
                                Some(&ids),
                            )
                            .agreement,
                        ),
                    ),
                    None => (None, None),
                };
                SubgroupRow {
                    n: ids.len(),
                    small: ids.len() < SMALL_GROUP,
                    provenance: prov,
                    introducing_write: iw,
                    turn_repeated: consistency_of(&g.repeated, Some(&ids), level)
                        .map(|c| c.exact_turn_agreement),
                    turn_cross_judge: consistency_of(&g.cross, Some(&ids), level)
                        .map(|c| c.exact_turn_agreement),
                    group,
                }
            })
            .collect();
        subgroups.push(SubgroupTable {
            subgroup: sg.to_string(),
            rows,
        });
    }

    ReliabilityReport {
        version: REPORT_VERSION.into(),
        cases: input.cases.len(),
        runs_of_primary: g.repeated.iter().map(|s| s.run).collect(),
        primary_judge: primary,
        judges,
        annotators: input
            .annotators
            .iter()
            .map(|a| a.annotator.clone())
            .collect(),
        consistency,
        human,
        resampling,
        subgroups,
        notes,
    }
}

// ---------------------------------------------------------------------------------------------
// Markdown
// ---------------------------------------------------------------------------------------------

fn pct(s: &Share) -> String {
    match s.percent() {
        Some(p) => format!("{p:.2} ({}/{})", s.count, s.total),
        None => "–".into(),
    }
}

fn pct_opt(s: Option<&Share>) -> String {
    s.map_or("–".into(), pct)
}

fn coef(c: &Coefficient) -> String {
    match c.value {
        Some(v) => format!("{v:.2}"),
        None => format!("undefined ({})", c.reason.as_deref().unwrap_or("")),
    }
}

fn num(v: Option<f64>) -> String {
    v.map_or("–".into(), |v| format!("{v:.2}"))
}

/// The report as Markdown.
pub fn markdown(r: &ReliabilityReport) -> String {
    let mut m = String::new();
    let _ = writeln!(m, "# Reliability of SAGE localization\n");
    let _ = writeln!(
        m,
        "{} cases; primary judge: {}; judges: {}; annotators: {}.\n",
        r.cases,
        r.primary_judge.as_deref().unwrap_or("–"),
        if r.judges.is_empty() {
            "–".into()
        } else {
            r.judges.join(", ")
        },
        if r.annotators.is_empty() {
            "–".into()
        } else {
            r.annotators.join(", ")
        },
    );
    for n in &r.notes {
        let _ = writeln!(m, "> Note: {n}");
    }
    if !r.notes.is_empty() {
        m.push('\n');
    }

    let _ = writeln!(
        m,
        "## Table 6(a). Origin consistency (judge-dependent outputs)\n"
    );
    let cols: Vec<(&str, Option<&Consistency>)> = vec![
        ("Repeated scoring", r.consistency.repeated.as_ref()),
        ("Cross judge", r.consistency.cross_judge.as_ref()),
        ("All ratings", r.consistency.all_ratings.as_ref()),
    ];
    let _ = writeln!(
        m,
        "| | {} |\n|---|{}",
        cols.iter().map(|c| c.0).collect::<Vec<_>>().join(" | "),
        "---|".repeat(cols.len())
    );
    type Row<'a> = (&'a str, Box<dyn Fn(&Consistency) -> String + 'a>);
    let rows: Vec<Row> = vec![
        (
            "Sources",
            Box::new(|c: &Consistency| c.sources.len().to_string()),
        ),
        (
            "Jointly localized",
            Box::new(|c: &Consistency| pct(&c.joint_localization)),
        ),
        (
            "Eligible cases (n)",
            Box::new(|c: &Consistency| c.joint_localization.count.to_string()),
        ),
        (
            "Type agreement (%)",
            Box::new(|c: &Consistency| pct(&c.type_agreement)),
        ),
        (
            "Exact-turn agreement (%)",
            Box::new(|c: &Consistency| pct(&c.exact_turn_agreement)),
        ),
        (
            "Within ±1 turn (%)",
            Box::new(|c: &Consistency| pct(&c.within_one_turn)),
        ),
        (
            "Origin type α",
            Box::new(|c: &Consistency| coef(&c.type_alpha)),
        ),
        (
            "Origin turn α",
            Box::new(|c: &Consistency| coef(&c.turn_alpha)),
        ),
    ];
    for (name, f) in &rows {
        let cells: Vec<String> = cols.iter().map(|(_, c)| c.map_or("–".into(), f)).collect();
        let _ = writeln!(m, "| {name} | {} |", cells.join(" | "));
    }
    let _ = writeln!(
        m,
        "\nAgreement uses cases localized by every compared source; α uses cases with at least \
         two ratings (undetermined = missing). Origin-turn α is {}.\n",
        r.consistency
            .repeated
            .as_ref()
            .or(r.consistency.cross_judge.as_ref())
            .map_or("nominal", |c| c.turn_alpha_level.as_str())
    );

    let _ = writeln!(m, "### Figure 5. Scores at the origin turn\n");
    let _ = writeln!(m, "| Dimension | α same judge (runs) | α two judges | same | one apart | two or more |\n|---|---|---|---|---|---|");
    for (d, name) in DIMENSIONS.iter().enumerate() {
        let a = r
            .consistency
            .repeated
            .as_ref()
            .map(|c| coef(&c.score_alpha[d]));
        let b = r
            .consistency
            .cross_judge
            .as_ref()
            .map(|c| coef(&c.score_alpha[d]));
        let diff = r
            .consistency
            .cross_judge
            .as_ref()
            .map(|c| c.score_differences[d]);
        let _ = writeln!(
            m,
            "| {name} | {} | {} | {} | {} | {} |",
            a.unwrap_or("–".into()),
            b.unwrap_or("–".into()),
            diff.map_or("–".into(), |x| x.same.to_string()),
            diff.map_or("–".into(), |x| x.one.to_string()),
            diff.map_or("–".into(), |x| x.two_or_more.to_string()),
        );
    }
    m.push_str("\nOrdinal α over jointly localized cases; differences between the judges (max − min) on the same cases. Charts: `figure5.svg`.\n\n");

    let _ = writeln!(
        m,
        "## Table 6(b). Agreement across task subsets (artefact-derived outputs)\n"
    );
    match &r.resampling {
        Some(rs) => {
            let _ = writeln!(
                m,
                "SAGE vs {} over {} tasks; {} seeded task-disjoint partitions (seed {}).\n",
                rs.annotator,
                rs.tasks,
                rs.provenance.partitions.partitions,
                rs.provenance.partitions.seed
            );
            let _ = writeln!(
                m,
                "| | Provenance (%) | Introducing write (%) |\n|---|---|---|"
            );
            let (p, w) = (&rs.provenance, &rs.introducing_write);
            let _ = writeln!(
                m,
                "| All cases (n = {} / {}) | {} | {} |",
                p.n,
                w.n,
                num(p.all),
                num(w.all)
            );
            let _ = writeln!(
                m,
                "| Subset median | {} | {} |",
                num(p.partitions.median),
                num(w.partitions.median)
            );
            let range =
                |x: Option<(f64, f64)>| x.map_or("–".into(), |(a, b)| format!("{a:.2}–{b:.2}"));
            let _ = writeln!(
                m,
                "| Subset central 95% | {} | {} |",
                range(p.partitions.central_95),
                range(w.partitions.central_95)
            );
            let loto = |l: &LeaveOneOut| match (l.min, l.max) {
                (Some(a), Some(b)) => format!("{a:.2}–{b:.2}"),
                _ => "–".into(),
            };
            let _ = writeln!(
                m,
                "| Leave-one-task-out | {} | {} |\n",
                loto(&p.leave_one_task_out),
                loto(&w.leave_one_task_out)
            );
        }
        None => m.push_str("No annotations.\n\n"),
    }

    let _ = writeln!(m, "## Table 6(c). Agreement with human annotations\n");
    if r.human.is_empty() {
        m.push_str("No annotations.\n\n");
    } else {
        let _ = writeln!(m, "| Comparison | Cases | n | Provenance (%) | κ | Introducing write (%) | κ |\n|---|---|---|---|---|---|---|");
        for h in &r.human {
            let _ = writeln!(
                m,
                "| {} | {} | {} | {} | {} | {} | {} |",
                h.comparison,
                h.cases,
                h.provenance.n.max(h.introducing_write.n),
                pct(&h.provenance.agreement),
                coef(&h.provenance.kappa),
                pct(&h.introducing_write.agreement),
                coef(&h.introducing_write.kappa),
            );
        }
        m.push_str("\nIntroducing-write labels: a write turn (`turn:N`), `none`, or `cannot-determine`.\n\n");
    }

    let _ = writeln!(m, "## Table 7 and Figure 6. By subgroup\n");
    let _ = writeln!(m, "∗ Groups with fewer than {SMALL_GROUP} cases. Provenance and introducing write: SAGE vs the first annotator. Origin turn: exact-turn agreement among jointly localized cases. Charts: `figure6.svg`.\n");
    for t in &r.subgroups {
        let _ = writeln!(m, "### By {}\n", t.subgroup);
        let _ = writeln!(m, "| {} | n | Provenance | Introducing write | Origin turn (runs) | Origin turn (judges) |\n|---|---|---|---|---|---|", t.subgroup);
        for row in &t.rows {
            let _ = writeln!(
                m,
                "| {}{} | {} | {} | {} | {} | {} |",
                row.group,
                if row.small { " ∗" } else { "" },
                row.n,
                pct_opt(row.provenance.as_ref()),
                pct_opt(row.introducing_write.as_ref()),
                pct_opt(row.turn_repeated.as_ref()),
                pct_opt(row.turn_cross_judge.as_ref()),
            );
        }
        m.push('\n');
    }
    m
}

// ---------------------------------------------------------------------------------------------
// SVG (hand-written: grouped bars, no font dependencies)
// ---------------------------------------------------------------------------------------------

const COLORS: [&str; 4] = ["#4477aa", "#ee6677", "#228833", "#ccbb44"];

/// Labels in the figures come from result sets (judge and framework names): escaped by the
/// one markup helper.
use sage_markup::html as esc;

/// One bar: value, label above it, small group (drawn hatched).
type Bar = Option<(f64, String, bool)>;

/// One panel of grouped bars. `series`: (name, one bar per group).
struct Panel<'a> {
    title: &'a str,
    y_label: &'a str,
    y_min: f64,
    y_max: f64,
    groups: Vec<String>,
    series: Vec<(String, Vec<Bar>)>,
}

/// Axis ticks from `lo` to at least `hi` at a round step (1, 2, 2.5 or 5 × 10^k, about four
/// intervals), and the decimals that print each tick exactly (a tick at 0.25 is labelled
/// `0.25`, not `0.2`; a count axis to 22 gets 0, 10, 20, 30, not 5.5 labelled `6`).
fn ticks(lo: f64, hi: f64) -> (Vec<f64>, usize) {
    let span = if hi > lo { hi - lo } else { 1.0 };
    let raw = span / 4.0;
    let mag = 10f64.powf(raw.log10().floor());
    let m = [1.0, 2.0, 2.5, 5.0, 10.0]
        .into_iter()
        .find(|m| m * mag >= raw * (1.0 - 1e-9))
        .unwrap_or(10.0);
    let step = m * mag;
    let mut decimals = if step >= 1.0 && step.fract() == 0.0 {
        0
    } else {
        (-step.log10()).ceil().max(0.0) as usize
    };
    if m == 2.5 && step < 10.0 {
        decimals += 1;
    }
    let n = ((span / step) - 1e-9).ceil().max(1.0) as usize;
    // Rounded to the printed decimals, so 3 × 0.2 is the 0.6 its label says.
    let scale = 10f64.powi(decimals as i32);
    let at = |k: usize| ((lo + step * k as f64) * scale).round() / scale;
    ((0..=n).map(at).collect(), decimals)
}

fn panel_svg(out: &mut String, p: &Panel, x0: f64, y0: f64, w: f64, h: f64) {
    let (left, bottom, top) = (50.0, 40.0, 30.0);
    let plot_w = w - left - 10.0;
    let plot_h = h - bottom - top;
    let (tick_values, decimals) = ticks(p.y_min, p.y_max);
    // The axis ends at the last tick, so every tick is drawn where its label says.
    let y_max = *tick_values.last().unwrap_or(&p.y_max);
    let y = |v: f64| y0 + top + plot_h * (1.0 - (v - p.y_min) / (y_max - p.y_min));
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" font-size="13" font-weight="bold">{}</text>"#,
        x0 + 5.0,
        y0 + 16.0,
        esc(p.title)
    );
    for &v in &tick_values {
        let yy = y(v);
        let _ = writeln!(
            out,
            r##"<line x1="{:.1}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" font-size="10" text-anchor="end">{v:.decimals$}</text>"##,
            x0 + left,
            x0 + left + plot_w,
            x0 + left - 4.0,
            yy + 3.0,
        );
    }
    let _ = writeln!(
        out,
        r#"<text transform="translate({:.1},{:.1}) rotate(-90)" font-size="11" text-anchor="middle">{}</text>"#,
        x0 + 12.0,
        y0 + top + plot_h / 2.0,
        esc(p.y_label)
    );
    let ng = p.groups.len().max(1);
    let ns = p.series.len().max(1);
    let gw = plot_w / ng as f64;
    let bw = gw * 0.8 / ns as f64;
    let base = y(p.y_min.max(0.0).min(y_max));
    for (gi, g) in p.groups.iter().enumerate() {
        let gx = x0 + left + gw * gi as f64;
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" font-size="10" text-anchor="middle">{}</text>"#,
            gx + gw / 2.0,
            y0 + top + plot_h + 14.0,
            esc(g)
        );
        for (si, (_, vals)) in p.series.iter().enumerate() {
            let Some(Some((v, label, small))) = vals.get(gi) else {
                continue;
            };
            let bx = gx + gw * 0.1 + bw * si as f64;
            let vy = y(v.clamp(p.y_min, y_max));
            let (top_y, height) = if vy < base {
                (vy, base - vy)
            } else {
                (base, vy - base)
            };
            let _ = writeln!(
                out,
                r#"<rect x="{bx:.1}" y="{top_y:.1}" width="{:.1}" height="{height:.1}" fill="{}"{}/>"#,
                bw * 0.95,
                COLORS[si % COLORS.len()],
                if *small {
                    r#" fill-opacity="0.4" stroke="black" stroke-dasharray="2,2""#
                } else {
                    ""
                }
            );
            let _ = writeln!(
                out,
                r#"<text x="{:.1}" y="{:.1}" font-size="9" text-anchor="middle">{}</text>"#,
                bx + bw / 2.0,
                top_y - 3.0,
                esc(label)
            );
        }
    }
    // Legend.
    let mut lx = x0 + left;
    for (si, (name, _)) in p.series.iter().enumerate() {
        let ly = y0 + h - 10.0;
        let _ = writeln!(
            out,
            r#"<rect x="{lx:.1}" y="{:.1}" width="10" height="10" fill="{}"/><text x="{:.1}" y="{:.1}" font-size="10">{}</text>"#,
            ly - 9.0,
            COLORS[si % COLORS.len()],
            lx + 14.0,
            ly,
            esc(name)
        );
        lx += 20.0 + 6.0 * name.len() as f64;
    }
}

fn svg_doc(panels: &[Panel], w: f64, h: f64) -> String {
    // A panel with no value at all (no repeated runs, a single judge) is left out rather
    // than drawn as an empty frame that reads like zeros.
    let panels: Vec<&Panel> = panels
        .iter()
        .filter(|p| p.series.iter().any(|(_, v)| v.iter().any(Option::is_some)))
        .collect();
    if panels.is_empty() {
        return format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"40\" font-family=\"sans-serif\"><text x=\"10\" y=\"25\" font-size=\"12\">No data for this figure (see reliability.md for why).</text></svg>\n"
        );
    }
    let mut s = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{}" viewBox="0 0 {w} {}" font-family="sans-serif">"#,
        h * panels.len() as f64,
        h * panels.len() as f64
    );
    s.push('\n');
    s.push_str(r#"<rect width="100%" height="100%" fill="white"/>"#);
    s.push('\n');
    for (i, p) in panels.iter().enumerate() {
        panel_svg(&mut s, p, 0.0, h * i as f64, w, h);
    }
    s.push_str("</svg>\n");
    s
}

fn share_bar(s: Option<&Share>, small: bool) -> Option<(f64, String, bool)> {
    let s = s?;
    Some((s.percent()?, format!("{}/{}", s.count, s.total), small))
}

/// Figure 5: (a) ordinal α of the four scores at the origin turn; (b) score differences
/// between the two judges.
pub fn figure5_svg(r: &ReliabilityReport) -> String {
    let alpha_series = |name: &str, c: Option<&Consistency>| {
        (
            format!(
                "{name} (n = {})",
                c.map_or(0, |c| c.joint_localization.count)
            ),
            (0..4)
                .map(|d| {
                    let a = c?.score_alpha[d].value?;
                    Some((a, format!("{a:.2}"), false))
                })
                .collect(),
        )
    };
    let a = Panel {
        title: "(a) Agreement on the score at the origin turn",
        y_label: "Ordinal Krippendorff's α",
        y_min: 0.0,
        y_max: 1.0,
        groups: DIMENSIONS.iter().map(|d| d.to_string()).collect(),
        series: vec![
            alpha_series("Same judge, runs", r.consistency.repeated.as_ref()),
            alpha_series("Two judges", r.consistency.cross_judge.as_ref()),
        ],
    };
    let diffs = r
        .consistency
        .cross_judge
        .as_ref()
        .map(|c| c.score_differences.clone());
    let total = r
        .consistency
        .cross_judge
        .as_ref()
        .map_or(0, |c| c.joint_localization.count);
    let diff_series = |name: &str, f: fn(&crate::measures::ScoreDifferences) -> usize| {
        (
            name.to_string(),
            (0..4)
                .map(|d| {
                    let x = f(&diffs.as_ref()?[d]);
                    Some((x as f64, x.to_string(), false))
                })
                .collect(),
        )
    };
    let title = format!("(b) Score difference between the judges (jointly localized, n = {total})");
    let b = Panel {
        title: &title,
        y_label: "Cases",
        y_min: 0.0,
        y_max: (total.max(1)) as f64,
        groups: DIMENSIONS.iter().map(|d| d.to_string()).collect(),
        series: vec![
            diff_series("Same score", |d| d.same),
            diff_series("Differ by one", |d| d.one),
            diff_series("Differ by two or more", |d| d.two_or_more),
        ],
    };
    svg_doc(&[a, b], 640.0, 300.0)
}

/// Figure 6: (a) agreement with the annotator by confirmed deficiency; (b) by reconstruction
/// condition, for the introducing write and the origin turn (runs, judges). Small groups are
/// drawn hatched.
pub fn figure6_svg(r: &ReliabilityReport) -> String {
    let table = |name: &str| r.subgroups.iter().find(|t| t.subgroup == name);
    let mut panels = Vec::new();
    if let Some(t) = table("deficiency") {
        panels.push(Panel {
            title: "(a) By confirmed deficiency (vs annotator)",
            y_label: "Agreement (%)",
            y_min: 0.0,
            y_max: 100.0,
            groups: t
                .rows
                .iter()
                .map(|row| format!("{} (n = {})", row.group, row.n))
                .collect(),
            series: vec![
                (
                    "Provenance".into(),
                    t.rows
                        .iter()
                        .map(|row| share_bar(row.provenance.as_ref(), row.small))
                        .collect(),
                ),
                (
                    "Introducing write".into(),
                    t.rows
                        .iter()
                        .map(|row| share_bar(row.introducing_write.as_ref(), row.small))
                        .collect(),
                ),
            ],
        });
    }
    if let Some(t) = table("condition") {
        panels.push(Panel {
            title: "(b) By reconstruction condition (hatched: n < 10)",
            y_label: "Agreement (%)",
            y_min: 0.0,
            y_max: 100.0,
            groups: vec![
                "Introducing write (vs annotator)".into(),
                "Origin turn (runs)".into(),
                "Origin turn (judges)".into(),
            ],
            series: t
                .rows
                .iter()
                .map(|row| {
                    (
                        format!("{} (n = {})", row.group, row.n),
                        vec![
                            share_bar(row.introducing_write.as_ref(), row.small),
                            share_bar(row.turn_repeated.as_ref(), row.small),
                            share_bar(row.turn_cross_judge.as_ref(), row.small),
                        ],
                    )
                })
                .collect(),
        });
    }
    if panels.is_empty() {
        panels.push(Panel {
            title: "No subgroup data",
            y_label: "",
            y_min: 0.0,
            y_max: 1.0,
            groups: Vec::new(),
            series: Vec::new(),
        });
    }
    svg_doc(&panels, 720.0, 320.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measures::Origin;

    fn input() -> ReportInput {
        let mut cases = Vec::new();
        let mut sources: Vec<RatingSource> = ["a", "a", "b"]
            .iter()
            .enumerate()
            .map(|(i, j)| RatingSource {
                judge: (*j).into(),
                run: if i == 1 { 1 } else { 0 },
                ratings: Vec::new(),
            })
            .collect();
        let mut r1 = Vec::new();
        for i in 0..24u32 {
            let id = format!("c{i}");
            let prov = if i % 3 == 0 {
                "agent-introduced"
            } else {
                "inherited"
            };
            let iw = if i % 3 == 0 {
                format!("turn:{}", i % 5 + 2)
            } else {
                "none".into()
            };
            cases.push(CaseInfo {
                case_id: id.clone(),
                task_id: format!("t{}", i % 6),
                subgroups: [
                    (
                        "framework".to_string(),
                        if i % 2 == 0 { "AG2" } else { "Aider" }.to_string(),
                    ),
                    (
                        "condition".to_string(),
                        if i < 20 { "single-write" } else { "final-only" }.to_string(),
                    ),
                    ("deficiency".to_string(), "defence-absent".to_string()),
                ]
                .into_iter()
                .collect(),
                sage: ArtefactLabel {
                    case_id: id.clone(),
                    provenance: Some(prov.into()),
                    introducing_write: Some(iw.clone()),
                },
            });
            r1.push(ArtefactLabel {
                case_id: id.clone(),
                provenance: Some(if i % 7 == 0 {
                    "inherited".into()
                } else {
                    prov.into()
                }),
                introducing_write: Some(iw),
            });
            for (s, src) in sources.iter_mut().enumerate() {
                src.ratings.push(OriginRating {
                    case_id: id.clone(),
                    origin: (i % 11 != 0 || s == 0).then(|| Origin {
                        origin_type: if (i + s as u32).is_multiple_of(5) {
                            "x"
                        } else {
                            "y"
                        }
                        .into(),
                        turn: 3 + u32::from(s == 2 && i % 4 == 0),
                        scores: Some([(i % 4) as u8, 1, 2, ((i + s as u32) % 3) as u8]),
                    }),
                });
            }
        }
        ReportInput {
            cases,
            sources,
            annotators: vec![Annotations {
                annotator: "R1".into(),
                labels: r1,
            }],
            primary_judge: None,
            partitions: 100,
            seed: 1,
            turn_level: Level::Nominal,
        }
    }

    #[test]
    fn report_keeps_consistency_and_human_apart() {
        let r = build(&input());
        assert_eq!(r.cases, 24);
        assert_eq!(r.primary_judge.as_deref(), Some("a"));
        assert_eq!(r.runs_of_primary, vec![0, 1]);
        let rep = r.consistency.repeated.as_ref().expect("repeated");
        assert_eq!(rep.sources.len(), 2);
        let cross = r.consistency.cross_judge.as_ref().expect("cross");
        assert_eq!(cross.sources, vec!["a run 0", "b run 0"]);
        assert!(r.consistency.all_ratings.is_some());
        assert_eq!(r.human.len(), 1);
        assert_eq!(r.human[0].provenance.n, 24);
        let rs = r.resampling.as_ref().expect("resampling");
        assert_eq!(rs.tasks, 6);
        assert!(rs.provenance.partitions.values > 0);
        let cond = r
            .subgroups
            .iter()
            .find(|t| t.subgroup == "condition")
            .expect("cond");
        let fo = cond
            .rows
            .iter()
            .find(|r| r.group == "final-only")
            .expect("final-only");
        assert!(fo.small);
        let md = markdown(&r);
        assert!(md.contains("Table 6(a)") && md.contains("final-only ∗"));
        let f5 = figure5_svg(&r);
        let f6 = figure6_svg(&r);
        assert!(f5.starts_with("<svg") && f5.trim_end().ends_with("</svg>"));
        assert!(f6.contains("Introducing write"));
    }

    #[test]
    fn ticks_sit_at_the_values_they_print() {
        // 0..1 in quarters: the quarter ticks print as 0.25 and 0.75 (not 0.2 / 0.8).
        let (t, d) = ticks(0.0, 1.0);
        assert_eq!(t, vec![0.0, 0.25, 0.5, 0.75, 1.0]);
        assert_eq!(d, 2);
        // 22 cases: a round step of 10 and the axis extended to 30 (not 5.5 printed "6").
        assert_eq!(ticks(0.0, 22.0), (vec![0.0, 10.0, 20.0, 30.0], 0));
        assert_eq!(ticks(0.0, 100.0), (vec![0.0, 25.0, 50.0, 75.0, 100.0], 0));
        assert_eq!(ticks(0.0, 8.0), (vec![0.0, 2.0, 4.0, 6.0, 8.0], 0));
        // Every printed label parses back to the tick's own value.
        for hi in [1.0, 3.0, 7.0, 22.0, 40.0, 100.0, 0.6] {
            let (t, d) = ticks(0.0, hi);
            assert!(*t.last().unwrap() >= hi);
            for v in t {
                let label = format!("{v:.d$}");
                assert_eq!(label.parse::<f64>().unwrap(), v, "{hi}: {label}");
            }
        }
    }

    #[test]
    fn attack_a_deficiency_name_carries_markup_into_the_figure() {
        // Deficiency labels come from case manifests (hostile): the SVG escapes them with the
        // one markup helper, quotes included (they could end an attribute).
        let mut inp = input();
        for c in &mut inp.cases {
            c.subgroups.insert(
                "deficiency".into(),
                r#"<script>alert("x")</script>' onload='y"#.into(),
            );
        }
        let f6 = figure6_svg(&build(&inp));
        assert!(
            !f6.contains("<script>") && !f6.contains("' onload='"),
            "{f6}"
        );
        assert!(f6.contains("&lt;script&gt;alert(&quot;x&quot;)"), "{f6}");
    }

    #[test]
    fn figure5_leaves_out_a_panel_with_no_data() {
        // One judge only: panel (b) (differences between judges) has nothing to draw.
        let mut inp = input();
        inp.sources.retain(|s| s.judge == "a");
        let r = build(&inp);
        assert!(r.consistency.cross_judge.is_none());
        let f5 = figure5_svg(&r);
        assert!(f5.contains("(a) Agreement on the score"), "{f5}");
        assert!(!f5.contains("(b) Score difference"), "{f5}");
        let full = figure5_svg(&build(&input()));
        assert!(full.contains("(b) Score difference"));
    }
}
