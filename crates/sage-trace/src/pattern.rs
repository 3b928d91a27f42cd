//! Regular expressions for start-up: a list of patterns answered on ASCII text by an ASCII
//! matcher, which compiles several times faster than the Unicode one (no Unicode classes,
//! case folding or literal prefilters to build), so a tiny input does not pay for compiling
//! every list it consults.
//!
//! On ASCII text the two answer alike: `\w`, `\s`, `\d` and `\b` agree on ASCII characters,
//! case-insensitive ASCII letters fold only to each other and to non-ASCII characters (`K`,
//! `ſ`), and what an ASCII-mode class or `.` adds beyond ASCII cannot occur in the text. The
//! caller keeps its Unicode regex for other text, and for patterns this mode refuses
//! (`\p{..}`): [`AsciiPatterns::is_match`] then says `None`.
//!
//! Patterns of embedded files also come with the literals they need ([`crate::required`],
//! computed when sage is built: [`Needs`]): while little text has been searched, a text is
//! first checked for them, and only the patterns it could match are compiled, each alone. A
//! tiny input then compiles few patterns or none.

use regex_automata::hybrid::dfa::{self, DFA};
use regex_automata::nfa::thompson::{self, pikevm, pikevm::PikeVM, WhichCaptures};
use regex_automata::util::syntax;
use regex_automata::{Input, MatchKind, PatternSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// The clauses a pattern needs ([`crate::required::required`]), as the build scripts write
/// them: one slice of literals per clause.
pub type Clauses = &'static [&'static [&'static str]];

/// When a pattern's clauses are sufficient too, so a text is answered by them alone
/// ([`crate::required::exact`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exact {
    /// The clauses are only necessary.
    No,
    /// Sufficient when the pattern is compiled case-insensitively.
    IfCaseInsensitive,
    /// Sufficient whatever the flags.
    Yes,
}

/// The clauses of an embedded file's patterns, computed at build time, sorted by pattern
/// text (keyed by the text itself, so a look-up is right for any pattern that has the text).
#[derive(Debug, Clone, Copy)]
pub struct Needs(pub &'static [(&'static str, Clauses, Exact)]);

impl Needs {
    /// The clauses of `pattern`, and whether they are sufficient, if it is in the table.
    pub fn of(&self, pattern: &str) -> Option<(Clauses, Exact)> {
        self.0
            .binary_search_by(|(p, _, _)| (*p).cmp(pattern))
            .ok()
            .map(|i| (self.0[i].1, self.0[i].2))
    }
}

/// Text (in bytes) checked for the patterns' literals before the whole set is compiled and
/// used for every later text: the check costs a pass per literal, the set one pass in all.
const PRECHECK_BYTES: usize = 32 * 1024;

/// Patterns answered on ASCII text, compiled on first use; clones share the compiled form.
#[derive(Debug, Clone)]
pub struct AsciiPatterns {
    patterns: Arc<[String]>,
    case_insensitive: bool,
    multi_line: bool,
    compiled: Arc<OnceLock<Option<Compiled>>>,
    /// Per pattern, the clauses a text must satisfy for it to match (empty: none known),
    /// and the pattern compiled alone; `None` when no pattern has clauses.
    needs: Option<Arc<Prechecked>>,
}

#[derive(Debug)]
struct Prechecked {
    clauses: Vec<Clauses>,
    /// Per pattern: a text matches it exactly when it satisfies its clauses.
    exact: Vec<bool>,
    singles: Vec<OnceLock<Option<Compiled>>>,
    /// Bytes of text checked so far.
    checked: AtomicUsize,
}

/// The patterns as one forward NFA, searched by a lazy DFA (the PikeVM when the DFA gives
/// up). A set asks only which patterns match and whether any does, never where, so none of
/// what a full regex also builds is needed: the reverse NFA (half the compile time), the
/// one-pass DFA and the literal prefilter.
#[derive(Debug)]
struct Compiled {
    dfa: DFA,
    pikevm: PikeVM,
    /// Search caches, taken by one search at a time and put back.
    caches: Mutex<Vec<(dfa::Cache, pikevm::Cache)>>,
}

impl Compiled {
    fn new(patterns: &[String], case_insensitive: bool, multi_line: bool) -> Option<Compiled> {
        let nfa = thompson::Compiler::new()
            .syntax(
                syntax::Config::new()
                    .case_insensitive(case_insensitive)
                    .multi_line(multi_line)
                    .unicode(false)
                    .utf8(false),
            )
            .configure(
                thompson::Config::new()
                    // (classes such as `\S` now hold bytes that are not UTF-8)
                    .utf8(false)
                    .which_captures(WhichCaptures::None),
            )
            .build_many(patterns)
            .ok()?;
        let dfa = DFA::builder()
            .configure(
                DFA::config()
                    // every pattern that matches, as a set reports them
                    .match_kind(MatchKind::All)
                    // give up (for the PikeVM) rather than thrash the cache, as a regex does
                    .minimum_cache_clear_count(Some(3))
                    .minimum_bytes_per_state(Some(10)),
            )
            .build_from_nfa(nfa.clone())
            .ok()?;
        let pikevm = PikeVM::builder()
            .configure(PikeVM::config().match_kind(MatchKind::All))
            .build_from_nfa(nfa)
            .ok()?;
        Some(Compiled {
            dfa,
            pikevm,
            caches: Mutex::new(Vec::new()),
        })
    }

    /// Run `search` with a cache of this set's own.
    fn with_caches<T>(&self, search: impl FnOnce(&mut (dfa::Cache, pikevm::Cache)) -> T) -> T {
        let taken = self.caches.lock().unwrap_or_else(|p| p.into_inner()).pop();
        let mut caches =
            taken.unwrap_or_else(|| (self.dfa.create_cache(), self.pikevm.create_cache()));
        let out = search(&mut caches);
        self.caches
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(caches);
        out
    }

    fn is_match(&self, text: &[u8]) -> bool {
        self.with_caches(|(d, p)| {
            let input = Input::new(text).earliest(true);
            match self.dfa.try_search_fwd(d, &input) {
                Ok(found) => found.is_some(),
                Err(_) => self.pikevm.is_match(p, input),
            }
        })
    }

    fn which(&self, text: &[u8]) -> Vec<usize> {
        let mut set = PatternSet::new(self.dfa.pattern_len());
        self.with_caches(|(d, p)| {
            let input = Input::new(text);
            if self
                .dfa
                .try_which_overlapping_matches(d, &input, &mut set)
                .is_err()
            {
                set.clear();
                self.pikevm.which_overlapping_matches(p, &input, &mut set);
            }
        });
        set.iter().map(|p| p.as_usize()).collect()
    }
}

impl AsciiPatterns {
    /// `patterns` with the flags the caller's Unicode regex is built with.
    pub fn new(patterns: &[impl AsRef<str>], case_insensitive: bool, multi_line: bool) -> Self {
        AsciiPatterns {
            patterns: patterns.iter().map(|p| p.as_ref().to_string()).collect(),
            case_insensitive,
            multi_line,
            compiled: Default::default(),
            needs: None,
        }
    }

    /// [`AsciiPatterns::new`], with the clauses `table` holds for the patterns.
    pub fn with_needs(
        patterns: &[impl AsRef<str>],
        case_insensitive: bool,
        multi_line: bool,
        table: Needs,
    ) -> Self {
        let (clauses, exact): (Vec<Clauses>, Vec<bool>) = patterns
            .iter()
            .map(|p| match table.of(p.as_ref()) {
                Some((c, e)) => {
                    let exact = match e {
                        Exact::Yes => true,
                        Exact::IfCaseInsensitive => case_insensitive,
                        Exact::No => false,
                    };
                    (c, exact && !c.is_empty())
                }
                None => (&[][..], false),
            })
            .unzip();
        let mut a = AsciiPatterns::new(patterns, case_insensitive, multi_line);
        if clauses.iter().any(|c| !c.is_empty()) {
            a.needs = Some(Arc::new(Prechecked {
                singles: clauses.iter().map(|_| OnceLock::new()).collect(),
                clauses,
                exact,
                checked: AtomicUsize::new(0),
            }));
        }
        a
    }

    fn get(&self) -> Option<&Compiled> {
        self.compiled
            .get_or_init(|| Compiled::new(&self.patterns, self.case_insensitive, self.multi_line))
            .as_ref()
    }

    /// Pattern `k` compiled alone.
    fn single<'a>(&self, pre: &'a Prechecked, k: usize) -> Option<&'a Compiled> {
        pre.singles[k]
            .get_or_init(|| {
                Compiled::new(
                    std::slice::from_ref(&self.patterns[k]),
                    self.case_insensitive,
                    self.multi_line,
                )
            })
            .as_ref()
    }

    /// The patterns `text`'s literals answer (`Ok(k)`: pattern `k` matches, being exact) or
    /// leave to a search (`Err(k)`), ascending, when the check rules some out or answers some
    /// and is still worth making (the set is not compiled yet, little text has been checked);
    /// `None`: search with the whole set.
    fn candidates(&self, text: &str) -> Option<(&Prechecked, Vec<Result<usize, usize>>)> {
        let pre = self.needs.as_deref()?;
        if self.compiled.get().is_some()
            || pre.checked.fetch_add(text.len(), Ordering::Relaxed) + text.len() > PRECHECK_BYTES
        {
            return None;
        }
        let lowered = text.to_ascii_lowercase();
        let c: Vec<Result<usize, usize>> = (0..self.patterns.len())
            .filter(|&k| crate::required::satisfies(pre.clauses[k], &lowered))
            .map(|k| if pre.exact[k] { Ok(k) } else { Err(k) })
            .collect();
        let all_searched = c.len() == self.patterns.len() && c.iter().all(Result::is_err);
        (!all_searched).then_some((pre, c))
    }

    /// Whether any pattern matches `text`; `None` when `text` is not all ASCII or a pattern
    /// has no ASCII form (ask the Unicode regex).
    pub fn is_match(&self, text: &str) -> Option<bool> {
        if !text.is_ascii() {
            return None;
        }
        if let Some((pre, candidates)) = self.candidates(text) {
            if candidates.iter().any(Result::is_ok) {
                return Some(true);
            }
            for k in candidates.into_iter().filter_map(Result::err) {
                if self.single(pre, k)?.is_match(text.as_bytes()) {
                    return Some(true);
                }
            }
            return Some(false);
        }
        Some(self.get()?.is_match(text.as_bytes()))
    }

    /// The patterns that match somewhere in `text`, ascending; `None` as for
    /// [`AsciiPatterns::is_match`].
    pub fn which(&self, text: &str) -> Option<Vec<usize>> {
        if !text.is_ascii() {
            return None;
        }
        if let Some((pre, candidates)) = self.candidates(text) {
            let mut out = Vec::new();
            for c in candidates {
                match c {
                    Ok(k) => out.push(k),
                    Err(k) => {
                        if self.single(pre, k)?.is_match(text.as_bytes()) {
                            out.push(k);
                        }
                    }
                }
            }
            return Some(out);
        }
        Some(self.get()?.which(text.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATTERNS: &[&str] = &[
        r"\bpytest\b",
        r"\bpython[0-9.]*\s+(-u\s+)?[\w./-]+\.py\b",
        r"\bcat\s",
        r"^\s*open\s",
        r#"\bopen\([^)]*[\x27"][wa]b?\+?[\x27"]"#,
        r"\bmv\s+\S+\s+\S",
        r"\bedit\s+\d+:\d+",
        r"(?i)ignore (all )?previous instructions",
        r"score\s*[:=]\s*3\b",
        r"\bk\b",
        r".x.",
        r"\W\D",
    ];

    fn unicode(text: &str) -> Vec<usize> {
        let set = regex::RegexSetBuilder::new(PATTERNS)
            .case_insensitive(true)
            .multi_line(true)
            .build()
            .unwrap();
        set.matches(text).into_iter().collect()
    }

    proptest::proptest! {
        /// On ASCII text, the ASCII patterns find what the Unicode set finds.
        #[test]
        fn ascii_text_matches_as_with_unicode(
            parts in proptest::collection::vec(
                "(pytest|PyTest|python3 -u a/b\\.py|cat |\n  open |open\\('f', 'wb'\\)|mv a b|edit 1:2|Ignore previous instructions|score = 3|K|\\.x\\.|[ -~\t\n]{0,3})",
                0..6,
            )
        ) {
            let text: String = parts.concat();
            let a = AsciiPatterns::new(PATTERNS, true, true);
            let u = unicode(&text);
            proptest::prop_assert_eq!(a.which(&text), Some(u.clone()));
            proptest::prop_assert_eq!(a.is_match(&text), Some(!u.is_empty()));
            // the PikeVM, which answers when the lazy DFA gives up, answers alike
            let c = a.get().unwrap();
            let mut set = PatternSet::new(c.pikevm.get_nfa().pattern_len());
            let mut cache = c.pikevm.create_cache();
            c.pikevm
                .which_overlapping_matches(&mut cache, &Input::new(&text), &mut set);
            let by_pikevm: Vec<usize> = set.iter().map(|p| p.as_usize()).collect();
            proptest::prop_assert_eq!(by_pikevm, u);
        }
    }

    /// A table of `patterns`' clauses computed now, as `build.rs` writes one.
    pub(crate) fn table(patterns: &[&str]) -> Needs {
        let leak = |s: &str| -> &'static str { Box::leak(s.to_string().into_boxed_str()) };
        let mut rows: Vec<(&'static str, Clauses, Exact)> = patterns
            .iter()
            .map(|p| {
                let clauses: Vec<&'static [&'static str]> = crate::required::required(p)
                    .iter()
                    .map(|c| -> &'static [&'static str] {
                        Box::leak(
                            c.iter()
                                .map(|l| leak(l))
                                .collect::<Vec<_>>()
                                .into_boxed_slice(),
                        )
                    })
                    .collect();
                let exact = match crate::required::exact(p) {
                    (_, true) => Exact::Yes,
                    (true, false) => Exact::IfCaseInsensitive,
                    _ => Exact::No,
                };
                (leak(p), &*Box::leak(clauses.into_boxed_slice()), exact)
            })
            .collect();
        rows.sort_by_key(|r| r.0);
        rows.dedup_by_key(|r| r.0);
        Needs(Box::leak(rows.into_boxed_slice()))
    }

    proptest::proptest! {
        /// Checking texts for the patterns' literals first (and compiling only the patterns
        /// a text could match, until the set is worth compiling) answers as the set does,
        /// text after text.
        #[test]
        fn prechecked_patterns_answer_as_the_set(
            texts in proptest::collection::vec(
                proptest::collection::vec(
                    "(pytest|PyTest|python3 -u a/b\\.py|cat |\n  open |open\\('f', 'wb'\\)|mv a b|edit 1:2|Ignore previous instructions|score = 3|K|\\.x\\.|[ -~\t\n]{0,3}|[a-z ]{0,2000})",
                    0..6,
                ),
                1..40,
            )
        ) {
            let plain = AsciiPatterns::new(PATTERNS, true, true);
            let pre = AsciiPatterns::with_needs(PATTERNS, true, true, table(PATTERNS));
            for parts in texts {
                let text: String = parts.concat();
                proptest::prop_assert_eq!(pre.which(&text), plain.which(&text));
                proptest::prop_assert_eq!(pre.is_match(&text), plain.is_match(&text));
            }
        }
    }

    #[test]
    fn a_text_without_the_literals_compiles_nothing() {
        let list = [
            r"\bpytest\b",
            r"\bcat\s",
            r"(?i)ignore (all )?previous instructions",
        ];
        let a = AsciiPatterns::with_needs(&list, true, true, table(&list));
        assert_eq!(a.which("nothing to see"), Some(vec![]));
        assert_eq!(a.is_match("nothing to see"), Some(false));
        let pre = a.needs.as_deref().unwrap();
        assert!(a.compiled.get().is_none());
        assert!(pre.singles.iter().all(|s| s.get().is_none()));
        // a text with one pattern's literals compiles that pattern alone
        assert_eq!(a.which("run PYTEST now"), Some(vec![0]));
        assert!(a.compiled.get().is_none());
        assert!(pre.singles[0].get().is_some());
        assert_eq!(pre.singles.iter().filter(|s| s.get().is_some()).count(), 1);
        // a pattern that is a set of literals is answered by them
        assert_eq!(a.which("IGNORE previous instructions"), Some(vec![2]));
        assert!(pre.singles[2].get().is_none());
        // past the budget, the set answers
        let long = "z".repeat(PRECHECK_BYTES);
        assert_eq!(a.which(&long), Some(vec![]));
        assert!(a.compiled.get().is_some());
        assert_eq!(a.which("cat x; pytest"), Some(vec![0, 1]));
    }

    #[test]
    fn other_text_and_unicode_only_patterns_are_left_to_the_caller() {
        let a = AsciiPatterns::new(PATTERNS, true, true);
        assert_eq!(a.is_match("pytest \u{212a}"), None);
        let p = AsciiPatterns::new(&[r"\p{Greek}"], true, true);
        assert_eq!(p.is_match("alpha"), None);
        // so with the literal check: a pattern with no ASCII form needs nothing, so it is
        // always searched (and answered by the caller)
        let p = AsciiPatterns::with_needs(
            &[r"\p{Greek}", "pytest"],
            true,
            true,
            table(&[r"\p{Greek}", "pytest"]),
        );
        assert_eq!(p.is_match("alpha"), None);
        assert_eq!(p.which("alpha"), None);
    }
}
