//! Text matching shared by the judges and the linking step of the origin rule: word-boundary
//! term matching and CWE identifiers.

/// The last path component (`/` or `\` separated).
pub fn basename(path: &str) -> &str {
    path.rsplit(['/', '\\']).next().unwrap_or(path)
}

/// True when `text` names the file `base` (`app.py`) as a whole path component: not inside
/// a longer name (`myapp.py`, `app.py.bak`); a sentence's final `.` is not part of the name.
pub fn names_file(text: &str, base: &str) -> bool {
    if base.is_empty() {
        return false;
    }
    let is_name = |c: char| c.is_alphanumeric() || matches!(c, '_' | '-' | '.');
    let mut from = 0;
    while let Some(pos) = text[from..].find(base) {
        let start = from + pos;
        let end = start + base.len();
        let ok_before = text[..start].chars().last().is_none_or(|c| !is_name(c));
        let ok_after = match text[end..].chars().next() {
            None => true,
            Some('.') => text[end + 1..].chars().next().is_none_or(|c| !is_name(c)),
            Some(c) => !is_name(c),
        };
        if ok_before && ok_after {
            return true;
        }
        from = start + text[start..].chars().next().map_or(1, char::len_utf8);
    }
    false
}

/// The CWE ids a text names (`CWE-22`, `cwe 22`, `cwe22`), normalized.
pub fn cwe_ids(text: &str) -> Vec<String> {
    let lc = text.to_lowercase();
    let b = lc.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(p) = lc[i..].find("cwe") {
        let at = i + p;
        let word_start = at == 0 || !(b[at - 1] as char).is_alphanumeric();
        let mut j = at + 3;
        if j < b.len() && (b[j] == b'-' || b[j] == b' ') {
            j += 1;
        }
        let digits = b[j..].iter().take_while(|c| c.is_ascii_digit()).count();
        let word_end = b
            .get(j + digits)
            .is_none_or(|c| !(*c as char).is_alphanumeric());
        if word_start && digits > 0 && word_end {
            if let Some(id) = normalize_cwe(&lc[j..j + digits]) {
                if !out.contains(&id) {
                    out.push(id);
                }
            }
        }
        i = at + 3;
    }
    out
}

/// `cwe-022`, `CWE 22`, `22` → `CWE-22`.
pub fn normalize_cwe(s: &str) -> Option<String> {
    let digits: String = s.chars().filter(|c| c.is_ascii_digit()).collect();
    let n: u32 = digits.parse().ok()?;
    Some(format!("CWE-{n}"))
}

/// True when `term` occurs in `text` at word boundaries, case-insensitively. A trailing `*`
/// makes the term a prefix. Both sides must already be lowercased and whitespace-normalized.
pub fn term_matches(text_lc: &str, term: &str) -> bool {
    let (term, prefix) = match term.strip_suffix('*') {
        Some(t) => (t, true),
        None => (term, false),
    };
    let term = crate::normalize_ws(&term.to_lowercase());
    if term.is_empty() {
        return false;
    }
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let starts_word = term.chars().next().is_some_and(is_word);
    let ends_word = term.chars().last().is_some_and(is_word);
    let mut from = 0;
    while let Some(pos) = text_lc[from..].find(&term) {
        let start = from + pos;
        let end = start + term.len();
        let before_ok = !starts_word || text_lc[..start].chars().last().is_none_or(|c| !is_word(c));
        let after_ok =
            prefix || !ends_word || text_lc[end..].chars().next().is_none_or(|c| !is_word(c));
        if before_ok && after_ok {
            return true;
        }
        from = start + text_lc[start..].chars().next().map_or(1, char::len_utf8);
    }
    false
}

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// One compiled term of a [`TermSet`].
#[derive(Debug, Clone)]
struct Term {
    /// Its position in the slice the set was built from.
    index: usize,
    prefix: bool,
    starts_word: bool,
    ends_word: bool,
}

/// A vocabulary compiled once: [`TermSet::matches`] is [`term_matches`] for every term at
/// once, in one pass over the text (an Aho-Corasick automaton over the lower-cased,
/// whitespace-normalized terms, with the same word-boundary checks).
#[derive(Debug, Clone)]
pub struct TermSet {
    searcher: Option<std::sync::Arc<Searcher>>,
    terms: Vec<Term>,
}

impl TermSet {
    /// Compile `terms` (a trailing `*` makes a term a prefix; empty terms never match).
    pub fn new<S: AsRef<str>>(terms: &[S]) -> TermSet {
        let mut patterns = Vec::new();
        let mut compiled = Vec::new();
        for (index, t) in terms.iter().enumerate() {
            if let Some((pattern, term)) = Term::compile(index, t.as_ref()) {
                compiled.push(term);
                patterns.push(pattern);
            }
        }
        TermSet {
            searcher: Searcher::new(patterns),
            terms: compiled,
        }
    }

    /// True when any term occurs in `text_lc` at word boundaries. `text_lc` must already be
    /// lower-cased and whitespace-normalized.
    pub fn matches(&self, text_lc: &str) -> bool {
        let Some(searcher) = &self.searcher else {
            return false;
        };
        let mut found = false;
        searcher.each(text_lc, |m| {
            found = self.terms[m.pattern].at_boundaries(text_lc, &m);
            found
        });
        found
    }

    /// The positions (in the slice the set was built from, ascending, once each) of the
    /// terms that occur in `text_lc` at word boundaries: `terms[i]` is listed exactly when
    /// `term_matches(text_lc, terms[i])`. `text_lc` as for [`TermSet::matches`].
    pub fn matching(&self, text_lc: &str) -> Vec<usize> {
        let Some(searcher) = &self.searcher else {
            return Vec::new();
        };
        let mut out: Vec<usize> = Vec::new();
        searcher.each(text_lc, |m| {
            let t = &self.terms[m.pattern];
            if t.at_boundaries(text_lc, &m) {
                out.push(t.index);
            }
            false
        });
        out.sort_unstable();
        out.dedup();
        out
    }

    /// True for a set with no (non-empty) term: it matches nothing.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }
}

/// One occurrence of a pattern of a [`Searcher`]: `text[start..end]` is pattern `pattern`.
#[derive(Debug, Clone, Copy)]
struct Found {
    pattern: usize,
    start: usize,
    end: usize,
}

/// How much text a [`Searcher`] scans directly before it builds its automaton: building one
/// for the lexicon (~650 terms) costs about as much as scanning this much text directly, so
/// a tiny input never pays for it and a large one pays it at most twice.
const DIRECT_SCAN_BYTES: usize = 32 * 1024;

/// Every occurrence of a list of patterns in a text (overlapping ones included). The first
/// [`DIRECT_SCAN_BYTES`] searched are scanned directly, each position against the patterns
/// with its first two bytes (found by binary search in the sorted patterns), which costs
/// nothing to build; after that an Aho-Corasick automaton, built once, answers in one pass.
/// Both report the same occurrences (a property test compares them).
#[derive(Debug)]
struct Searcher {
    patterns: Vec<String>,
    /// Pattern positions, ordered by the patterns' bytes.
    sorted: Vec<u32>,
    /// `sorted[first[b]..first[b + 1]]` are the patterns whose first byte is `b`.
    first: Vec<u32>,
    /// Bytes scanned directly so far (by every clone and thread).
    scanned: std::sync::atomic::AtomicUsize,
    automaton: std::sync::OnceLock<Option<aho_corasick::AhoCorasick>>,
}

impl Searcher {
    /// `None` when there is no pattern (nothing can match). Patterns must not be empty.
    fn new(patterns: Vec<String>) -> Option<std::sync::Arc<Searcher>> {
        if patterns.is_empty() {
            return None;
        }
        // Sorted by the patterns' first eight bytes as a number, then (rarely) by all their
        // bytes: the same order as by bytes alone (a shorter prefix pads with zeros, which
        // sort first), at a fraction of the comparisons' cost (a lexicon has ~650 terms).
        let key = |p: &str| {
            let mut k = [0u8; 8];
            let n = p.len().min(8);
            k[..n].copy_from_slice(&p.as_bytes()[..n]);
            u64::from_be_bytes(k)
        };
        let mut keyed: Vec<(u64, u32)> = (0..patterns.len() as u32)
            .map(|i| (key(&patterns[i as usize]), i))
            .collect();
        keyed.sort_unstable_by(|a, b| {
            a.0.cmp(&b.0).then_with(|| {
                patterns[a.1 as usize]
                    .as_bytes()
                    .cmp(patterns[b.1 as usize].as_bytes())
            })
        });
        let sorted: Vec<u32> = keyed.into_iter().map(|(_, i)| i).collect();
        let mut first = vec![0u32; 257];
        for &i in &sorted {
            first[patterns[i as usize].as_bytes()[0] as usize + 1] += 1;
        }
        for b in 0..256 {
            first[b + 1] += first[b];
        }
        Some(std::sync::Arc::new(Searcher {
            patterns,
            sorted,
            first,
            scanned: Default::default(),
            automaton: Default::default(),
        }))
    }

    /// Call `f` on every occurrence in `text` until it returns true. The order of the calls
    /// is unspecified.
    fn each(&self, text: &str, f: impl FnMut(Found) -> bool) {
        use std::sync::atomic::Ordering::Relaxed;
        let ac = match self.automaton.get() {
            Some(ac) => ac.as_ref(),
            None if self.scanned.fetch_add(text.len(), Relaxed) + text.len()
                <= DIRECT_SCAN_BYTES =>
            {
                return self.scan(text, f);
            }
            None => self.automaton.get_or_init(|| self.build()).as_ref(),
        };
        match ac {
            Some(ac) => Self::run(ac, text, f),
            // (an automaton past its size limits; unreachable for a vocabulary)
            None => self.scan(text, f),
        }
    }

    fn run(ac: &aho_corasick::AhoCorasick, text: &str, mut f: impl FnMut(Found) -> bool) {
        for m in ac.find_overlapping_iter(text) {
            let found = Found {
                pattern: m.pattern().as_usize(),
                start: m.start(),
                end: m.end(),
            };
            if f(found) {
                return;
            }
        }
    }

    fn build(&self) -> Option<aho_corasick::AhoCorasick> {
        aho_corasick::AhoCorasick::new(&self.patterns).ok()
    }

    /// The direct scan: at each position, the patterns sharing its first two bytes.
    fn scan(&self, text: &str, mut f: impl FnMut(Found) -> bool) {
        let bytes = text.as_bytes();
        for (start, &b) in bytes.iter().enumerate() {
            let (lo, hi) = (self.first[b as usize], self.first[b as usize + 1]);
            if lo == hi {
                continue;
            }
            let bucket = &self.sorted[lo as usize..hi as usize];
            let second = |i: &u32| self.patterns[*i as usize].as_bytes().get(1).copied();
            // Sorted, the one-byte pattern comes first, then the rest by their second byte.
            let singles = bucket.partition_point(|i| second(i).is_none());
            let (from, to) = match bytes.get(start + 1) {
                Some(&next) => (
                    bucket.partition_point(|i| second(i).is_none_or(|s| s < next)),
                    bucket.partition_point(|i| second(i).is_none_or(|s| s <= next)),
                ),
                None => (singles, singles),
            };
            for &i in bucket[..singles].iter().chain(&bucket[from..to]) {
                let p = self.patterns[i as usize].as_bytes();
                if bytes[start..].starts_with(p) {
                    let found = Found {
                        pattern: i as usize,
                        start,
                        end: start + p.len(),
                    };
                    if f(found) {
                        return;
                    }
                }
            }
        }
    }
}

impl Term {
    /// The pattern to search for `t` (lower-cased, whitespace-normalized, without a
    /// trailing `*`) and its boundary rules; `None` for an empty term, which never matches.
    fn compile(index: usize, t: &str) -> Option<(String, Term)> {
        let (t, prefix) = match t.strip_suffix('*') {
            Some(t) => (t, true),
            None => (t, false),
        };
        let t = lower_normalized(t);
        if t.is_empty() {
            return None;
        }
        let term = Term {
            index,
            prefix,
            starts_word: t.chars().next().is_some_and(is_word),
            ends_word: t.chars().last().is_some_and(is_word),
        };
        Some((t, term))
    }

    fn at_boundaries(&self, text_lc: &str, m: &Found) -> bool {
        let t = self;
        let before_ok = !t.starts_word
            || text_lc[..m.start]
                .chars()
                .next_back()
                .is_none_or(|c| !is_word(c));
        let after_ok =
            t.prefix || !t.ends_word || text_lc[m.end..].chars().next().is_none_or(|c| !is_word(c));
        before_ok && after_ok
    }
}

/// `normalize_ws(&t.to_lowercase())`, copied as it is when it is already so (a lexicon's
/// terms mostly are: ~650 of them are compiled at start-up).
fn lower_normalized(t: &str) -> String {
    let b = t.as_bytes();
    let plain = b
        .iter()
        .all(|&c| c.is_ascii() && !c.is_ascii_uppercase() && !matches!(c, b'\t'..=b'\r'))
        && b.first() != Some(&b' ')
        && b.last() != Some(&b' ')
        && !t.contains("  ");
    if plain {
        t.to_string()
    } else {
        crate::normalize_ws(&t.to_lowercase())
    }
}

/// Several vocabularies compiled into one automaton: [`TermSets::which`] tells, in one pass
/// over a text, which of them match it ([`TermSet::matches`] of each, without a pass per
/// vocabulary).
#[derive(Debug, Clone)]
pub struct TermSets {
    searcher: Option<std::sync::Arc<Searcher>>,
    /// Per pattern: its term; `Term::index` is the position of its vocabulary.
    terms: Vec<Term>,
    sets: usize,
}

impl TermSets {
    /// Compile `sets` (terms as for [`TermSet::new`]).
    pub fn new<S: AsRef<str>>(sets: &[&[S]]) -> TermSets {
        let mut patterns = Vec::new();
        let mut compiled = Vec::new();
        for (set, terms) in sets.iter().enumerate() {
            for t in terms.iter() {
                if let Some((pattern, term)) = Term::compile(set, t.as_ref()) {
                    compiled.push(term);
                    patterns.push(pattern);
                }
            }
        }
        TermSets {
            searcher: Searcher::new(patterns),
            terms: compiled,
            sets: sets.len(),
        }
    }

    /// Per vocabulary (in the order given to [`TermSets::new`]): whether any of its terms
    /// occurs in `text_lc` at word boundaries. `text_lc` as for [`TermSet::matches`].
    pub fn which(&self, text_lc: &str) -> Vec<bool> {
        let mut out = vec![false; self.sets];
        let Some(searcher) = &self.searcher else {
            return out;
        };
        let mut left = self.sets;
        searcher.each(text_lc, |m| {
            let t = &self.terms[m.pattern];
            if !out[t.index] && t.at_boundaries(text_lc, &m) {
                out[t.index] = true;
                left -= 1;
            }
            left == 0
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_and_cwe_ids() {
        assert!(names_file("cat /workspace/app.py", "app.py"));
        assert!(names_file("see app.py.", "app.py"));
        assert!(names_file(r#"{"path":"app.py"}"#, "app.py"));
        assert!(!names_file("cat myapp.py", "app.py"));
        assert!(!names_file("cat app.py.bak", "app.py"));
        assert!(!names_file("anything", ""));
        assert_eq!(basename("a/b\\c.py"), "c.py");
        assert_eq!(
            cwe_ids("fixes CWE-22 and cwe 79; not acwe1 or cwe-x"),
            ["CWE-22", "CWE-79"]
        );
    }

    proptest::proptest! {
        /// The copy of an already lower-cased, normalized term is what lower-casing and
        /// normalizing it gives.
        #[test]
        fn a_searchers_patterns_are_sorted_by_their_bytes(
            patterns in proptest::collection::vec("[a\\x00\\x01b\\xff]{1,10}", 1..40)
        ) {
            let s = Searcher::new(patterns).unwrap();
            let order: Vec<&[u8]> = s.sorted.iter().map(|&i| s.patterns[i as usize].as_bytes()).collect();
            proptest::prop_assert!(order.windows(2).all(|w| w[0] <= w[1]), "{:?}", order);
        }

        #[test]
        fn lower_normalized_is_normalize_ws_of_to_lowercase(t in "[ a-zA-Z\t\n\r\u{b}\u{c}\u{1c}\u{85}\u{a0}É*_.-]{0,12}") {
            proptest::prop_assert_eq!(lower_normalized(&t), crate::normalize_ws(&t.to_lowercase()));
        }
    }

    #[test]
    fn a_term_set_matches_like_each_term_alone() {
        let terms = ["sql injection", "escape*", "os.path", "id", "c++", ""];
        let set = TermSet::new(&terms);
        // Directly scanned, then again once a long text has made the set build its automaton.
        for long in ["", &"x ".repeat(DIRECT_SCAN_BYTES)] {
            assert!(!set.matches(long));
            for text in [
                "use a parameterized query against sql injection",
                "we escaped the input",
                "call os.path.realpath",
                "the identifier is fine",
                "ids and id",
                "written in c++ today",
                "nothing here",
                "",
            ] {
                let one_by_one = terms.iter().any(|t| term_matches(text, t));
                assert_eq!(set.matches(text), one_by_one, "{text:?}");
                let each: Vec<usize> = (0..terms.len())
                    .filter(|&i| term_matches(text, terms[i]))
                    .collect();
                assert_eq!(set.matching(text), each, "{text:?}");
            }
        }
        let searcher = set.searcher.as_ref().unwrap();
        assert!(searcher.automaton.get().is_some_and(Option::is_some));
        // The same term twice, once as a prefix: each position answers for itself.
        let dup = TermSet::new(&["escape", "escape*", "escape"]);
        assert_eq!(dup.matching("we escaped it"), [1]);
        assert_eq!(dup.matching("escape it"), [0, 1, 2]);
        assert!(!TermSet::new::<&str>(&[]).matches("anything"));
    }

    proptest::proptest! {
        #[test]
        fn term_sets_equal_each_term_set(
            sets in proptest::collection::vec(
                proptest::collection::vec("[ab_ .]{0,4}\\*?", 0..4),
                0..5,
            ),
            text in "[ab_ .é]{0,24}",
        ) {
            let text = crate::normalize_ws(&text);
            let refs: Vec<&[String]> = sets.iter().map(Vec::as_slice).collect();
            let each: Vec<bool> = sets.iter().map(|s| TermSet::new(s).matches(&text)).collect();
            proptest::prop_assert_eq!(TermSets::new(&refs).which(&text), each);
        }

        /// The direct scan and the automaton report the same occurrences.
        #[test]
        fn the_direct_scan_finds_what_the_automaton_finds(
            patterns in proptest::collection::vec("[ab_ .é]{1,4}", 1..8),
            text in "[ab_ .é]{0,24}",
        ) {
            let s = Searcher::new(patterns).unwrap();
            let all = |direct: bool| {
                let mut out = Vec::new();
                let f = |m: Found| {
                    out.push((m.start, m.end, m.pattern));
                    false
                };
                if direct {
                    s.scan(&text, f);
                } else {
                    Searcher::run(s.build().as_ref().unwrap(), &text, f);
                }
                out.sort_unstable();
                out
            };
            proptest::prop_assert_eq!(all(true), all(false));
        }

        #[test]
        fn term_set_equals_term_matches(
            terms in proptest::collection::vec("[ab_ .]{0,4}\\*?", 0..6),
            text in "[ab_ .é]{0,24}",
        ) {
            let text = crate::normalize_ws(&text);
            let set = TermSet::new(&terms);
            let one_by_one = terms.iter().any(|t| term_matches(&text, t));
            proptest::prop_assert_eq!(set.matches(&text), one_by_one);
            let each: Vec<usize> = (0..terms.len())
                .filter(|&i| term_matches(&text, &terms[i]))
                .collect();
            proptest::prop_assert_eq!(set.matching(&text), each);
        }
    }
}
