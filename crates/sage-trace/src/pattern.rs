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

use regex_automata::nfa::thompson::WhichCaptures;
use regex_automata::util::syntax;
use regex_automata::{meta, Input, MatchKind, PatternSet};
use std::sync::{Arc, OnceLock};

/// Patterns answered on ASCII text, compiled on first use; clones share the compiled form.
#[derive(Debug, Clone)]
pub struct AsciiPatterns {
    patterns: Arc<[String]>,
    case_insensitive: bool,
    multi_line: bool,
    compiled: Arc<OnceLock<Option<meta::Regex>>>,
}

impl AsciiPatterns {
    /// `patterns` with the flags the caller's Unicode regex is built with.
    pub fn new(patterns: &[impl AsRef<str>], case_insensitive: bool, multi_line: bool) -> Self {
        AsciiPatterns {
            patterns: patterns.iter().map(|p| p.as_ref().to_string()).collect(),
            case_insensitive,
            multi_line,
            compiled: Default::default(),
        }
    }

    fn get(&self) -> Option<&meta::Regex> {
        self.compiled
            .get_or_init(|| {
                meta::Builder::new()
                    .syntax(
                        syntax::Config::new()
                            .case_insensitive(self.case_insensitive)
                            .multi_line(self.multi_line)
                            .unicode(false)
                            .utf8(false),
                    )
                    .configure(
                        meta::Config::new()
                            // every pattern that matches, as a set reports them
                            .match_kind(MatchKind::All)
                            // (classes such as `\S` now hold bytes that are not UTF-8)
                            .utf8_empty(false)
                            .which_captures(WhichCaptures::None)
                            // building the prefilter was most of the compile time
                            .auto_prefilter(false),
                    )
                    .build_many(&self.patterns)
                    .ok()
            })
            .as_ref()
    }

    /// Whether any pattern matches `text`; `None` when `text` is not all ASCII or a pattern
    /// has no ASCII form (ask the Unicode regex).
    pub fn is_match(&self, text: &str) -> Option<bool> {
        if !text.is_ascii() {
            return None;
        }
        Some(self.get()?.is_match(text.as_bytes()))
    }

    /// The patterns that match somewhere in `text`, ascending; `None` as for
    /// [`AsciiPatterns::is_match`].
    pub fn which(&self, text: &str) -> Option<Vec<usize>> {
        if !text.is_ascii() {
            return None;
        }
        let re = self.get()?;
        let mut set = PatternSet::new(re.pattern_len());
        re.which_overlapping_matches(&Input::new(text.as_bytes()), &mut set);
        Some(set.iter().map(|p| p.as_usize()).collect())
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
        }
    }

    #[test]
    fn other_text_and_unicode_only_patterns_are_left_to_the_caller() {
        let a = AsciiPatterns::new(PATTERNS, true, true);
        assert_eq!(a.is_match("pytest \u{212a}"), None);
        let p = AsciiPatterns::new(&[r"\p{Greek}"], true, true);
        assert_eq!(p.is_match("alpha"), None);
    }
}
