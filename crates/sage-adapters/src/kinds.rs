//! The one turn classifier for every trace format: a turn's workflow stage (planning,
//! implementation, review, verification) from what it does, not from the format it came in.
//!
//! The lists (test and run commands, inspection commands and tools, edit commands, words that
//! comment on a change) are data: `mappings/turn-kinds.toml`, embedded; the CLI replaces it
//! with `SAGE_TURN_KINDS=FILE` (read once by the CLI and passed as a value, in
//! [`crate::NormalizeOptions::rules`]). The precedence of the rules is
//! documented in that file and in `docs/design.md`.

use regex::{Regex, RegexBuilder, RegexSet, RegexSetBuilder};
use sage_trace::pattern::AsciiPatterns;
use sage_trace::text::{basename, names_file, TermSet};
use sage_trace::{CanonicalTrace, ToolCall, Turn, TurnKind};
use serde::Deserialize;
use std::collections::BTreeSet;
use std::sync::OnceLock;

/// The embedded classifier data.
pub const DEFAULT_TURN_KINDS: &str = include_str!("../mappings/turn-kinds.toml");

/// [`DEFAULT_TURN_KINDS`] as JSON (converted by `build.rs`), read at start-up without the
/// TOML parser.
const DEFAULT_TURN_KINDS_JSON: &str = include_str!(concat!(env!("OUT_DIR"), "/turn-kinds.json"));

/// The literals each pattern of the embedded files needs (computed by `build.rs`): a list
/// answers a text that has none of them without compiling the patterns.
const NEEDS: sage_trace::pattern::Needs = include!(concat!(env!("OUT_DIR"), "/needs.rs"));

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct KindsFile {
    version: String,
    tests: Vec<String>,
    runs: Vec<String>,
    inspects: Vec<String>,
    diffs: Vec<String>,
    inspect_tools: Vec<String>,
    edits: Vec<String>,
    edit_failed: Vec<String>,
    edit_tools: Vec<String>,
    change_comments: Vec<String>,
    /// Shell tools and the argument holding their command (for showing a call as the
    /// command it ran); optional so older override files still load.
    #[serde(default)]
    shell_tools: Vec<String>,
    #[serde(default)]
    shell_command_keys: Vec<String>,
}

/// The embedded classifier, compiled once (a cache of embedded data, not configuration: a
/// user's `SAGE_TURN_KINDS` file is a value the caller passes).
static EMBEDDED: OnceLock<std::sync::Arc<Classifier>> = OnceLock::new();

/// The compiled classifier.
#[derive(Debug, Clone)]
pub struct Classifier {
    pub version: String,
    tests: AnyOf,
    runs: AnyOf,
    inspects: AnyOf,
    diffs: AnyOf,
    inspect_tools: Vec<String>,
    edits: AnyOf,
    edit_failed: AnyOf,
    edit_tools: Vec<String>,
    /// `change_comments`, lower-cased, compiled once (it was one substring search per word
    /// per turn).
    change_comments: TermSet,
    shell_tools: Vec<String>,
    shell_command_keys: Vec<String>,
}

/// One list of patterns, asked whether any of them matches; compiled the first time it is
/// asked (a run that never consults a list never compiles it: compiling the embedded lists
/// was most of a tiny input's start-up).
#[derive(Debug, Clone)]
struct AnyOf {
    patterns: Vec<String>,
    compiled: OnceLock<Compiled>,
    /// The same list for ASCII text (most tool calls): it compiles several times faster.
    ascii: AsciiPatterns,
}

#[derive(Debug, Clone)]
enum Compiled {
    /// The list compiled as one set (one search for the whole list).
    Set(RegexSet),
    /// Each pattern compiled alone (a list the set builder refused).
    Each(Vec<Regex>),
}

impl AnyOf {
    /// The list, compiled now (`eager`, which checks every pattern) or on first use.
    fn new(list: &[String], field: &str, source: &str, eager: bool) -> Result<AnyOf, String> {
        let a = AnyOf {
            patterns: list.to_vec(),
            compiled: OnceLock::new(),
            ascii: AsciiPatterns::with_needs(list, true, true, NEEDS),
        };
        if eager {
            let c = a
                .compile()
                .map_err(|(p, e)| format!("{source}: {field}: bad pattern {p:?}: {e}"))?;
            let _ = a.compiled.set(c);
        }
        Ok(a)
    }

    /// One set per list: compiling ~70 Unicode patterns one by one was most of a small
    /// case's start-up. A list the set builder refuses is compiled pattern by pattern, which
    /// names the bad pattern (or, past the set's size limit, is used).
    fn compile(&self) -> Result<Compiled, (String, regex::Error)> {
        if let Ok(set) = RegexSetBuilder::new(&self.patterns)
            .case_insensitive(true)
            .multi_line(true)
            .build()
        {
            return Ok(Compiled::Set(set));
        }
        self.patterns
            .iter()
            .map(|p| {
                RegexBuilder::new(p)
                    .case_insensitive(true)
                    .multi_line(true)
                    .build()
                    .map_err(|e| (p.clone(), e))
            })
            .collect::<Result<Vec<Regex>, _>>()
            .map(Compiled::Each)
    }

    fn get(&self) -> &Compiled {
        self.compiled.get_or_init(|| {
            // only the embedded lists are compiled lazily, and a unit test compiles them
            self.compile()
                .unwrap_or_else(|(p, e)| panic!("embedded turn-kinds pattern {p:?}: {e}"))
        })
    }

    fn is_match(&self, text: &str) -> bool {
        if let Some(m) = self.ascii.is_match(text) {
            return m;
        }
        match self.get() {
            Compiled::Set(s) => s.is_match(text),
            Compiled::Each(res) => res.iter().any(|r| r.is_match(text)),
        }
    }
}

/// A turn-classifier file that cannot be used (the message names the file and the entry).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct KindsError(pub String);

/// The embedded classifier.
impl Default for Classifier {
    fn default() -> Classifier {
        Classifier::embedded_shared().clone()
    }
}

impl Classifier {
    /// Parse a classifier file; the error names the file and the bad entry.
    pub fn parse(text: &str, source: &str) -> Result<Classifier, KindsError> {
        Self::parse_file(text, source, true).map_err(KindsError)
    }

    /// `eager`: compile (and so check) every list now; the embedded file's lists are
    /// compiled when first used.
    fn parse_file(text: &str, source: &str, eager: bool) -> Result<Classifier, String> {
        let f: KindsFile = toml::from_str(text).map_err(|e| format!("{source}: {e}"))?;
        Classifier::from_file(&f, source, eager)
    }

    fn from_file(f: &KindsFile, source: &str, eager: bool) -> Result<Classifier, String> {
        let compile = |list: &[String], field: &str| -> Result<AnyOf, String> {
            AnyOf::new(list, field, source, eager)
        };
        let lower = |v: &[String]| -> Vec<String> { v.iter().map(|s| s.to_lowercase()).collect() };
        Ok(Classifier {
            version: f.version.clone(),
            tests: compile(&f.tests, "tests")?,
            runs: compile(&f.runs, "runs")?,
            inspects: compile(&f.inspects, "inspects")?,
            diffs: compile(&f.diffs, "diffs")?,
            inspect_tools: lower(&f.inspect_tools),
            edits: compile(&f.edits, "edits")?,
            edit_failed: compile(&f.edit_failed, "edit_failed")?,
            edit_tools: lower(&f.edit_tools),
            change_comments: TermSet::new(&lower(&f.change_comments)),
            shell_tools: lower(&f.shell_tools),
            shell_command_keys: f.shell_command_keys.clone(),
        })
    }

    /// The embedded classifier.
    pub fn embedded() -> Classifier {
        serde_json::from_str(DEFAULT_TURN_KINDS_JSON)
            .map_err(|e| e.to_string())
            .and_then(|f| Classifier::from_file(&f, "mappings/turn-kinds.toml (embedded)", false))
            .expect("the embedded turn-kinds file is valid (checked by a unit test)")
    }

    /// The embedded classifier, compiled once per process and shared.
    pub fn embedded_shared() -> &'static Classifier {
        Self::embedded_arc()
    }

    /// The embedded classifier as a run's configuration holds it: shared, not copied (its
    /// patterns are compiled once, whichever holder asks first).
    pub fn embedded_arc() -> &'static std::sync::Arc<Classifier> {
        EMBEDDED.get_or_init(|| std::sync::Arc::new(Classifier::embedded()))
    }

    fn any(res: &AnyOf, text: &str) -> bool {
        res.is_match(text)
    }

    fn tool_is(list: &[String], c: &ToolCall) -> bool {
        let n = c.name.to_lowercase();
        list.contains(&n)
    }

    /// True when `name` is a shell tool (`shell_tools`, compared case-insensitively).
    pub fn is_shell_tool(&self, name: &str) -> bool {
        self.shell_tools.contains(&name.to_lowercase())
    }

    /// The argument names that hold a shell tool's command, in order of preference.
    pub fn shell_command_keys(&self) -> &[String] {
        &self.shell_command_keys
    }

    /// True when the call changes a file by a command or an edit tool.
    pub(crate) fn is_edit_call(&self, c: &ToolCall) -> bool {
        Self::tool_is(&self.edit_tools, c) || Self::any(&self.edits, &c.arguments)
    }

    /// True when the call runs the tests or the program.
    pub(crate) fn is_check_call(&self, c: &ToolCall) -> bool {
        Self::any(&self.tests, &c.arguments) || Self::any(&self.runs, &c.arguments)
    }

    fn is_inspect_call(&self, c: &ToolCall) -> bool {
        Self::tool_is(&self.inspect_tools, c) || Self::any(&self.inspects, &c.arguments)
    }

    fn is_diff_call(&self, c: &ToolCall) -> bool {
        Self::any(&self.diffs, &c.arguments)
    }

    /// True when the call's tool result says the edit did not happen (an error result, or
    /// one of `edit_failed`). The result is the one with the call's id, else the turn's only
    /// result when the turn makes only this call.
    pub(crate) fn edit_failed(&self, t: &Turn, c: &ToolCall) -> bool {
        let result = match &c.id {
            Some(id) => t
                .tool_results
                .iter()
                .find(|r| r.call_id.as_deref() == Some(id)),
            None => None,
        }
        .or_else(|| {
            (t.tool_calls.len() == 1 && t.tool_results.len() == 1).then(|| &t.tool_results[0])
        });
        result.is_some_and(|r| r.is_error || Self::any(&self.edit_failed, &r.output))
    }

    /// The kind of turn `t`, given the file names written by earlier turns.
    pub fn classify(&self, t: &Turn, written_before: &BTreeSet<String>) -> TurnKind {
        let label = t.kind;
        if label == TurnKind::Administrative {
            return label;
        }
        if t.writes.iter().any(|w| !w.final_state)
            || t.tool_calls.iter().any(|c| self.is_edit_call(c))
        {
            return TurnKind::Implementation;
        }
        if matches!(label, TurnKind::Review | TurnKind::Verification) {
            return label;
        }
        if t.tool_calls.iter().any(|c| self.is_check_call(c)) {
            return TurnKind::Verification;
        }
        if written_before.is_empty() {
            return label;
        }
        let names_written = |text: &str| written_before.iter().any(|b| names_file(text, b));
        let inspects = t.tool_calls.iter().any(|c| {
            self.is_diff_call(c) || (self.is_inspect_call(c) && names_written(&c.arguments))
        });
        if inspects {
            return TurnKind::Review;
        }
        if label == TurnKind::Planning && t.tool_calls.is_empty() {
            if let Some(m) = &t.message {
                let lc = sage_trace::normalize_ws(&m.text.to_lowercase());
                if self.change_comments.matches(&lc) {
                    return TurnKind::Review;
                }
            }
        }
        label
    }
}

/// Set the kind of every turn of `trace` with the classifier `c` (idempotent: a turn it
/// labelled keeps its label on a second pass).
pub(crate) fn classify_trace(trace: &mut CanonicalTrace, c: &Classifier) {
    let mut written: BTreeSet<String> = BTreeSet::new();
    for t in &mut trace.turns {
        t.kind = c.classify(t, &written);
        t.edit_calls = (0..t.tool_calls.len())
            .filter(|&i| c.is_edit_call(&t.tool_calls[i]) && !c.edit_failed(t, &t.tool_calls[i]))
            .collect();
        for w in t.writes.iter().filter(|w| !w.final_state) {
            written.insert(basename(&w.artefact).to_string());
        }
        for call in &t.tool_calls {
            if c.is_edit_call(call) {
                // An edit sage could not replay still changed some file, so later turns come
                // after a write (the empty name matches no file, only "a write happened").
                written.insert(String::new());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sage_trace::{Actor, RawRef, TextItem, Write, WriteOp};

    /// Each embedded list, compiled as one set, answers as its patterns one by one; a bad
    /// pattern is still named.
    #[test]
    fn the_embedded_lists_compile_as_a_users_file_would() {
        // the embedded lists compile on first use; checked here as parse checks a user's
        Classifier::parse(DEFAULT_TURN_KINDS, "embedded").unwrap();
    }

    /// The build-time table holds each embedded pattern's clauses as computed now, and the
    /// lists answer alike with and without the literal check first.
    #[test]
    fn the_literal_check_answers_as_the_lists() {
        let c = Classifier::embedded();
        let lists = [
            &c.tests,
            &c.runs,
            &c.inspects,
            &c.diffs,
            &c.edits,
            &c.edit_failed,
        ];
        for list in lists {
            for p in &list.patterns {
                let built: Vec<Vec<String>> = NEEDS
                    .of(p)
                    .map(|(c, _)| c)
                    .unwrap_or_default()
                    .iter()
                    .map(|c| c.iter().map(|l| l.to_string()).collect())
                    .collect();
                assert_eq!(built, sage_trace::required::required(p), "{p}");
            }
        }
        let texts = [
            "python3 -m pytest tests/",
            "cd repo && PYTHON app.py",
            "cat src/app.py | head -n 5",
            "  open /tmp/x.py",
            "sed -i 's/a/b/' f.py; git diff HEAD",
            "ERROR: edit was not applied",
            "with open('out.txt', 'wb') as f: f.write(b)",
            "echo nothing to see here",
            "{\"command\": \"view\", \"path\": \"a.py\"}",
            "*** Begin Patch",
            "edit 12:14",
            "",
        ];
        for list in lists {
            let plain = AsciiPatterns::new(&list.patterns, true, true);
            for t in texts {
                assert_eq!(list.ascii.is_match(t), plain.is_match(t), "{t:?}");
            }
        }
    }

    /// The JSON copy read at start-up is the TOML file, value for value.
    #[test]
    fn the_embedded_json_is_the_toml_file() {
        let from_toml: KindsFile = toml::from_str(DEFAULT_TURN_KINDS).unwrap();
        let from_json: KindsFile = serde_json::from_str(DEFAULT_TURN_KINDS_JSON).unwrap();
        assert_eq!(format!("{from_json:?}"), format!("{from_toml:?}"));
    }

    #[test]
    fn a_list_as_a_set_matches_as_its_patterns_alone() {
        let f: KindsFile = toml::from_str(DEFAULT_TURN_KINDS).unwrap();
        let c = Classifier::embedded();
        let texts = [
            "",
            "pytest -q",
            "PYTEST",
            "python3 -m unittest",
            "cat app.py",
            "  open app.py",
            "sed -i 's/a/b/' x",
            "{\"command\": \"view\"}",
            "git diff",
            "No such file or directory",
            "ERROR: x",
            "x\n  ERROR y",
            "curl http://x",
            "pytestß",
            "ñpytest",
            "écat x",
            "old_string foo not found",
            "*** Begin Patch",
            "echo hi",
        ];
        let lists = [
            (&f.tests, &c.tests),
            (&f.runs, &c.runs),
            (&f.inspects, &c.inspects),
            (&f.diffs, &c.diffs),
            (&f.edits, &c.edits),
            (&f.edit_failed, &c.edit_failed),
        ];
        for (patterns, compiled) in lists {
            assert!(matches!(compiled.get(), Compiled::Set(_)));
            let each: Vec<Regex> = patterns
                .iter()
                .map(|p| {
                    RegexBuilder::new(p)
                        .case_insensitive(true)
                        .multi_line(true)
                        .build()
                        .unwrap()
                })
                .collect();
            for t in texts {
                assert_eq!(
                    compiled.is_match(t),
                    each.iter().any(|r| r.is_match(t)),
                    "{t:?}"
                );
            }
        }
        let bad = DEFAULT_TURN_KINDS.replacen("'\\bpytest\\b'", "'a)|(b'", 1);
        assert_ne!(bad, DEFAULT_TURN_KINDS);
        let e = Classifier::parse(&bad, "k.toml").unwrap_err();
        assert!(
            e.0.starts_with("k.toml: tests: bad pattern \"a)|(b\""),
            "{e}"
        );
    }

    fn call(name: &str, args: &str) -> ToolCall {
        ToolCall {
            id: None,
            name: name.into(),
            arguments: args.into(),
            raw: RawRef::lines("t", 1, 1),
        }
    }

    fn turn(kind: TurnKind, calls: Vec<ToolCall>, msg: Option<&str>, writes: bool) -> Turn {
        let mut t = Turn::new(Actor::new("a", None), kind);
        t.tool_calls = calls;
        t.message = msg.map(|m| TextItem {
            text: m.into(),
            raw: RawRef::lines("t", 1, 1),
        });
        if writes {
            t.writes.push(Write {
                artefact: "src/app.py".into(),
                op: WriteOp::FullContent {
                    content: "x".into(),
                },
                via: "t".into(),
                final_state: false,
                raw: RawRef::lines("t", 1, 1),
            });
        }
        t
    }

    #[test]
    fn the_embedded_file_parses() {
        let c = Classifier::embedded();
        assert!(c.version.starts_with("turn-kinds-"));
        let bad = DEFAULT_TURN_KINDS.replace("'\\bctest\\b'", "'(unclosed'");
        let e = Classifier::parse(&bad, "mine.toml")
            .unwrap_err()
            .to_string();
        assert!(e.contains("mine.toml") && e.contains("tests"), "{e}");
    }

    #[test]
    fn every_stage_from_what_the_turn_does() {
        use TurnKind::*;
        let c = Classifier::embedded();
        let none = BTreeSet::new();
        let app: BTreeSet<String> = ["app.py".to_string()].into();
        // writes → implementation, whatever the label
        assert_eq!(
            c.classify(&turn(Planning, vec![], None, true), &none),
            Implementation
        );
        // an edit command sage could not replay still changed a file
        let sed = call("bash", r#"sed -i 's/a\(b\)/c/' app.py"#);
        assert_eq!(
            c.classify(&turn(Planning, vec![sed], None, false), &none),
            Implementation
        );
        // tests or the program → verification
        let t = call(
            "bash",
            r#"{"command": "cd /testbed && python -m pytest tests/ -q"}"#,
        );
        assert_eq!(
            c.classify(&turn(Planning, vec![t], None, false), &app),
            Verification
        );
        let r = call("execute_bash", "python3 reproduce.py");
        assert_eq!(
            c.classify(&turn(Planning, vec![r], None, false), &none),
            Verification
        );
        // reading a written artefact after the write → review; before any write → planning
        let v = call(
            "str_replace_editor",
            r#"{"command": "view", "path": "/workspace/src/app.py"}"#,
        );
        assert_eq!(
            c.classify(&turn(Planning, vec![v.clone()], None, false), &app),
            Review
        );
        assert_eq!(
            c.classify(&turn(Planning, vec![v], None, false), &none),
            Planning
        );
        let other = call("Read", r#"{"file_path": "/repo/README.md"}"#);
        assert_eq!(
            c.classify(&turn(Planning, vec![other], None, false), &app),
            Planning
        );
        let diff = call("bash", "git diff");
        assert_eq!(
            c.classify(&turn(Planning, vec![diff], None, false), &app),
            Review
        );
        // commenting on the change, message only, after a write → review
        let m = Some("The fix is applied and the handler now uses an allow-list.");
        assert_eq!(c.classify(&turn(Planning, vec![], m, false), &app), Review);
        assert_eq!(
            c.classify(&turn(Planning, vec![], m, false), &none),
            Planning
        );
        let plan = Some("Next, update the tests for the new handler.");
        assert_eq!(
            c.classify(&turn(Planning, vec![], plan, false), &app),
            Planning
        );
        // a framework's own review label is kept; administrative is never touched
        let t = call("bash", "pytest");
        assert_eq!(
            c.classify(&turn(Review, vec![t.clone()], None, false), &app),
            Review
        );
        assert_eq!(
            c.classify(&turn(Administrative, vec![t], None, true), &app),
            Administrative
        );
    }
}
