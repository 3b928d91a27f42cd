//! The oracle the agentic tracer consults at each MAS-SZZ stage.
//!
//! [`LexiconOracle`] answers every question offline from token overlap between the fix's
//! changed lines, its message, the CVE text and the candidate commit's lines. An LLM backend
//! plugs in by implementing [`SzzOracle`]: [`LlmOracle`] does that over any
//! [`JsonCompletion`] client ("complete this prompt, return JSON"), which is the seam for
//! the generic client in `src/judge/llm/` once it is on main.

use crate::oracle_data::{fill, OracleData};
use crate::SzzError;
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// One hunk of the fix as the oracle sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HunkView {
    pub index: usize,
    /// The file at `fix^` (old side) and after the fix.
    pub path: String,
    pub new_path: String,
    pub header: String,
    /// (old-side line number, text)
    pub deleted: Vec<(usize, String)>,
    /// (new-side line number, text)
    pub added: Vec<(usize, String)>,
    /// Unchanged lines around the change: (old-side line number, text).
    pub context: Vec<(usize, String)>,
    /// The hunk as unified-diff text.
    pub text: String,
}

/// What the Auditor is given.
#[derive(Debug, Clone)]
pub struct RootCauseInput<'a> {
    pub cve: Option<&'a str>,
    pub message: &'a str,
    pub hunks: &'a [HunkView],
    /// The Judge's feedback on the previous attempt.
    pub feedback: Option<String>,
}

/// Where an evidence point comes from.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase", tag = "source", content = "hunk")]
pub enum EvidenceSource {
    Cve,
    Message,
    Hunk(usize),
}

/// A claim with the verbatim quote that supports it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Evidence {
    pub claim: String,
    pub quote: String,
    #[serde(flatten)]
    pub source: EvidenceSource,
}

/// The root-cause summary.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct RootCause {
    pub summary: String,
    pub evidence: Vec<Evidence>,
    /// Identifiers that characterize the vulnerable code, most telling first.
    pub keywords: Vec<String>,
    /// Tokens the fix added (guards, checks): their presence means "already fixed".
    #[serde(default)]
    pub guards: Vec<String>,
}

/// The Judge's verdict on a root cause.
#[derive(Debug, Clone, PartialEq)]
pub struct Review {
    pub pass: bool,
    /// Per evidence point: its quote was found in the source it names.
    pub verified: Vec<bool>,
    pub feedback: String,
}

/// Conventional Commits categories (ten, as MAS-SZZ uses them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChangeCategory {
    Feat,
    Fix,
    Docs,
    Style,
    Refactor,
    Perf,
    Test,
    Build,
    Ci,
    Chore,
}

/// A hunk's intent and relevance to the root cause.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct HunkIntent {
    pub category: ChangeCategory,
    pub summary: String,
    pub relevant: bool,
    pub score: f64,
}

/// An anchor statement: a pre-fix line (deleted or context, never added).
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Anchor {
    pub hunk: usize,
    pub path: String,
    /// Line number at `fix^`.
    pub line: usize,
    pub text: String,
    pub deleted: bool,
    pub score: f64,
}

/// What the Tracer sees at one commit of the walk back.
#[derive(Debug, Clone)]
pub struct PresenceQuery<'a> {
    pub root: &'a RootCause,
    pub anchor: &'a Anchor,
    pub commit: &'a str,
    pub subject: &'a str,
    pub path: &'a str,
    /// The anchor statement as it reads in this commit (mapped by content).
    pub line: &'a str,
    /// The lines this commit deleted and added in the file (its change of the statement).
    pub deleted: &'a [String],
    pub added: &'a [String],
}

/// The Tracer's decision at one commit.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Presence {
    pub present: bool,
    /// This commit's own change brought the vulnerability in (it removed a guard, say): the
    /// code was safe before it, so the walk stops here and answers this commit.
    #[serde(default)]
    pub introduced: bool,
    pub reason: String,
}

/// Answers the agentic tracer's questions (MAS-SZZ's Auditor, Judge, Reviewer, Evaluator,
/// Locator and Tracer roles).
pub trait SzzOracle {
    /// Backend and model, e.g. `lexicon` or `llm:gpt-4o`.
    fn id(&self) -> String;
    /// Auditor: a root-cause summary with evidence points.
    fn root_cause(&self, input: &RootCauseInput) -> Result<RootCause, SzzError>;
    /// Judge: evidence traceability and logical consistency. The default checks that every
    /// quote occurs verbatim (after whitespace normalization) in the source it names and
    /// passes when at least one does and no more than half fail.
    fn review(&self, input: &RootCauseInput, rc: &RootCause) -> Result<Review, SzzError> {
        Ok(verify_evidence(input, rc))
    }
    /// Reviewer and Evaluator: the hunk's intent and its relevance to the root cause.
    fn hunk_intent(&self, rc: &RootCause, hunk: &HunkView) -> Result<HunkIntent, SzzError>;
    /// Locator: up to `max` anchor statements from the relevant hunks.
    fn anchors(
        &self,
        rc: &RootCause,
        hunks: &[&HunkView],
        max: usize,
    ) -> Result<Vec<Anchor>, SzzError>;
    /// Tracer: is the vulnerability present at this commit?
    fn present(&self, q: &PresenceQuery) -> Result<Presence, SzzError>;
}

/// Whitespace-normalized text (runs of whitespace become one space).
pub fn norm(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The mechanical half of the Judge: each quote must occur in its named source.
pub(crate) fn verify_evidence(input: &RootCauseInput, rc: &RootCause) -> Review {
    let mut verified = Vec::new();
    let mut problems = Vec::new();
    for (i, e) in rc.evidence.iter().enumerate() {
        let q = norm(&e.quote);
        let source = match &e.source {
            EvidenceSource::Cve => input.cve.map(norm),
            EvidenceSource::Message => Some(norm(input.message)),
            EvidenceSource::Hunk(h) => input
                .hunks
                .iter()
                .find(|x| x.index == *h)
                .map(|x| norm(&x.text)),
        };
        let ok = !q.is_empty() && source.is_some_and(|s| s.contains(&q));
        if !ok {
            problems.push(format!(
                "evidence {} quote {:?} is not in {:?}",
                i + 1,
                e.quote.chars().take(60).collect::<String>(),
                e.source
            ));
        }
        verified.push(ok);
    }
    let good = verified.iter().filter(|v| **v).count();
    let pass = good > 0 && good * 2 >= verified.len();
    let feedback = if pass {
        String::new()
    } else if verified.is_empty() {
        "no evidence points: cite the CVE text, the message or a hunk verbatim".into()
    } else {
        problems.join("; ")
    };
    Review {
        pass,
        verified,
        feedback,
    }
}

// ---------------------------------------------------------------------------------------
// The lexicon oracle
// ---------------------------------------------------------------------------------------

/// Lower-cased identifier tokens of length ≥ 3 (camelCase and snake_case are also split).
pub fn tokens(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in text.split(|c: char| !(c.is_alphanumeric() || c == '_')) {
        if word.is_empty() {
            continue;
        }
        let lw = word.to_lowercase();
        if lw.len() >= 3 && !lw.chars().all(|c| c.is_ascii_digit()) {
            out.push(lw.clone());
        }
        // sub-words
        let mut cur = String::new();
        let mut parts = Vec::new();
        let mut prev_lower = false;
        for c in word.chars() {
            if c == '_' {
                if !cur.is_empty() {
                    parts.push(std::mem::take(&mut cur));
                }
                prev_lower = false;
                continue;
            }
            if c.is_uppercase() && prev_lower && !cur.is_empty() {
                parts.push(std::mem::take(&mut cur));
            }
            prev_lower = c.is_lowercase() || c.is_ascii_digit();
            cur.push(c);
        }
        if !cur.is_empty() {
            parts.push(cur);
        }
        if parts.len() > 1 {
            for p in parts {
                let p = p.to_lowercase();
                if p.len() >= 3 && p != lw && !p.chars().all(|c| c.is_ascii_digit()) {
                    out.push(p);
                }
            }
        }
    }
    let data = OracleData::embedded();
    out.retain(|t| !data.is_stop_word(t));
    out
}

fn token_set(text: &str) -> BTreeSet<String> {
    tokens(text).into_iter().collect()
}

/// True for a line that carries no statement (blank, a brace, a comment marker only).
pub(crate) fn trivial_line(s: &str) -> bool {
    let t = s.trim();
    t.is_empty()
        || t.chars().all(|c| "{}()[];,".contains(c))
        || t.starts_with("//")
        || t.starts_with("/*")
        || t.starts_with('*')
        || t.starts_with('#') && !t.starts_with("#include") && !t.starts_with("#define")
}

/// The offline oracle. Thresholds are in the struct so they are visible and tunable.
#[derive(Debug, Clone)]
pub struct LexiconOracle {
    /// Stop words and guard hints (`data/oracle.toml`).
    pub data: Arc<OracleData>,
    /// How many keywords the root cause keeps.
    pub max_keywords: usize,
    /// A hunk is relevant when its keyword overlap score reaches this.
    pub relevance: f64,
    /// At a commit, the statement still "carries" the vulnerability when at least this
    /// share of the anchor's keywords occurs in it.
    pub retention: f64,
}

impl Default for LexiconOracle {
    fn default() -> Self {
        LexiconOracle {
            data: OracleData::embedded(),
            max_keywords: 12,
            relevance: 1.0,
            retention: 0.5,
        }
    }
}

impl LexiconOracle {
    fn keyword_weights(&self, input: &RootCauseInput) -> (BTreeMap<String, f64>, BTreeSet<String>) {
        let cve = input.cve.map(token_set).unwrap_or_default();
        let msg = token_set(input.message);
        let mut deleted: BTreeMap<String, usize> = BTreeMap::new();
        let mut added: BTreeMap<String, usize> = BTreeMap::new();
        for h in input.hunks {
            for (_, l) in &h.deleted {
                for t in tokens(l) {
                    *deleted.entry(t).or_default() += 1;
                }
            }
            for (_, l) in &h.added {
                for t in tokens(l) {
                    *added.entry(t).or_default() += 1;
                }
            }
        }
        let mut w: BTreeMap<String, f64> = BTreeMap::new();
        for (t, n) in &deleted {
            let mut s = 1.0 + (*n as f64).ln_1p();
            if !added.contains_key(t) {
                s += 1.0; // removed outright
            }
            if cve.contains(t) {
                s += 2.0;
            }
            if msg.contains(t) {
                s += 1.0;
            }
            w.insert(t.clone(), s);
        }
        for t in added.keys() {
            if deleted.contains_key(t) {
                continue;
            }
            let mut s = 0.5;
            if cve.contains(t) {
                s += 2.0;
            }
            if msg.contains(t) {
                s += 0.5;
            }
            *w.entry(t.clone()).or_default() += s;
        }
        // a CVE word that appears in no hunk still says what to look for, weakly
        for t in &cve {
            w.entry(t.clone()).or_insert(0.25);
        }
        let guards: BTreeSet<String> = added
            .keys()
            .filter(|t| !deleted.contains_key(*t))
            .filter(|t| self.data.is_guard(t))
            .cloned()
            .collect();
        (w, guards)
    }

    fn score_text(rc: &RootCause, text: &str) -> f64 {
        let toks = token_set(text);
        rc.keywords
            .iter()
            .enumerate()
            .filter(|(_, k)| toks.contains(*k))
            .map(|(i, _)| 1.0 / (1.0 + i as f64 * 0.15))
            .sum()
    }
}

impl SzzOracle for LexiconOracle {
    fn id(&self) -> String {
        "lexicon".into()
    }

    fn root_cause(&self, input: &RootCauseInput) -> Result<RootCause, SzzError> {
        let (w, guards) = self.keyword_weights(input);
        let mut ranked: Vec<(String, f64)> = w.into_iter().collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let keywords: Vec<String> = ranked
            .into_iter()
            .take(self.max_keywords)
            .map(|(t, _)| t)
            .collect();
        // evidence: for the top keywords, the first line (deleted, then added) or CVE
        // sentence that contains them, quoted verbatim
        let mut evidence = Vec::new();
        for k in keywords.iter().take(4) {
            let mut found = None;
            'h: for h in input.hunks {
                for (_, l) in h.deleted.iter().chain(h.added.iter()) {
                    if token_set(l).contains(k) && !l.trim().is_empty() {
                        found = Some(Evidence {
                            claim: format!("the fix changes code using `{k}`"),
                            quote: l.trim().to_string(),
                            source: EvidenceSource::Hunk(h.index),
                        });
                        break 'h;
                    }
                }
            }
            if found.is_none() {
                if let Some(cve) = input.cve {
                    if let Some(sent) = cve.split(['.', ';']).find(|s| token_set(s).contains(k)) {
                        found = Some(Evidence {
                            claim: format!("the description names `{k}`"),
                            quote: sent.trim().to_string(),
                            source: EvidenceSource::Cve,
                        });
                    }
                }
            }
            if let Some(e) = found {
                if !evidence.contains(&e) {
                    evidence.push(e);
                }
            }
        }
        let files: BTreeSet<&str> = input.hunks.iter().map(|h| h.path.as_str()).collect();
        let summary = format!(
            "The vulnerable code in {} involves {}{}.",
            files.into_iter().collect::<Vec<_>>().join(", "),
            keywords
                .iter()
                .take(5)
                .cloned()
                .collect::<Vec<_>>()
                .join(", "),
            if guards.is_empty() {
                String::new()
            } else {
                format!(
                    "; the fix adds {}",
                    guards
                        .iter()
                        .take(4)
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        );
        Ok(RootCause {
            summary,
            evidence,
            keywords,
            guards: guards.into_iter().collect(),
        })
    }

    fn hunk_intent(&self, rc: &RootCause, h: &HunkView) -> Result<HunkIntent, SzzError> {
        let path = h.new_path.to_ascii_lowercase();
        let name = path.rsplit('/').next().unwrap_or(&path);
        let changed: Vec<&str> = h
            .deleted
            .iter()
            .chain(h.added.iter())
            .map(|(_, l)| l.as_str())
            .collect();
        let ws_only = {
            let d: String = h
                .deleted
                .iter()
                .flat_map(|(_, l)| l.split_whitespace())
                .collect();
            let a: String = h
                .added
                .iter()
                .flat_map(|(_, l)| l.split_whitespace())
                .collect();
            d == a
        };
        let comment_only = changed.iter().all(|l| trivial_line(l));
        let category = if path.contains("test") {
            ChangeCategory::Test
        } else if [".md", ".txt", ".rst", ".adoc"]
            .iter()
            .any(|e| name.ends_with(e))
            || name.starts_with("changelog")
            || name == "news"
        {
            ChangeCategory::Docs
        } else if path.starts_with(".github/")
            || path.contains(".travis")
            || path.contains("jenkinsfile")
        {
            ChangeCategory::Ci
        } else if [
            "makefile",
            "cmakelists.txt",
            "pom.xml",
            "build.gradle",
            "package.json",
            "configure.ac",
            "cargo.toml",
        ]
        .contains(&name)
        {
            ChangeCategory::Build
        } else if comment_only {
            ChangeCategory::Docs
        } else if ws_only {
            ChangeCategory::Style
        } else if h.deleted.is_empty()
            && h.added
                .iter()
                .any(|(_, l)| l.contains('(') && l.trim_end().ends_with('{'))
        {
            ChangeCategory::Feat
        } else {
            ChangeCategory::Fix
        };
        let score = Self::score_text(rc, &changed.join("\n"));
        let relevant = category == ChangeCategory::Fix && score >= self.relevance;
        let summary = format!(
            "{} {} line(s), adds {} in {}{}",
            if h.deleted.is_empty() {
                "changes no"
            } else {
                "changes"
            },
            h.deleted.len(),
            h.added.len(),
            h.new_path,
            if h.header.is_empty() {
                String::new()
            } else {
                format!(" ({})", h.header)
            }
        );
        Ok(HunkIntent {
            category,
            summary,
            relevant,
            score,
        })
    }

    fn anchors(
        &self,
        rc: &RootCause,
        hunks: &[&HunkView],
        max: usize,
    ) -> Result<Vec<Anchor>, SzzError> {
        let mut all = Vec::new();
        for h in hunks {
            for (n, l) in &h.deleted {
                if trivial_line(l) {
                    continue;
                }
                all.push(Anchor {
                    hunk: h.index,
                    path: h.path.clone(),
                    line: *n,
                    text: l.clone(),
                    deleted: true,
                    score: Self::score_text(rc, l) + 0.5,
                });
            }
            // context lines carry the vulnerable statement when the fix only adds a guard;
            // when the hunk rewrites a statement, that statement is the anchor, and the lines
            // around it (which share its variables) would only outvote it
            if h.deleted.iter().any(|(_, l)| !trivial_line(l)) {
                continue;
            }
            for (n, l) in &h.context {
                if trivial_line(l) {
                    continue;
                }
                let s = Self::score_text(rc, l);
                if s > 0.0 {
                    all.push(Anchor {
                        hunk: h.index,
                        path: h.path.clone(),
                        line: *n,
                        text: l.clone(),
                        deleted: false,
                        score: s * 0.8,
                    });
                }
            }
        }
        all.sort_by(|a, b| {
            b.score
                .total_cmp(&a.score)
                .then(a.hunk.cmp(&b.hunk))
                .then(a.line.cmp(&b.line))
        });
        all.truncate(max);
        Ok(all)
    }

    fn present(&self, q: &PresenceQuery) -> Result<Presence, SzzError> {
        let anchor_kw: BTreeSet<String> = token_set(&q.anchor.text)
            .into_iter()
            .filter(|t| q.root.keywords.contains(t) || q.anchor.deleted)
            .collect();
        let line = token_set(q.line);
        if anchor_kw.is_empty() {
            let present = !q.line.trim().is_empty();
            return Ok(Presence {
                present,
                introduced: false,
                reason: "no keyword in the anchor: present while the statement exists".into(),
            });
        }
        let kept = anchor_kw.iter().filter(|t| line.contains(*t)).count();
        let share = kept as f64 / anchor_kw.len() as f64;
        let added: BTreeSet<String> = q.added.iter().flat_map(|l| tokens(l)).collect();
        let deleted: BTreeSet<String> = q.deleted.iter().flat_map(|l| tokens(l)).collect();
        // a guard the fix added that this commit removed: the code was safe before it
        let guard_removed: Vec<&String> = q
            .root
            .guards
            .iter()
            .filter(|g| deleted.contains(*g) && !added.contains(*g))
            .collect();
        if !guard_removed.is_empty() {
            return Ok(Presence {
                present: true,
                introduced: true,
                reason: format!("this commit removes the guard {}", guard_removed[0]),
            });
        }
        let guard_here: Vec<&String> = q.root.guards.iter().filter(|g| line.contains(*g)).collect();
        if !guard_here.is_empty() {
            return Ok(Presence {
                introduced: false,
                present: false,
                reason: format!("the statement already carries the guard {}", guard_here[0]),
            });
        }
        // A version with a check the vulnerable statement lacks is the safe line a later
        // commit rewrote: it shares the statement's keywords but not its weakness, so the
        // walk must stop at the commit that rewrote it (the one that introduced the flaw).
        // The check need not be the fix's own guard.
        let anchor_all = token_set(&q.anchor.text);
        let bound: Vec<&String> = line
            .iter()
            .filter(|t| !anchor_all.contains(*t) && self.data.is_guard(t))
            .collect();
        if !bound.is_empty() {
            return Ok(Presence {
                introduced: false,
                present: false,
                reason: format!(
                    "this version carries a check the vulnerable statement lacks ({})",
                    bound
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            });
        }
        Ok(Presence {
            introduced: false,
            present: share >= self.retention,
            reason: format!(
                "{kept} of {} anchor keyword(s) present in the statement ({:.0}%)",
                anchor_kw.len(),
                share * 100.0
            ),
        })
    }
}

// ---------------------------------------------------------------------------------------
// The LLM seam
// ---------------------------------------------------------------------------------------

/// A client that completes a prompt and returns a JSON value: the generic client the
/// judges' LLM backends expose. Implement it over that client to get an LLM oracle.
pub trait JsonCompletion {
    /// Backend and model name.
    fn model(&self) -> String;
    /// Complete `prompt` (system + user text) and return the parsed JSON answer.
    fn complete_json(&self, system: &str, user: &str) -> Result<serde_json::Value, SzzError>;
}

/// The judges' generic client (`crates/sage-llm/src/client.rs`) as a [`JsonCompletion`]: the
/// same providers, key handling, retries and timeouts as the LLM judges.
pub struct JudgeLlmClient {
    pub settings: sage_llm::LlmSettings,
}

impl JudgeLlmClient {
    /// `openai:MODEL` or `anthropic:MODEL`, with keys and base URLs from the conventional
    /// environment variables.
    pub fn from_spec(spec: &str, env: &sage_llm::Env) -> Result<Self, SzzError> {
        use sage_llm::{LlmSettings, Provider};
        let (p, model) = spec.split_once(':').ok_or_else(|| {
            SzzError::Other(format!(
                "oracle {spec:?}: expected lexicon, openai:MODEL or anthropic:MODEL"
            ))
        })?;
        let provider = Provider::parse(p).ok_or_else(|| {
            SzzError::Other(format!(
                "oracle {spec:?}: unknown provider {p:?} (openai, anthropic)"
            ))
        })?;
        if model.trim().is_empty() {
            return Err(SzzError::Other(format!("oracle {spec:?}: no model")));
        }
        Ok(JudgeLlmClient {
            settings: LlmSettings::from_env(provider, model.trim(), env),
        })
    }
}

impl JsonCompletion for JudgeLlmClient {
    fn model(&self) -> String {
        format!("{}:{}", self.settings.provider.name(), self.settings.model)
    }
    fn complete_json(&self, system: &str, user: &str) -> Result<serde_json::Value, SzzError> {
        sage_llm::client::complete_json_blocking(&self.settings, system, user, None)
            .map(|a| a.value)
            .map_err(|e| SzzError::Other(format!("{}: {e}", self.model())))
    }
}

/// An [`SzzOracle`] that asks an LLM through a [`JsonCompletion`] client, with MAS-SZZ's
/// role prompts (written here, not copied). The lexicon oracle fills in the anchors'
/// candidates so the LLM picks among real pre-fix lines and cannot invent one.
pub struct LlmOracle<C: JsonCompletion> {
    pub client: C,
    pub fallback: LexiconOracle,
}

impl<C: JsonCompletion> LlmOracle<C> {
    pub fn new(client: C) -> Self {
        LlmOracle {
            client,
            fallback: LexiconOracle::default(),
        }
    }

    fn ask<T: for<'de> Deserialize<'de>>(&self, user: String) -> Result<T, SzzError> {
        let v = self
            .client
            .complete_json(&self.fallback.data.prompts.system, &user)?;
        serde_json::from_value(v)
            .map_err(|e| SzzError::Other(format!("oracle answer does not fit the schema: {e}")))
    }
}

impl<C: JsonCompletion> SzzOracle for LlmOracle<C> {
    fn id(&self) -> String {
        format!("llm:{}", self.client.model())
    }

    fn root_cause(&self, input: &RootCauseInput) -> Result<RootCause, SzzError> {
        let hunks: Vec<String> = input
            .hunks
            .iter()
            .map(|h| format!("[hunk {}] {}\n{}", h.index, h.path, h.text))
            .collect();
        let feedback = input
            .feedback
            .as_deref()
            .map(|f| format!("The previous answer was rejected: {f}"))
            .unwrap_or_default();
        self.ask(fill(
            &self.fallback.data.prompts.root_cause,
            &[
                ("cve", input.cve.unwrap_or("(none)")),
                ("message", input.message),
                ("hunks", &hunks.join("\n")),
                ("feedback", &feedback),
            ],
        ))
    }

    fn hunk_intent(&self, rc: &RootCause, h: &HunkView) -> Result<HunkIntent, SzzError> {
        self.ask(fill(
            &self.fallback.data.prompts.hunk_intent,
            &[
                ("root_cause", &rc.summary),
                ("path", &h.path),
                ("hunk", &h.text),
            ],
        ))
    }

    fn anchors(
        &self,
        rc: &RootCause,
        hunks: &[&HunkView],
        max: usize,
    ) -> Result<Vec<Anchor>, SzzError> {
        // candidates are real pre-fix lines; the LLM ranks them
        let cands = self.fallback.anchors(rc, hunks, 50)?;
        if cands.is_empty() {
            return Ok(cands);
        }
        let list: Vec<String> = cands
            .iter()
            .enumerate()
            .map(|(i, a)| format!("{i}: {}:{} {}", a.path, a.line, a.text.trim()))
            .collect();
        #[derive(Deserialize)]
        struct Pick {
            picks: Vec<usize>,
        }
        let p: Pick = self.ask(fill(
            &self.fallback.data.prompts.anchors,
            &[
                ("root_cause", &rc.summary),
                ("statements", &list.join("\n")),
                ("max", &max.to_string()),
            ],
        ))?;
        Ok(p.picks
            .into_iter()
            .filter_map(|i| cands.get(i).cloned())
            .take(max)
            .collect())
    }

    fn present(&self, q: &PresenceQuery) -> Result<Presence, SzzError> {
        self.ask(fill(
            &self.fallback.data.prompts.present,
            &[
                ("root_cause", &q.root.summary),
                ("anchor", q.anchor.text.trim()),
                ("commit", q.commit),
                ("subject", q.subject),
                ("path", q.path),
                ("line", q.line),
                ("deleted", &q.deleted.join("\n")),
                ("added", &q.added.join("\n")),
            ],
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hunk() -> HunkView {
        HunkView {
            index: 0,
            path: "src/m.c".into(),
            new_path: "src/m.c".into(),
            header: "int main(void)".into(),
            deleted: vec![(4, "    memcpy(buf, src, len);".into())],
            added: vec![(4, "    if (len > sizeof buf) return -1;".into()), (5, "    memcpy(buf, src, len);".into())],
            context: vec![(3, "    char buf[16];".into())],
            text: "@@ -3,2 +3,3 @@\n     char buf[16];\n-    memcpy(buf, src, len);\n+    if (len > sizeof buf) return -1;\n+    memcpy(buf, src, len);\n".into(),
        }
    }

    /// A scripted client: answers by the first keyword of the prompt.
    struct Scripted;
    impl JsonCompletion for Scripted {
        fn model(&self) -> String {
            "scripted".into()
        }
        fn complete_json(&self, _system: &str, user: &str) -> Result<serde_json::Value, SzzError> {
            Ok(if user.starts_with("Summarize") {
                serde_json::json!({"summary": "unchecked len in memcpy", "keywords": ["memcpy", "len"], "guards": [],
                    "evidence": [{"claim": "copies len bytes", "quote": "memcpy(buf, src, len);", "source": "hunk", "hunk": 0}]})
            } else if user.starts_with("Root cause") && user.contains("Pick up to") {
                serde_json::json!({"picks": [0]})
            } else if user.contains("classify") {
                serde_json::json!({"category": "fix", "summary": "adds a length check", "relevant": true, "score": 0.9})
            } else {
                serde_json::json!({"present": true, "reason": "still copies len bytes"})
            })
        }
    }

    #[test]
    fn llm_oracle_parses_each_role_and_keeps_the_quote_discipline() {
        let h = [hunk()];
        let o = LlmOracle::new(Scripted);
        assert_eq!(o.id(), "llm:scripted");
        let input = RootCauseInput {
            cve: None,
            message: "m",
            hunks: &h,
            feedback: None,
        };
        let rc = o.root_cause(&input).unwrap();
        assert_eq!(rc.evidence[0].source, EvidenceSource::Hunk(0));
        assert!(o.review(&input, &rc).unwrap().pass);
        let intent = o.hunk_intent(&rc, &h[0]).unwrap();
        assert_eq!(intent.category, ChangeCategory::Fix);
        let anchors = o.anchors(&rc, &[&h[0]], 5).unwrap();
        assert_eq!(anchors.len(), 1);
        assert!(h[0]
            .deleted
            .iter()
            .chain(h[0].context.iter())
            .any(|(_, t)| *t == anchors[0].text));
        let spec_err = JudgeLlmClient::from_spec("nope:x", &Default::default())
            .err()
            .unwrap();
        assert!(spec_err.to_string().contains("unknown provider"));
        assert!(JudgeLlmClient::from_spec("openai", &Default::default()).is_err());
    }

    #[test]
    fn tokens_split_identifiers() {
        let t = tokens("readBufferSize(max_len) if x");
        assert!(t.contains(&"readbuffersize".to_string()));
        assert!(t.contains(&"buffer".to_string()));
        assert!(t.contains(&"max_len".to_string()));
        assert!(!t.contains(&"if".to_string()));
    }

    #[test]
    fn lexicon_root_cause_is_grounded_and_reviewed() {
        let h = [hunk()];
        let input = RootCauseInput {
            cve: Some("Buffer overflow in memcpy of src allows remote attackers to execute code."),
            message: "check len before memcpy",
            hunks: &h,
            feedback: None,
        };
        let o = LexiconOracle::default();
        let rc = o.root_cause(&input).unwrap();
        assert!(
            rc.keywords.contains(&"memcpy".to_string()),
            "{:?}",
            rc.keywords
        );
        let review = o.review(&input, &rc).unwrap();
        assert!(review.pass, "{review:?}");
        // a fabricated quote fails the second pass
        let mut bad = rc.clone();
        for e in &mut bad.evidence {
            e.quote = "strcpy(dst, src)".into();
        }
        assert!(!o.review(&input, &bad).unwrap().pass);
    }

    #[test]
    fn presence_follows_keyword_retention() {
        let h = [hunk()];
        let input = RootCauseInput {
            cve: None,
            message: "fix",
            hunks: &h,
            feedback: None,
        };
        let o = LexiconOracle::default();
        let rc = o.root_cause(&input).unwrap();
        let anchors = o.anchors(&rc, &[&h[0]], 5).unwrap();
        assert!(anchors[0].deleted);
        let q = |line: &'static str| PresenceQuery {
            root: &rc,
            anchor: &anchors[0],
            commit: "c",
            subject: "s",
            path: "src/m.c",
            line,
            deleted: &[],
            added: &[],
        };
        assert!(o.present(&q("memcpy(buf, src, len);")).unwrap().present);
        assert!(!o.present(&q("puts(\"hello\");")).unwrap().present);
    }
}
