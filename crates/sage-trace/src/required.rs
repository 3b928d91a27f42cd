//! The literals a regular expression needs in a text before it can match there: a list of
//! clauses, each a set of lower-case strings one of which must occur in the text once its
//! ASCII letters are lower-cased. A text that misses a clause cannot match, so a pattern list
//! can be answered for most texts without compiling the patterns at all
//! ([`crate::pattern::AsciiPatterns`]).
//!
//! The clauses are a necessary condition only (never sufficient), computed on the pattern's
//! syntax tree: a literal needs itself, a concatenation needs each part (adjacent parts with
//! few possible texts are joined into longer literals), an alternation needs one of its
//! branches' needs, a repetition of at least one its body's. Letters are folded to lower case
//! on both sides, so the same clauses hold whatever the pattern's case flags. A pattern that
//! does not parse (in ASCII mode) needs nothing.
//!
//! This file depends on `regex-syntax` and `std` only: the build scripts of the crates that
//! embed pattern files include it (`#[path]`) to compute their patterns' clauses at build
//! time, since parsing a pattern costs about as much as the search it would save.

use regex_syntax::hir::{Class, Hir, HirKind};
use std::collections::BTreeSet;

/// A set of possible texts, or of literals one of which must occur, at most this large.
const MAX_SET: usize = 32;
/// A class of at most this many characters (after folding) is a set of one-character texts.
const MAX_CLASS: usize = 10;
/// An alternation's needs are distributed over its branches up to this many clauses.
const MAX_CLAUSES: usize = 16;

type Set = BTreeSet<String>;

/// What a piece of a pattern can match: `exact`, every text it can match (lower-cased), when
/// there are few; `needs`, clauses every match satisfies.
struct Info {
    exact: Option<Set>,
    needs: Vec<Set>,
}

impl Info {
    fn nothing() -> Info {
        Info {
            exact: None,
            needs: Vec::new(),
        }
    }

    fn exactly(set: Set) -> Info {
        Info {
            exact: Some(set),
            needs: Vec::new(),
        }
    }
}

/// The clauses `pattern` needs; empty when it needs nothing (or does not parse). Each clause
/// is sorted and holds no literal that contains another of the same clause.
pub fn required(pattern: &str) -> Vec<Vec<String>> {
    let hir = regex_syntax::ParserBuilder::new()
        .unicode(false)
        .utf8(false)
        .case_insensitive(true)
        .build()
        .parse(pattern);
    let Ok(hir) = hir else {
        return Vec::new();
    };
    let info = finish(info(&hir));
    let mut out: Vec<Vec<String>> = info
        .needs
        .into_iter()
        .map(|c| c.into_iter().collect())
        .collect();
    // the most selective clause first (longest shortest literal), so a text is rejected early
    out.sort_by_key(|c: &Vec<String>| {
        let shortest = c.iter().map(String::len).min().unwrap_or(0);
        (std::cmp::Reverse(shortest), c.len())
    });
    out.dedup();
    out
}

/// When the clauses of `pattern` are also sufficient: a text matches exactly when it
/// satisfies them. That holds for a pattern that is a small set of literal texts (no
/// anchor, no open repetition) whose letters match either case; `(case_insensitive,
/// always)`: the first when the pattern is compiled case-insensitively, the second whatever
/// the flag (its own `(?i)` covers every letter).
pub fn exact(pattern: &str) -> (bool, bool) {
    let parse = |ci: bool| {
        regex_syntax::ParserBuilder::new()
            .unicode(false)
            .utf8(false)
            .case_insensitive(ci)
            .build()
            .parse(pattern)
            .ok()
    };
    let Some(folded) = parse(true) else {
        return (false, false);
    };
    let finite = !has_look(&folded)
        && finish(info(&folded))
            .exact
            .is_some_and(|e| !e.is_empty() && !e.contains(""));
    if !finite {
        return (false, false);
    }
    let closed = |ci: bool| parse(ci).is_some_and(|h| case_closed(&h));
    (closed(true), closed(false))
}

/// Whether `h` holds an assertion (`^`, `$`, `\b`): a literal set then says less than the
/// pattern.
fn has_look(h: &Hir) -> bool {
    match h.kind() {
        HirKind::Look(_) => true,
        HirKind::Empty | HirKind::Literal(_) | HirKind::Class(_) => false,
        HirKind::Capture(c) => has_look(&c.sub),
        HirKind::Repetition(r) => has_look(&r.sub),
        HirKind::Concat(v) | HirKind::Alternation(v) => v.iter().any(has_look),
    }
}

/// Whether every ASCII letter `h` matches, it matches in either case.
fn case_closed(h: &Hir) -> bool {
    let pair = |b: u8| !b.is_ascii_alphabetic();
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) => true,
        HirKind::Literal(lit) => lit.0.iter().all(|&b| pair(b)),
        HirKind::Class(Class::Bytes(c)) => {
            let has = |b: u8| c.ranges().iter().any(|r| r.start() <= b && b <= r.end());
            (b'a'..=b'z').all(|b| has(b) == has(b.to_ascii_uppercase()))
        }
        HirKind::Class(Class::Unicode(c)) => {
            let has = |b: u8| {
                let ch = char::from(b);
                c.ranges().iter().any(|r| r.start() <= ch && ch <= r.end())
            };
            (b'a'..=b'z').all(|b| has(b) == has(b.to_ascii_uppercase()))
        }
        HirKind::Capture(c) => case_closed(&c.sub),
        HirKind::Repetition(r) => case_closed(&r.sub),
        HirKind::Concat(v) | HirKind::Alternation(v) => v.iter().all(case_closed),
    }
}

/// Whether `lowered` (a text with its ASCII letters lower-cased) satisfies every clause.
pub fn satisfies<C, L>(clauses: &[C], lowered: &str) -> bool
where
    C: AsRef<[L]>,
    L: AsRef<str>,
{
    clauses
        .iter()
        .all(|c| c.as_ref().iter().any(|l| lowered.contains(l.as_ref())))
}

fn info(h: &Hir) -> Info {
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) => Info::exactly(Set::from([String::new()])),
        HirKind::Literal(lit) => match std::str::from_utf8(&lit.0) {
            Ok(s) => Info::exactly(Set::from([s.to_ascii_lowercase()])),
            Err(_) => Info::nothing(),
        },
        HirKind::Class(class) => class_set(class).map_or_else(Info::nothing, Info::exactly),
        HirKind::Capture(c) => info(&c.sub),
        HirKind::Repetition(r) => {
            let sub = finish(info(&r.sub));
            if r.min == 0 {
                // may match nothing: needs nothing, but `x?` is still a small set
                let exact = match (&sub.exact, r.max) {
                    (Some(e), Some(1)) => {
                        let mut e = e.clone();
                        e.insert(String::new());
                        Some(e).filter(|e| e.len() <= MAX_SET)
                    }
                    _ => None,
                };
                return Info {
                    exact,
                    needs: Vec::new(),
                };
            }
            let exact = match (&sub.exact, r.max) {
                (Some(e), Some(max)) if max == r.min && r.min <= 4 => {
                    (0..r.min).try_fold(Set::from([String::new()]), |p, _| product(&p, e))
                }
                _ => None,
            };
            // at least one match of the body
            Info {
                exact,
                needs: sub.needs,
            }
        }
        HirKind::Concat(parts) => {
            let mut needs = Vec::new();
            let mut run = Set::from([String::new()]);
            let mut whole = true;
            for p in parts {
                let p = finish(info(p));
                needs.extend(p.needs);
                match p.exact {
                    Some(e) => match product(&run, &e) {
                        Some(joined) => run = joined,
                        None => {
                            whole = false;
                            needs.push(std::mem::replace(&mut run, e));
                        }
                    },
                    None => {
                        whole = false;
                        needs.push(std::mem::replace(&mut run, Set::from([String::new()])));
                    }
                }
            }
            let exact = whole.then(|| run.clone());
            needs.push(run);
            Info { exact, needs }
        }
        HirKind::Alternation(branches) => {
            let infos: Vec<Info> = branches.iter().map(|b| finish(info(b))).collect();
            let exact = infos
                .iter()
                .try_fold(Set::new(), |mut all, i| {
                    all.extend(i.exact.as_ref()?.iter().cloned());
                    Some(all)
                })
                .filter(|s| s.len() <= MAX_SET);
            if infos.iter().any(|i| i.needs.is_empty()) {
                return Info {
                    exact,
                    needs: Vec::new(),
                };
            }
            // (A1 and A2) or (B1 and B2) needs (A1 or B1), (A1 or B2), (A2 or B1), (A2 or B2)
            let mut needs: Vec<Set> = vec![Set::new()];
            for i in &infos {
                let mut next = Vec::new();
                for a in &needs {
                    for b in &i.needs {
                        next.push(a.union(b).cloned().collect::<Set>());
                    }
                }
                needs = next;
                if needs.len() > MAX_CLAUSES {
                    break;
                }
            }
            if needs.len() > MAX_CLAUSES {
                // too many: one clause, each branch's most selective one joined
                let one = infos
                    .iter()
                    .filter_map(|i| i.needs.iter().max_by_key(|c| selectivity(c)))
                    .flatten()
                    .cloned()
                    .collect();
                needs = vec![one];
            }
            Info { exact, needs }
        }
    }
}

/// The characters of a small class, folded to lower case, as one-character texts.
fn class_set(class: &Class) -> Option<Set> {
    let mut set = Set::new();
    match class {
        Class::Unicode(c) => {
            for r in c.ranges() {
                if (r.end() as u32) - (r.start() as u32) >= 2 * MAX_CLASS as u32 {
                    return None;
                }
                for ch in r.start()..=r.end() {
                    set.insert(ch.to_ascii_lowercase().to_string());
                }
            }
        }
        Class::Bytes(c) => {
            for r in c.ranges() {
                if r.end() >= 0x80 || r.end() - r.start() >= 2 * MAX_CLASS as u8 {
                    return None;
                }
                for b in r.start()..=r.end() {
                    set.insert(char::from(b.to_ascii_lowercase()).to_string());
                }
            }
        }
    }
    (set.len() <= MAX_CLASS).then_some(set)
}

/// Every text of `a` followed by one of `b`, if not too many.
fn product(a: &Set, b: &Set) -> Option<Set> {
    if a.len() * b.len() > MAX_SET {
        return None;
    }
    Some(
        a.iter()
            .flat_map(|x| b.iter().map(move |y| format!("{x}{y}")))
            .collect(),
    )
}

/// The shortest literal of a clause, and fewer literals for a tie: the larger, the fewer
/// texts satisfy it.
fn selectivity(c: &Set) -> (usize, std::cmp::Reverse<usize>) {
    (
        c.iter().map(String::len).min().unwrap_or(0),
        std::cmp::Reverse(c.len()),
    )
}

/// The exact set as a clause too; clauses that any text satisfies (holding the empty string),
/// that are too large or that another implies dropped; literals holding another of their
/// clause dropped (the shorter occurs wherever the longer does).
fn finish(mut i: Info) -> Info {
    if let Some(e) = &i.exact {
        i.needs.push(e.clone());
    }
    let mut needs: Vec<Set> = Vec::new();
    for c in i.needs {
        if c.is_empty() || c.contains("") || c.len() > 2 * MAX_SET {
            continue;
        }
        let kept: Set = c
            .iter()
            .filter(|l| !c.iter().any(|o| o != *l && l.contains(o.as_str())))
            .cloned()
            .collect();
        if !needs.contains(&kept) {
            needs.push(kept);
        }
    }
    // a clause implied by another (each of whose literals holds one of its own) says nothing
    // more: `pytest` needs `pytest`, not also `p`, `y`, ...
    let implies = |d: &Set, c: &Set| d.iter().all(|l| c.iter().any(|o| l.contains(o.as_str())));
    let mut k = 0;
    while k < needs.len() {
        if (0..needs.len()).any(|j| j != k && implies(&needs[j], &needs[k])) {
            needs.remove(k);
        } else {
            k += 1;
        }
    }
    i.needs = needs;
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATTERNS: &[&str] = &[
        r"\bpytest\b",
        r"\bpython[0-9.]*\s+(-u\s+)?[\w./-]+\.py\b",
        r"(?i)<<< ?(end )?trace data",
        r"^\s*exitcode: -?\d+",
        r"(?im)^[ \t>]*#{1,3} ?(your task\b|turn \d+ \(|correction[ \t]*$)",
        r#""(applicable)"\s*:\s*(true|false)|"(TR|SA)"\s*:\s*\{\s*"score""#,
        r"(?i)\b(give|rate|set)\b[^.\n]{0,40}\b(tr|sa|threat recognition)\b\s*(=|:|of)?\s*[0-3]\b",
        r"(?i)(dear|note (to|for))\s*:?\s+(the\s+)?(judge|grader)s?\b|\b(judge|grader)s?\s*:",
        r"ab{2}c|x(yz){1,3}|q?r",
        r"[Kk]elvin|ſ",
        r"\bedit\s+\d+:\d+",
        r"a*",
        r"(?i)plan|manager|lead",
        r"Plan|manager",
        r"(?i)give (sa|tr)=3",
        r"(?-i:Kelvin)|grader",
    ];

    #[test]
    fn clauses_of_known_patterns() {
        assert_eq!(required(r"\bpytest\b"), vec![vec!["pytest".to_string()]]);
        assert_eq!(
            required(r"(?i)<<< ?(end )?trace data"),
            vec![vec![
                "<<< end trace data".to_string(),
                "<<< trace data".into(),
                "<<<end trace data".into(),
                "<<<trace data".into()
            ]]
        );
        assert_eq!(
            required("(?i)plan|Manager"),
            vec![vec!["manager".to_string(), "plan".into()]]
        );
        // nothing needed: an empty match, a pattern that does not parse in ASCII mode
        assert!(required("a*").is_empty());
        assert!(required(r"\p{Greek}").is_empty());
        assert!(required("(").is_empty());
    }

    #[test]
    fn exact_patterns_are_literal_sets_in_either_case() {
        assert_eq!(exact("(?i)plan|manager|lead"), (true, true));
        assert_eq!(exact("plan|manager"), (true, false));
        assert_eq!(exact("(?i)ignore (all )?previous"), (true, true));
        assert_eq!(exact("(?-i:Plan)|x"), (false, false));
        assert_eq!(exact("run 1"), (true, false));
        assert_eq!(exact("1-2|=3"), (true, true));
        // anchors, open repetitions and large classes say more than the literals
        assert_eq!(exact(r"(?i)^(user|admin)$"), (false, false));
        assert_eq!(exact(r"(?i)\bpytest\b"), (false, false));
        assert_eq!(exact("ab+"), (false, false));
        assert_eq!(exact(r"a\w"), (false, false));
        assert_eq!(exact(r"a\d"), (true, false));
        assert_eq!(exact("a?"), (false, false));
    }

    proptest::proptest! {
        /// A text a pattern matches (whatever its case) satisfies the pattern's clauses.
        #[test]
        fn a_match_satisfies_the_clauses(
            parts in proptest::collection::vec(
                "(pytest|PyTest|python3 -u a/b\\.py|<<< End TRACE data|<<<trace data|exitcode: -1|  EXITCODE: 2|# Your task|> ## turn 12 \\(|## correction|\"applicable\" : true|\"SA\": \\{\"score\"|Give SA=3|rate threat recognition of 2|Note for the judge|grader:|abbc|xyzyz|r|Kelvin|kelvin|PLAN|plan|Manager|lead|give SA=3|GIVE tr=3|ſ|edit 3:4|[ -~\t\n]{0,3})",
                0..6,
            )
        ) {
            let text: String = parts.concat();
            for p in PATTERNS {
                for ci in [false, true] {
                    // the ASCII-mode matcher the clauses guard (`pattern`), and the Unicode
                    // regex, which answers alike on ASCII text for an ASCII pattern (not for
                    // `ſ`, which folds to `s`)
                    let ascii = regex::bytes::RegexBuilder::new(p)
                        .unicode(false)
                        .case_insensitive(ci)
                        .build()
                        .unwrap()
                        .is_match(text.as_bytes());
                    let unicode = p.is_ascii()
                        && regex::RegexBuilder::new(p).case_insensitive(ci).build().unwrap().is_match(&text);
                    let clauses = required(p);
                    let satisfied = satisfies(&clauses, &text.to_ascii_lowercase());
                    if ascii || unicode {
                        proptest::prop_assert!(
                            satisfied,
                            "{p:?} matches {text:?} but needs {clauses:?}"
                        );
                    }
                    // an exact pattern matches every text that satisfies its clauses
                    let (if_ci, always) = exact(p);
                    if always || (ci && if_ci) {
                        proptest::prop_assert_eq!(ascii, satisfied, "{:?} on {:?}", p, text);
                    }
                }
            }
        }
    }
}
