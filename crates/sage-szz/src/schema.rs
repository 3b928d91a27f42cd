//! What `sage szz --format json` and `sage szz eval --format json` print (`docs/szz.md`), as
//! types of their own.
//!
//! Every record of the two formats is defined here, with its field names and serde
//! attributes, and converted explicitly from the values SZZ works with (the variants' results,
//! the agent's report, the oracle's answers, the evaluation). Those values derive no
//! `Serialize`: renaming or adding a field of theirs stops the build here, at the conversion,
//! instead of silently changing the published JSON. The oracle's answers keep their
//! `Deserialize`, which reads an LLM's reply (the prompts in `data/oracle.toml` say its
//! shape), not a published format. Nothing reads either format back, so the conversions go
//! one way.
//!
//! [`mirror_out!`] writes a record with the same field names as its internal value; its
//! conversion takes the internal value apart with an exhaustive pattern, so each internal
//! field is named once here. [`words_out!`] does the same for a word list (a unit enum).

use crate::{eval, model, oracle, report};
use sage_schema::{mirror_out, words_out, Conv};
use serde::Serialize;

// ---- sage szz ----------------------------------------------------------------------------

/// The name of `sage szz --format json`'s format, its first field.
pub const SZZ_SCHEMA: &str = "sage.szz/1";

/// The name of `sage szz eval --format json`'s format, its first field.
pub const SZZ_EVAL_SCHEMA: &str = "sage.szz-eval/1";

/// What `sage szz --format json` prints: the repository, the fix and each variant's answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SzzReport {
    pub schema: &'static str,
    pub repo: String,
    pub fix: String,
    pub results: Vec<SzzResult>,
}

impl SzzReport {
    pub fn new(repo: String, fix: String, results: Vec<model::SzzResult>) -> SzzReport {
        SzzReport {
            schema: SZZ_SCHEMA,
            repo,
            fix,
            results: results.conv(),
        }
    }

    /// The report as `serde_json::to_string_pretty` writes it. A large V-SZZ answer's chains
    /// (half of its text: a chain per blamed line) are written on a second thread meanwhile
    /// and put in their place after.
    pub fn into_json_pretty(self) -> serde_json::Result<String> {
        self.into_json_pretty_from(CHAINS_ON_A_THREAD_FROM)
    }

    /// [`SzzReport::into_json_pretty`], with chains written on a thread from `from` chains.
    fn into_json_pretty_from(mut self, from: usize) -> serde_json::Result<String> {
        if self.results.iter().all(|r| r.chains.len() < from) {
            return serde_json::to_string_pretty(&self);
        }
        // Each result's chains are taken out (an empty list is not written), written alone
        // at the depth they have in the report, and put back before the result's `notes`,
        // the field that follows them.
        // (the thread also frees the chains it wrote: a second core's work too)
        let chains: Vec<Vec<Chain>> = self
            .results
            .iter_mut()
            .map(|r| std::mem::take(&mut r.chains))
            .collect();
        let written: Vec<bool> = chains.iter().map(|c| !c.is_empty()).collect();
        // Room for all of it at once, chains included (they are put into this text): a
        // vector grown by doubling would touch twice the memory, and then move it.
        let lines: usize = self
            .results
            .iter()
            .flat_map(|r| &r.candidates)
            .map(|c| c.lines.len())
            .sum();
        let n: usize = chains.iter().map(Vec::len).sum();
        let mut rest = Vec::with_capacity(BYTES_A_LINE * lines + BYTES_A_CHAIN * n + (1 << 16));
        let (rest, rendered) = std::thread::scope(|s| {
            let rendered = s.spawn(move || {
                chains
                    .iter()
                    .map(|c| render_at(c, RESULT_FIELD_DEPTH))
                    .collect::<serde_json::Result<Vec<Vec<u8>>>>()
            });
            let rest = serde_json::to_writer_pretty(&mut rest, &self).map(|()| rest);
            (rest, rendered.join())
        });
        let rendered = crate::joined(rendered)?;
        splice_chains(rest?, &written, &rendered).ok_or_else(|| {
            // (not expected: every result writes its `notes`, after its chains)
            serde::ser::Error::custom("the report's chains have no place before `notes`")
        })
    }
}

/// Chains are written on a thread from this many in one result.
const CHAINS_ON_A_THREAD_FROM: usize = 2048;

/// The depth of a result's fields in the report: report → `results` → a result → its fields.
const RESULT_FIELD_DEPTH: usize = 3;

/// About the bytes a blamed line (a candidate's line) and a chain take in the report, for
/// room made ahead (a guess: too little only means the text grows as it would have).
const BYTES_A_LINE: usize = 256;
const BYTES_A_CHAIN: usize = 256;

/// `value` (chains) as pretty JSON written at `depth` (its inner lines indented for it).
fn render_at(value: &[Chain], depth: usize) -> serde_json::Result<Vec<u8>> {
    let mut out = Vec::with_capacity(BYTES_A_CHAIN * value.len());
    let mut ser = serde_json::Serializer::with_formatter(&mut out, Pretty::at(depth));
    value.serialize(&mut ser)?;
    Ok(out)
}

/// `rest` (a report written without its chains) with each result's chains (`rendered`,
/// written at its depth; those `written` only) put back before its `notes`; `None` when a result's
/// `notes` is not where it must be. The chains go into `rest` itself: only what follows each
/// insertion moves (for one result, its last few fields), not the whole text.
fn splice_chains(mut rest: Vec<u8>, written: &[bool], rendered: &[Vec<u8>]) -> Option<String> {
    // A line break never occurs inside a JSON string (it is written `\n`), so at this
    // indentation this is a result's `notes` and nothing else's: one per result, in order.
    let notes: &[u8] = b"\n      \"notes\": ";
    let key: &[u8] = b"\n      \"chains\": ";
    let mut at = 0;
    let mut places = Vec::with_capacity(written.len());
    for _ in written {
        let here = at + memchr::memmem::find(&rest[at..], notes)?;
        places.push(here);
        at = here + 1;
    }
    let extra: usize = written
        .iter()
        .zip(rendered)
        .filter(|(w, _)| **w)
        .map(|(_, r)| key.len() + r.len() + 1)
        .sum();
    let old = rest.len();
    rest.resize(old + extra, 0);
    // from the last insertion back: each stretch moves once, to its final place
    let mut end = old + extra;
    let mut from_end = old;
    for ((w, r), &here) in written.iter().zip(rendered).zip(&places).rev() {
        if !*w {
            continue;
        }
        let tail = from_end - here;
        rest.copy_within(here..from_end, end - tail);
        end -= tail;
        end -= 1;
        rest[end] = b',';
        end -= r.len();
        rest[end..end + r.len()].copy_from_slice(r);
        end -= key.len();
        rest[end..end + key.len()].copy_from_slice(key);
        from_end = here;
    }
    debug_assert_eq!(end, from_end);
    String::from_utf8(rest).ok()
}

/// serde_json's pretty formatter (two spaces a level), starting at a given depth: a value
/// written alone reads as it would inside the document at that depth.
struct Pretty {
    depth: usize,
    has_value: bool,
}

impl Pretty {
    fn at(depth: usize) -> Pretty {
        Pretty {
            depth,
            has_value: false,
        }
    }

    fn indent<W: ?Sized + std::io::Write>(&self, w: &mut W) -> std::io::Result<()> {
        for _ in 0..self.depth {
            w.write_all(b"  ")?;
        }
        Ok(())
    }
}

impl Pretty {
    /// An array or object opens: one level deeper, nothing in it yet.
    fn open<W: ?Sized + std::io::Write>(&mut self, w: &mut W, mark: &[u8]) -> std::io::Result<()> {
        self.depth += 1;
        self.has_value = false;
        w.write_all(mark)
    }

    /// It closes: on a line of its own at its depth, unless empty.
    fn close<W: ?Sized + std::io::Write>(&mut self, w: &mut W, mark: &[u8]) -> std::io::Result<()> {
        self.depth -= 1;
        if self.has_value {
            w.write_all(b"\n")?;
            self.indent(w)?;
        }
        w.write_all(mark)
    }

    /// An element or a key begins its line.
    fn item<W: ?Sized + std::io::Write>(&mut self, w: &mut W, first: bool) -> std::io::Result<()> {
        w.write_all(if first { b"\n" } else { b",\n" })?;
        self.indent(w)
    }
}

impl serde_json::ser::Formatter for Pretty {
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.open(w, b"[")
    }

    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.close(w, b"]")
    }

    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.item(w, first)
    }

    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, _: &mut W) -> std::io::Result<()> {
        self.has_value = true;
        Ok(())
    }

    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.open(w, b"{")
    }

    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.close(w, b"}")
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.item(w, first)
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }

    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, _: &mut W) -> std::io::Result<()> {
        self.has_value = true;
        Ok(())
    }
}

words_out! {
    /// An SZZ variant, by its short name.
    #[serde(rename_all = "lowercase")]
    pub enum Variant = model::Variant {
        B, Ag, Ma, R, L, V, Agent,
    }
}

mirror_out! {
    /// The answer of one variant for one fix.
    pub struct SzzResult = model::SzzResult {
        variant: Variant,
        fix: String,
        candidates: Vec<Candidate>,
        selected: Option<String>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        ignored: Vec<String>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        chains: Vec<Chain>,
        notes: Vec<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        agent: Option<AgentReport>,
        git_calls: u64,
        elapsed_ms: u64,
    }
}

mirror_out! {
    /// One inducing-commit candidate.
    pub struct Candidate = model::Candidate {
        commit: String,
        committed: i64,
        subject: String,
        lines: Vec<LineRef>,
        #[serde(skip_serializing_if = "Option::is_none")]
        score: Option<f64>,
    }
}

mirror_out! {
    /// A blamed line that led to a candidate.
    pub struct LineRef = model::LineRef {
        path: String,
        line: usize,
        orig_path: String,
        orig_line: usize,
        content: String,
    }
}

mirror_out! {
    /// V-SZZ's chain for one blamed line.
    pub struct Chain = model::Chain {
        path: String,
        line: usize,
        commits: Vec<String>,
    }
}

// ---- the agent ---------------------------------------------------------------------------

mirror_out! {
    /// What the agentic tracer did.
    pub struct AgentReport = report::AgentReport {
        oracle: String,
        root_cause: Option<RootCause>,
        review_rounds: usize,
        review: Option<Review>,
        hunks: Vec<HunkReport>,
        anchors: Vec<Anchor>,
        traces: Vec<AnchorTrace>,
        votes: Vec<(String, usize)>,
        #[serde(skip_serializing_if = "Option::is_none")]
        fallback: Option<String>,
        tool_calls: usize,
        cache_hits: usize,
        bytes_saved: usize,
    }
}

mirror_out! {
    /// The root-cause summary.
    pub struct RootCause = oracle::RootCause {
        summary: String,
        evidence: Vec<Evidence>,
        keywords: Vec<String>,
        guards: Vec<String>,
    }
}

mirror_out! {
    /// A claim with the verbatim quote that supports it.
    pub struct Evidence = oracle::Evidence {
        claim: String,
        quote: String,
        #[serde(flatten)]
        source: EvidenceSource,
    }
}

/// Where an evidence point comes from: `"source"`, and for a hunk its index as `"hunk"`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase", tag = "source", content = "hunk")]
pub enum EvidenceSource {
    Cve,
    Message,
    Hunk(usize),
}

impl From<oracle::EvidenceSource> for EvidenceSource {
    fn from(v: oracle::EvidenceSource) -> EvidenceSource {
        match v {
            oracle::EvidenceSource::Cve => EvidenceSource::Cve,
            oracle::EvidenceSource::Message => EvidenceSource::Message,
            oracle::EvidenceSource::Hunk(h) => EvidenceSource::Hunk(h),
        }
    }
}

impl Conv<EvidenceSource> for oracle::EvidenceSource {
    fn conv(self) -> EvidenceSource {
        self.into()
    }
}

mirror_out! {
    /// The Judge's verdict on a root cause.
    pub struct Review = oracle::Review {
        pass: bool,
        verified: Vec<bool>,
        feedback: String,
    }
}

mirror_out! {
    /// A hunk of the fix with its intent.
    pub struct HunkReport = report::HunkReport {
        index: usize,
        path: String,
        header: String,
        #[serde(flatten)]
        intent: HunkIntent,
    }
}

mirror_out! {
    /// A hunk's intent and relevance to the root cause.
    pub struct HunkIntent = oracle::HunkIntent {
        category: ChangeCategory,
        summary: String,
        relevant: bool,
        score: f64,
    }
}

words_out! {
    /// A Conventional Commits category.
    #[serde(rename_all = "lowercase")]
    pub enum ChangeCategory = oracle::ChangeCategory {
        Feat, Fix, Docs, Style, Refactor, Perf, Test, Build, Ci, Chore,
    }
}

mirror_out! {
    /// An anchor statement: a pre-fix line.
    pub struct Anchor = oracle::Anchor {
        hunk: usize,
        path: String,
        line: usize,
        text: String,
        deleted: bool,
        score: f64,
    }
}

mirror_out! {
    /// The walk back from one anchor.
    pub struct AnchorTrace = report::AnchorTrace {
        anchor: usize,
        steps: Vec<TraceStep>,
        result: Option<String>,
        stop: String,
    }
}

mirror_out! {
    /// One step of the walk back.
    pub struct TraceStep = report::TraceStep {
        commit: String,
        path: String,
        line: usize,
        content: String,
        present: bool,
        reason: String,
    }
}

// ---- sage szz eval -----------------------------------------------------------------------

/// What `sage szz eval --format json` prints: the whole evaluation, named by its first field
/// (which the internal value does not carry, so the conversion is written out).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvalReport {
    pub schema: &'static str,
    pub dataset: String,
    pub format: String,
    pub fixes_in_dataset: usize,
    pub fixes_run: usize,
    pub fixes_skipped: usize,
    pub missing_repos: Vec<String>,
    pub scores: Vec<VariantScore>,
    pub cases: Vec<CaseResult>,
    pub problems: Vec<String>,
}

impl From<eval::EvalReport> for EvalReport {
    fn from(v: eval::EvalReport) -> EvalReport {
        let eval::EvalReport {
            dataset,
            format,
            fixes_in_dataset,
            fixes_run,
            fixes_skipped,
            missing_repos,
            scores,
            cases,
            problems,
        } = v;
        EvalReport {
            schema: SZZ_EVAL_SCHEMA,
            dataset,
            format,
            fixes_in_dataset,
            fixes_run,
            fixes_skipped,
            missing_repos,
            scores: scores.conv(),
            cases: cases.conv(),
            problems,
        }
    }
}

mirror_out! {
    /// Scores of one variant.
    pub struct VariantScore = eval::VariantScore {
        variant: Variant,
        cases: usize,
        failed: usize,
        oracle_pairs: usize,
        predicted_pairs: usize,
        true_pairs: usize,
        precision: f64,
        recall: f64,
        f1: f64,
        label_in_candidates: usize,
        top1_cases: usize,
        top1_correct: usize,
        median_ms: u64,
        mean_ms: f64,
    }
}

mirror_out! {
    /// One (case, variant) row.
    pub struct CaseResult = eval::CaseResult {
        id: String,
        repo: String,
        fix: String,
        variant: Variant,
        labels: Vec<String>,
        predicted: Vec<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        selected: Option<String>,
        hits: usize,
        #[serde(flatten)]
        status: CaseStatus,
        elapsed_ms: u64,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        notes: Vec<String>,
    }
}

/// What happened to one (case, variant), tagged by `status`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum CaseStatus {
    Ok,
    Skipped { reason: String },
    Failed { error: String },
}

impl From<eval::CaseStatus> for CaseStatus {
    fn from(v: eval::CaseStatus) -> CaseStatus {
        match v {
            eval::CaseStatus::Ok => CaseStatus::Ok,
            eval::CaseStatus::Skipped { reason } => CaseStatus::Skipped { reason },
            eval::CaseStatus::Failed { error } => CaseStatus::Failed { error },
        }
    }
}

impl Conv<CaseStatus> for eval::CaseStatus {
    fn conv(self) -> CaseStatus {
        self.into()
    }
}

// ---- sage szz bench ----------------------------------------------------------------------

/// One benchmarked fix as `sage szz bench --format json` prints it (the output is an array of
/// these): the repository it was read from, and its row.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BenchEntry {
    pub repo: String,
    pub row: BenchRow,
}

mirror_out! {
    /// One fix timed both ways: B-SZZ and a plain `git blame` of the same lines.
    pub struct BenchRow = crate::bench::BenchRow {
        fix: String,
        files: usize,
        lines: usize,
        candidates: usize,
        /// Median over the runs, milliseconds.
        bszz_ms: f64,
        blame_ms: f64,
        git_calls: u64,
    }
}

#[cfg(test)]
mod tests {
    /// The JSON of the fields `golden__szz_json` and `golden__szz_eval_json` leave out
    /// (`ignored`, a score, the agent's fallback and missing root cause and review, evidence
    /// from the CVE and the message, a skipped and a failed case), pinned as written before
    /// the format had types of its own: the records here write them byte for byte.
    #[test]
    fn the_json_of_fields_the_golden_runs_leave_out_is_pinned() {
        use crate::eval::{CaseResult, CaseStatus, EvalReport};
        use crate::model::{Candidate, SzzResult, Variant};
        use crate::oracle::{Evidence, EvidenceSource, RootCause};
        use crate::report::{AgentReport, AnchorTrace};
        let result = SzzResult {
            variant: Variant::Ma,
            fix: "f1".into(),
            candidates: vec![Candidate {
                commit: "c1".into(),
                committed: 5,
                subject: "s".into(),
                lines: vec![],
                score: Some(0.5),
            }],
            selected: None,
            ignored: vec!["i1".into()],
            chains: vec![],
            notes: vec![],
            agent: Some(AgentReport {
                oracle: "lexicon".into(),
                root_cause: Some(RootCause {
                    summary: "x".into(),
                    evidence: vec![
                        Evidence {
                            claim: "a".into(),
                            quote: "q".into(),
                            source: EvidenceSource::Cve,
                        },
                        Evidence {
                            claim: "b".into(),
                            quote: "r".into(),
                            source: EvidenceSource::Message,
                        },
                    ],
                    keywords: vec![],
                    guards: vec!["g".into()],
                }),
                review_rounds: 0,
                review: None,
                traces: vec![AnchorTrace {
                    anchor: 1,
                    steps: vec![],
                    result: None,
                    stop: "no".into(),
                }],
                fallback: Some("ma".into()),
                ..AgentReport::default()
            }),
            git_calls: 1,
            elapsed_ms: 2,
        };
        assert_eq!(
            serde_json::to_string(&super::SzzResult::from(result)).unwrap(),
            r#"{"variant":"ma","fix":"f1","candidates":[{"commit":"c1","committed":5,"subject":"s","lines":[],"score":0.5}],"selected":null,"ignored":["i1"],"notes":[],"agent":{"oracle":"lexicon","root_cause":{"summary":"x","evidence":[{"claim":"a","quote":"q","source":"cve"},{"claim":"b","quote":"r","source":"message"}],"keywords":[],"guards":["g"]},"review_rounds":0,"review":null,"hunks":[],"anchors":[],"traces":[{"anchor":1,"steps":[],"result":null,"stop":"no"}],"votes":[],"fallback":"ma","tool_calls":0,"cache_hits":0,"bytes_saved":0},"git_calls":1,"elapsed_ms":2}"#
        );
        let case = |status, selected: Option<&str>, notes: &[&str]| CaseResult {
            id: "1".into(),
            repo: "o/r".into(),
            fix: "f".into(),
            variant: Variant::Agent,
            labels: vec!["l".into()],
            predicted: vec![],
            selected: selected.map(Into::into),
            hits: 0,
            status,
            elapsed_ms: 3,
            notes: notes.iter().map(|n| n.to_string()).collect(),
        };
        let report = EvalReport {
            dataset: "d.json".into(),
            format: "rosa".into(),
            fixes_in_dataset: 2,
            fixes_run: 1,
            fixes_skipped: 1,
            missing_repos: vec![],
            scores: vec![],
            cases: vec![
                case(
                    CaseStatus::Skipped {
                        reason: "absent".into(),
                    },
                    None,
                    &[],
                ),
                case(
                    CaseStatus::Failed {
                        error: "bad".into(),
                    },
                    Some("c"),
                    &["n"],
                ),
            ],
            problems: vec!["p".into()],
        };
        assert_eq!(
            serde_json::to_string(&super::EvalReport::from(report)).unwrap(),
            r#"{"schema":"sage.szz-eval/1","dataset":"d.json","format":"rosa","fixes_in_dataset":2,"fixes_run":1,"fixes_skipped":1,"missing_repos":[],"scores":[],"cases":[{"id":"1","repo":"o/r","fix":"f","variant":"agent","labels":["l"],"predicted":[],"hits":0,"status":"skipped","reason":"absent","elapsed_ms":3},{"id":"1","repo":"o/r","fix":"f","variant":"agent","labels":["l"],"predicted":[],"selected":"c","hits":0,"status":"failed","error":"bad","elapsed_ms":3,"notes":["n"]}],"problems":["p"]}"#
        );
    }

    /// Chains written on a thread and put back read byte for byte as the plain report:
    /// several results (one without chains, one with an agent report, whose fields sit one
    /// level deeper), and contents that look like the field the chains are put before.
    #[test]
    fn chains_written_on_a_thread_read_as_the_plain_report() {
        use crate::model::{Candidate, Chain, LineRef, SzzResult, Variant};
        use crate::report::AgentReport;
        let tricky = "x\n      \"notes\": [\"é\u{1}\"]";
        let result = |variant, chains: usize, agent: bool| SzzResult {
            variant,
            fix: "f".into(),
            candidates: vec![Candidate {
                commit: "c".into(),
                committed: 1,
                subject: tricky.into(),
                lines: (0..3)
                    .map(|i| LineRef {
                        path: "m.py".into(),
                        line: i,
                        orig_path: "m.py".into(),
                        orig_line: i,
                        content: tricky.into(),
                    })
                    .collect(),
                score: None,
            }],
            selected: Some("c".into()),
            ignored: vec![],
            chains: (0..chains)
                .map(|i| Chain {
                    path: tricky.into(),
                    line: i,
                    commits: vec!["a".into(), "b".into()],
                })
                .collect(),
            notes: vec![tricky.into()],
            agent: agent.then(AgentReport::default),
            git_calls: 3,
            elapsed_ms: 4,
        };
        let report = || {
            super::SzzReport::new(
                "r".into(),
                "f".into(),
                vec![
                    result(Variant::V, 5, false),
                    result(Variant::B, 0, true),
                    result(Variant::V, 1, true),
                ],
            )
        };
        let plain = serde_json::to_string_pretty(&report()).unwrap();
        assert!(plain.contains("\"chains\": ["));
        assert_eq!(report().into_json_pretty_from(1).unwrap(), plain);
        assert_eq!(report().into_json_pretty().unwrap(), plain);
    }
}
