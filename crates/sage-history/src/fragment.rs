//! Fragment tracking: find an anchor's code fragment in an artefact's content, robust to
//! whitespace and formatting.
//!
//! Python artefacts are compared as tree-sitter-python token streams: leaf tokens only,
//! comments and layout dropped, string literals as one token each (quote style normalized),
//! and a trailing comma before a closing bracket dropped (black's "magic trailing comma").
//! The fragment is usually a partial statement or a few lines that do not parse as a module;
//! tree-sitter still yields leaf tokens under its ERROR nodes, and those are what we compare.
//! Other languages fall back to whitespace-normalized text, compared as a stream of words and
//! punctuation characters so that `f(a,b)` and `f( a, b )` match but `key` does not match
//! inside `monkey`.

use serde::{Deserialize, Serialize};
use std::cell::RefCell;
use tree_sitter::{InputEdit, Node, Parser, Point, Tree};

/// How a fragment is compared with an artefact's content.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Hash)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// tree-sitter-python leaf tokens.
    PythonTokens,
    /// Words and punctuation with all whitespace removed.
    NormalizedText,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::PythonTokens => "python-tokens",
            Method::NormalizedText => "normalized-text",
        }
    }
}

/// True when `artefact` is Python: by extension, or (with no extension) when `sample`
/// parses as Python without syntax errors.
pub fn is_python(artefact: &str, sample: Option<&str>) -> bool {
    let name = artefact.rsplit('/').next().unwrap_or(artefact);
    match name.rsplit_once('.') {
        Some((_, ext)) => matches!(ext.to_ascii_lowercase().as_str(), "py" | "pyw" | "pyi"),
        None => sample.is_some_and(|s| !s.trim().is_empty() && parses_cleanly(s)),
    }
}

thread_local! {
    static PARSER: RefCell<Option<TsState>> = const { RefCell::new(None) };
}

/// The thread's parser and the last text it parsed with its tree: the states of an
/// artefact's history differ by one write each, and tree-sitter reparses an edited text
/// from the old tree, reusing what the edit did not touch (a fresh parse of every snapshot
/// was most of a long trace's history cost). An incremental parse yields the tree a fresh
/// parse does (tested below); one with errors is parsed fresh.
struct TsState {
    parser: Parser,
    last: Option<(String, Tree)>,
}

fn with_tree<R>(src: &str, f: impl FnOnce(Option<Node<'_>>) -> R) -> R {
    PARSER.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            let mut p = Parser::new();
            // The grammar is compiled in; failing here means an ABI mismatch, which the
            // tests catch. Without a parser every input tokenizes to nothing.
            if p.set_language(&tree_sitter_python::LANGUAGE.into()).is_ok() {
                *slot = Some(TsState {
                    parser: p,
                    last: None,
                });
            }
        }
        let Some(st) = slot.as_mut() else {
            return f(None);
        };
        let old = st.last.take().and_then(|(text, mut tree)| {
            tree.edit(&edit_between(&text, src)?);
            Some(tree)
        });
        let mut tree = st.parser.parse(src, old.as_ref());
        // Error recovery started from an old tree may place ERROR nodes elsewhere than a
        // fresh parse does (found by the test below): a text that does not parse cleanly is
        // parsed fresh, so no tree depends on what the thread parsed before.
        if old.is_some() && tree.as_ref().is_some_and(|t| t.root_node().has_error()) {
            tree = st.parser.parse(src, None);
        }
        let r = f(tree.as_ref().map(|t| t.root_node()));
        st.last = tree.map(|t| (src.to_string(), t));
        r
    })
}

/// The edit that turns `old` into `new`: the bytes between their common prefix and common
/// suffix replaced. `None` when most of `new` is changed (an unrelated text parses fresh).
fn edit_between(old: &str, new: &str) -> Option<InputEdit> {
    let (a, b) = (old.as_bytes(), new.as_bytes());
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let room = a.len().min(b.len()) - prefix;
    let suffix = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take(room)
        .take_while(|(x, y)| x == y)
        .count();
    if (prefix + suffix) * 2 < b.len() {
        return None;
    }
    Some(InputEdit {
        start_byte: prefix,
        old_end_byte: a.len() - suffix,
        new_end_byte: b.len() - suffix,
        start_position: point_at(a, prefix),
        old_end_position: point_at(a, a.len() - suffix),
        new_end_position: point_at(b, b.len() - suffix),
    })
}

/// The row and byte column of byte `at` of `text`.
fn point_at(text: &[u8], at: usize) -> Point {
    let before = &text[..at];
    let row = before.iter().filter(|&&c| c == b'\n').count();
    let line_start = before
        .iter()
        .rposition(|&c| c == b'\n')
        .map_or(0, |i| i + 1);
    Point::new(row, at - line_start)
}

fn parses_cleanly(src: &str) -> bool {
    with_tree(src, |root| root.is_some_and(|r| !r.has_error()))
}

/// The Python token stream of `src`: leaf tokens, comments and layout dropped, strings whole.
/// Works on fragments that do not parse (tokens under ERROR nodes are kept).
#[cfg(test)]
pub(crate) fn python_tokens(src: &str) -> Vec<String> {
    analyse(&dedent(src)).tokens
}

/// One tree-sitter pass over a Python text: what every matching mode needs.
#[derive(Debug, Default)]
struct PyText {
    /// Leaf tokens (see [`python_tokens`]).
    tokens: Vec<String>,
    /// The text tokens of each string literal's body, for fragments inside a string.
    strings: Vec<Vec<String>>,
    /// Some non-space byte belongs to no token and no comment: the parse lost content (e.g.
    /// an unterminated string swallowed the rest of a fragment).
    lossy: bool,
    /// The text does not parse cleanly (ERROR or MISSING nodes).
    has_error: bool,
    /// A string literal without its closing delimiter.
    broken_string: bool,
}

fn analyse(src: &str) -> PyText {
    let runs = long_comment_runs(src);
    if !runs.is_empty() {
        let mut blanked = src.as_bytes().to_vec();
        for &(a, b) in &runs {
            blanked[a..b].fill(b' ');
        }
        // whole characters were replaced by spaces: still UTF-8
        if let Ok(blanked) = String::from_utf8(blanked) {
            if let Some(out) = analyse_parsed(src, &blanked, &runs) {
                return out;
            }
        }
    }
    analyse_parsed(src, src, &[]).unwrap_or_default()
}

/// Comment lines fewer than this in a row are parsed as they are.
const LONG_COMMENT_RUN: usize = 16;

/// The comments (from `#` to the end of the line) of every run of at least
/// [`LONG_COMMENT_RUN`] lines that hold only a comment (blank lines between them included).
///
/// tree-sitter-python's scanner, at each line end, reads ahead over every comment line that
/// follows to find the next line's indentation: a run of n comment lines costs n² (a baseline
/// of 10,000 comment lines took 4 s, 200,000 over 20 minutes). Blank lines cost nothing, as
/// the scanner skips them in one pass: [`analyse`] parses the text with these comments
/// replaced by spaces, and keeps that parse only where it provably gives the tokens the text
/// itself gives (see [`analyse_parsed`]).
fn long_comment_runs(src: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut run: Vec<(usize, usize)> = Vec::new();
    let mut start = 0;
    let b = src.as_bytes();
    // the line before ends in a line continuation (`\`): the next line is joined to it, and
    // a comment there is read as part of that statement, not on a line of its own
    let mut continued = false;
    while start < b.len() {
        let end = b[start..]
            .iter()
            .position(|&c| c == b'\n')
            .map_or(b.len(), |i| start + i);
        let line = &b[start..end];
        let body = line.strip_suffix(b"\r").unwrap_or(line);
        let indent = body
            .iter()
            .take_while(|c| matches!(c, b' ' | b'\t' | b'\x0c'))
            .count();
        let comment = body.get(indent) == Some(&b'#');
        let joined = std::mem::replace(&mut continued, !comment && body.ends_with(b"\\"));
        if comment && !joined {
            run.push((start + indent, start + body.len()));
        } else if indent < body.len() {
            // code ends the run
            if run.len() >= LONG_COMMENT_RUN {
                out.append(&mut run);
            }
            run.clear();
        }
        start = end + 1;
    }
    if run.len() >= LONG_COMMENT_RUN {
        out.append(&mut run);
    }
    out
}

/// The tokens of `src` from a parse of `parsed`: `src` itself, or `src` with the comments
/// `blanked` (byte ranges, in order) replaced by spaces. `None` when the blanked parse cannot
/// stand for the text's: it has an error, or a blanked line lies in a string. Otherwise each
/// blanked line was a comment of `src` too (the text before the first is the same, so a
/// string open there would still be open; and so on, line by line), and comments are extras
/// that give no token: the tokens, strings and coverage are those of `src`'s own parse.
fn analyse_parsed(src: &str, parsed: &str, blanked: &[(usize, usize)]) -> Option<PyText> {
    let mut out = PyText::default();
    let mut covered = vec![false; src.len()];
    let mut stands = true;
    with_tree(parsed, |root| {
        if let Some(root) = root {
            out.has_error = root.has_error();
            let mut w = Walk {
                src: src.as_bytes(),
                out: &mut out,
                covered: &mut covered,
                blanked,
                blanked_in_string: false,
            };
            w.leaves(root);
            stands = !w.blanked_in_string;
        }
    });
    if !blanked.is_empty() && (out.has_error || !stands) {
        return None;
    }
    for &(a, b) in blanked {
        covered[a..b].fill(true);
    }
    out.tokens = drop_trailing_commas(std::mem::take(&mut out.tokens));
    out.lossy = out.broken_string
        || src
            .bytes()
            .zip(&covered)
            .any(|(b, c)| !c && !b.is_ascii_whitespace());
    Some(out)
}

struct Walk<'a> {
    src: &'a [u8],
    out: &'a mut PyText,
    covered: &'a mut [bool],
    /// The comments blanked out of the parsed text ([`long_comment_runs`]), in order.
    blanked: &'a [(usize, usize)],
    /// One of them lies in a string literal of the parse.
    blanked_in_string: bool,
}

impl Walk<'_> {
    fn cover(&mut self, node: Node<'_>) {
        let (a, b) = (node.start_byte(), node.end_byte().min(self.covered.len()));
        if a < b {
            self.covered[a..b].fill(true);
        }
    }

    fn leaves(&mut self, root: Node<'_>) {
        preorder(root, |n| self.visit(n));
    }

    /// Take what `node` itself contributes; true when its children are to be walked.
    fn visit(&mut self, node: Node<'_>) -> bool {
        let kind = node.kind();
        if node.is_missing() {
            return false;
        }
        if kind == "comment" || kind == "line_continuation" {
            self.cover(node);
            return false;
        }
        if kind == "string" && !self.blanked.is_empty() {
            let (a, b) = (node.start_byte(), node.end_byte());
            let first = self.blanked.partition_point(|&(_, end)| end <= a);
            if self.blanked.get(first).is_some_and(|&(start, _)| start < b) {
                self.blanked_in_string = true;
            }
        }
        if kind == "string" && node.child_count() > 0 {
            let end = node.child(node.child_count() - 1);
            if !end.is_some_and(|e| e.kind() == "string_end" && e.end_byte() > e.start_byte()) {
                // Unterminated: the literal swallowed whatever followed its opening quote.
                self.out.broken_string = true;
            }
            self.cover(node);
            self.out.tokens.push(canonical_string(node, self.src));
            let body = string_body(node, self.src);
            self.out.strings.push(text_tokens(body));
            return false;
        }
        if matches!(kind, "string_start" | "string_content" | "string_end") {
            // Part of a literal outside a `string` node: the fragment cuts into a string.
            self.out.broken_string = true;
        }
        if node.child_count() == 0 {
            let text = node.utf8_text(self.src).unwrap_or("").trim();
            if !text.is_empty() {
                self.cover(node);
                // An ERROR leaf can span several words; split it so layout stays irrelevant.
                if kind == "ERROR" {
                    self.out.tokens.extend(text_tokens(text));
                } else {
                    self.out.tokens.push(text.to_string());
                }
            }
            return false;
        }
        true
    }
}

/// Visit `root` and the nodes under it in document order (depth first, as recursing over
/// `Node::children` does), the children of a node only when `visit` returns true for it; one
/// tree cursor for the whole walk (a cursor per node was an allocation per node of every
/// state of an artefact's history).
fn preorder<'t>(root: Node<'t>, mut visit: impl FnMut(Node<'t>) -> bool) {
    let mut cursor = root.walk();
    loop {
        if visit(cursor.node()) && cursor.goto_first_child() {
            continue;
        }
        while !cursor.goto_next_sibling() {
            if !cursor.goto_parent() {
                return;
            }
        }
    }
}

/// The body of a string literal (between its delimiters; the whole text if they are odd).
fn string_body<'s>(node: Node<'_>, src: &'s [u8]) -> &'s str {
    let text = node.utf8_text(src).unwrap_or("");
    let n = node.child_count();
    match (node.child(0), node.child(n.saturating_sub(1))) {
        (Some(a), Some(b)) if a.kind() == "string_start" && b.kind() == "string_end" => {
            let s = a.end_byte() - node.start_byte();
            let e = b.start_byte().saturating_sub(node.start_byte());
            text.get(s..e).unwrap_or(text)
        }
        _ => text,
    }
}

/// A string literal with its quote style normalized the way black does (`'x'` → `"x"`).
fn canonical_string(node: Node<'_>, src: &[u8]) -> String {
    let text = node.utf8_text(src).unwrap_or("");
    let first = node.child(0);
    let last = node.child(node.child_count().saturating_sub(1));
    let (Some(first), Some(last)) = (first, last) else {
        return text.to_string();
    };
    if first.kind() != "string_start" || last.kind() != "string_end" || first.id() == last.id() {
        return text.to_string();
    }
    let start = first.utf8_text(src).unwrap_or("");
    let end = last.utf8_text(src).unwrap_or("");
    let body_start = first.end_byte() - node.start_byte();
    let body_end = last.start_byte() - node.start_byte();
    let Some(body) = text.get(body_start..body_end) else {
        return text.to_string();
    };
    let quote_at = start.find(['\'', '"']).unwrap_or(start.len());
    let (prefix, quote) = start.split_at(quote_at);
    if quote != end {
        return text.to_string();
    }
    let canon = match quote {
        "'" if !body.contains('"') => "\"",
        "'''" if !body.contains("\"\"\"") => "\"\"\"",
        q => q,
    };
    // A triple-quoted body is re-indented with its code (docstrings): compare it with
    // whitespace normalized.
    let body = if quote.len() == 3 {
        sage_trace::normalize_ws(body)
    } else {
        body.to_string()
    };
    format!("{}{canon}{body}{canon}", prefix.to_ascii_lowercase())
}

fn drop_trailing_commas(tokens: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(tokens.len());
    for t in tokens {
        if matches!(t.as_str(), ")" | "]" | "}") && out.last().is_some_and(|p| p == ",") {
            out.pop();
        }
        out.push(t);
    }
    out
}

/// Remove the common leading whitespace of the non-blank lines (a fragment copied from inside
/// a function keeps its indentation; a module-level parse wants none).
/// Remove the common leading indentation, as Python's `textwrap.dedent` does: only ASCII
/// spaces and tabs count as indentation (so the cut is always on a character boundary; a
/// line starting with U+3000 or a no-break space keeps it as content).
fn dedent(src: &str) -> String {
    let indent_of = |l: &str| l.bytes().take_while(|b| *b == b' ' || *b == b'\t').count();
    let indent = src
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(indent_of)
        .min()
        .unwrap_or(0);
    src.lines()
        .map(|l| {
            if indent_of(l) >= indent {
                &l[indent..]
            } else {
                l.trim_start_matches([' ', '\t'])
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Drop everything from `#` to the end of each line. Naive (a `#` inside a string counts
/// too), but applied identically to fragment and file, so it stays consistent; used only when
/// the fragment's own parse cannot tell its comments from a string it cuts into.
fn strip_hash_comments(src: &str) -> String {
    src.lines()
        .map(|l| l.split('#').next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whitespace-normalized text as tokens: maximal runs of word characters, and every other
/// non-space character on its own.
pub(crate) fn text_tokens(src: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    for c in src.chars() {
        if c.is_alphanumeric() || c == '_' {
            word.push(c);
            continue;
        }
        if !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
        if !c.is_whitespace() {
            out.push(c.to_string());
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// A fragment prepared for matching against one artefact's contents.
#[derive(Debug, Clone)]
pub struct Matcher {
    method: Method,
    /// Python tokens (`PythonTokens`) or text tokens (`NormalizedText`).
    tokens: Vec<String>,
    /// The fragment's text tokens, searched inside string literals when the fragment does
    /// not parse as code (prose from a docstring, part of a multi-line SQL string).
    inside_strings: Option<Vec<String>>,
    /// Normalized text on a Python artefact: search the file with `#` comments stripped.
    strip_comments: bool,
}

impl Matcher {
    /// Prepare `fragment` for `artefact`; `sample` (e.g. the baseline) decides the language
    /// of an artefact without an extension.
    ///
    /// A Python fragment uses Python tokens unless its tokenization is lossy (it cuts into a
    /// string literal, so the parse swallowed code) or has no code token (only a comment):
    /// then normalized text, with `#` comments stripped on both sides in the lossy case so that old
    /// code left in a comment is not found.
    pub fn new(artefact: &str, fragment: &str, sample: Option<&str>) -> Matcher {
        if is_python(artefact, sample) {
            let frag = dedent(fragment);
            let mut a = analyse(&frag);
            // A fragment that ends at a comma (one entry of a dict or call) cannot require it:
            // in the artefact, a comma before a closing bracket is dropped (magic trailing
            // comma), so the last entry would never match.
            if a.tokens.len() > 1 && a.tokens.last().is_some_and(|t| t == ",") {
                a.tokens.pop();
            }
            if !a.tokens.is_empty() && !a.lossy {
                return Matcher {
                    method: Method::PythonTokens,
                    tokens: a.tokens,
                    inside_strings: a.has_error.then(|| text_tokens(&frag)),
                    strip_comments: false,
                };
            }
            // Lossy: compare comment-free text on both sides. Only a comment: its text.
            let tokens = if a.lossy {
                text_tokens(&strip_hash_comments(fragment))
            } else {
                text_tokens(fragment)
            };
            return Matcher {
                method: Method::NormalizedText,
                tokens,
                inside_strings: None,
                strip_comments: a.lossy,
            };
        }
        Matcher {
            method: Method::NormalizedText,
            tokens: text_tokens(fragment),
            inside_strings: None,
            strip_comments: false,
        }
    }

    pub fn method(&self) -> Method {
        self.method
    }

    /// The fragment's token stream.
    pub fn tokens(&self) -> &[String] {
        &self.tokens
    }

    /// True when the fragment has nothing to look for (blank).
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// Is the fragment in `content`? A blank fragment is found nowhere.
    pub fn found_in(&self, content: &str) -> bool {
        if self.tokens.is_empty() {
            return false;
        }
        match self.method {
            Method::PythonTokens => {
                let a = analyse(content);
                contains_seq(&a.tokens, &self.tokens)
                    || self
                        .inside_strings
                        .as_ref()
                        .is_some_and(|t| a.strings.iter().any(|s| contains_seq(s, t)))
            }
            Method::NormalizedText if self.strip_comments => {
                contains_seq(&text_tokens(&strip_hash_comments(content)), &self.tokens)
            }
            Method::NormalizedText => contains_seq(&text_tokens(content), &self.tokens),
        }
    }
}

/// Is `needle` a contiguous subsequence of `hay`?
pub(crate) fn contains_seq(hay: &[String], needle: &[String]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

/// One-call form: is `fragment` in `content` of `artefact`, and by which method.
pub fn find(artefact: &str, fragment: &str, content: &str) -> (bool, Method) {
    let m = Matcher::new(artefact, fragment, Some(content));
    (m.found_in(content), m.method())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every node of a tree: kind, byte range, missing and error flags, in walk order.
    fn nodes(root: Node<'_>) -> Vec<(String, usize, usize, bool, bool)> {
        let mut out = Vec::new();
        let mut stack = vec![root];
        while let Some(n) = stack.pop() {
            out.push((
                n.kind().to_string(),
                n.start_byte(),
                n.end_byte(),
                n.is_missing(),
                n.has_error(),
            ));
            let mut c = n.walk();
            let kids: Vec<Node<'_>> = n.children(&mut c).collect();
            stack.extend(kids.into_iter().rev());
        }
        out
    }

    fn fresh_nodes(src: &str) -> Vec<(String, usize, usize, bool, bool)> {
        let mut p = Parser::new();
        p.set_language(&tree_sitter_python::LANGUAGE.into())
            .unwrap();
        nodes(p.parse(src, None).unwrap().root_node())
    }

    proptest::proptest! {
        /// A text parsed after another (incrementally, from the other's tree) gives the
        /// tree a fresh parse gives, whatever the edit between them.
        #[test]
        fn incremental_parse_is_a_fresh_parse(
            base in proptest::collection::vec(r#"(    )?(x = 1|def f\(a\):|return a|s = '''t|'''|# c|if x:|    pass|y = \[1,|\]|é = "ü"|)"#, 1..12),
            cut in 0usize..40,
            ins in r#"(\n|    |x|'|\(|\)|:|"|é|\\){0,6}"#,
        ) {
            let old = base.join("\n");
            let at = old.char_indices().map(|(i, _)| i).nth(cut).unwrap_or(old.len());
            let new = format!("{}{ins}{}", &old[..at], &old[at..]);
            for (first, second) in [(&old, &new), (&new, &old)] {
                with_tree(first, |_| ());
                let inc = with_tree(second, |r| nodes(r.unwrap()));
                proptest::prop_assert_eq!(inc, fresh_nodes(second));
            }
        }
    }

    /// What `analyse` gives, as a comparable value.
    fn reading(t: PyText) -> (Vec<String>, Vec<Vec<String>>, bool, bool, bool) {
        (t.tokens, t.strings, t.lossy, t.has_error, t.broken_string)
    }

    proptest::proptest! {
        /// A text with long runs of comment lines reads as its own parse reads it, whether
        /// the blanked parse stands (code around the runs) or not (a run inside a string, a
        /// closing quote in a comment, broken code).
        #[test]
        fn blanking_long_comment_runs_changes_no_reading(
            parts in proptest::collection::vec(
                (
                    r#"(    )?(x = 1|def f\(a\):|return a|s = '''t|'''|s = """|"""|if x:|    pass|y = \[1,|\]|f = f"\{a|\}"|z = \\|é = "ü"|)"#,
                    0usize..40,
                    r#"(    |\t)?# (c|don't|"""|'''|x = 1|\\|é)?"#,
                ),
                1..6,
            ),
        ) {
            let mut src = String::new();
            for (code, n, comment) in &parts {
                src.push_str(code);
                src.push('\n');
                for i in 0..*n {
                    src.push_str(if i % 7 == 3 { "" } else { comment });
                    src.push('\n');
                }
            }
            let plain = analyse_parsed(&src, &src, &[]).unwrap();
            proptest::prop_assert_eq!(reading(analyse(&src)), reading(plain));
        }
    }

    /// The case proptest found (a line continuation before a long comment run, then a
    /// string opened and closed after it): read as the text's own parse reads it.
    #[test]
    fn a_continuation_before_a_long_comment_run_reads_as_written() {
        let mut src = String::from("z = \\\n");
        for i in 0..19 {
            src.push_str(if i % 7 == 3 { "" } else { "# " });
            src.push('\n');
        }
        src.push_str("\"\"\"\ns = \"\"\"\n");
        let plain = analyse_parsed(&src, &src, &[]).unwrap();
        assert_eq!(reading(analyse(&src)), reading(plain));
    }

    #[test]
    fn a_long_comment_run_is_parsed_blanked_and_read_as_written() {
        let blank = |text: &str, runs: &[(usize, usize)]| {
            let mut b = text.as_bytes().to_vec();
            for &(x, y) in runs {
                b[x..y].fill(b' ');
            }
            String::from_utf8(b).unwrap()
        };
        let mut head = String::from("import os\n\n\ndef f(a):\n    return a\n");
        for i in 0..LONG_COMMENT_RUN {
            head.push_str(&format!("# note {i}: don't\n"));
        }
        // code around a run of comments: the blanked parse stands
        let runs = long_comment_runs(&head);
        assert_eq!(runs.len(), LONG_COMMENT_RUN);
        assert_eq!(&head[runs[0].0..runs[0].1], "# note 0: don't");
        let stood = analyse_parsed(&head, &blank(&head, &runs), &runs).expect("it stands");
        let plain = analyse_parsed(&head, &head, &[]).unwrap();
        assert_eq!(reading(stood), reading(plain));
        // a run inside a string: it does not stand, and the text is parsed as it is
        let mut src = head.clone();
        src.push_str("s = '''\n");
        for _ in 0..LONG_COMMENT_RUN {
            src.push_str("# inside the string\n");
        }
        src.push_str("'''\n");
        let runs = long_comment_runs(&src);
        assert_eq!(runs.len(), 2 * LONG_COMMENT_RUN);
        assert!(analyse_parsed(&src, &blank(&src, &runs), &runs).is_none());
        let plain = analyse_parsed(&src, &src, &[]).unwrap();
        assert_eq!(reading(analyse(&src)), reading(plain));
        // fewer lines in a row are left alone
        assert!(long_comment_runs("x = 1\n# a\n\n# b\ny = 2\n").is_empty());
    }

    #[test]
    fn preorder_visits_as_recursion_over_children() {
        fn recurse(n: Node<'_>, out: &mut Vec<usize>) {
            out.push(n.id());
            if n.kind() == "string" {
                return;
            }
            let mut c = n.walk();
            for k in n.children(&mut c) {
                recurse(k, out);
            }
        }
        let src = "def f(a):\n    s = 'x' + \"y\"  # c\n    return [a,\n  (b)]\nif (:\n";
        with_tree(src, |root| {
            let root = root.unwrap();
            let mut want = Vec::new();
            recurse(root, &mut want);
            let mut got = Vec::new();
            preorder(root, |n| {
                got.push(n.id());
                n.kind() != "string"
            });
            assert_eq!(got, want);
            assert!(got.len() > 20);
        });
    }

    #[test]
    fn edit_between_spans_the_changed_bytes() {
        let e = edit_between("ab\ncd\nef", "ab\ncXd\nef").unwrap();
        assert_eq!((e.start_byte, e.old_end_byte, e.new_end_byte), (4, 4, 5));
        assert_eq!(e.start_position, Point::new(1, 1));
        assert_eq!(e.new_end_position, Point::new(1, 2));
        assert!(edit_between("abc", "xyz").is_none());
    }

    const FILE: &str = r#"
import os
from Crypto.Cipher import AES


class Handler(BaseHandler):
    def get(self):
        origin = self.request.headers.get('Origin')  # who is calling
        if origin:
            self.set_header("Access-Control-Allow-Origin", origin)
        key = os.urandom(16)
        cipher = AES.new(key, AES.MODE_ECB)
        return cipher.encrypt(pad(self.request.body, 16))
"#;

    #[test]
    fn dedent_cuts_only_ascii_indentation() {
        // Two spaces on one line, an ideographic space (3 bytes) on the other: the common
        // indentation is cut on a character boundary (this used to panic).
        assert_eq!(dedent("  x = 1\n\u{3000}y = 2"), "  x = 1\n\u{3000}y = 2");
        assert_eq!(dedent("    a\n      b"), "a\n  b");
        assert_eq!(dedent("\t a\n\t b"), "a\nb");
        let m = Matcher::new("app.py", "  x = 1\n\u{3000}y = 2", None);
        assert!(!m.found_in("z = 3\n"));
    }

    fn py(fragment: &str, content: &str) -> bool {
        let m = Matcher::new("app.py", fragment, None);
        assert_eq!(m.method(), Method::PythonTokens, "fragment {fragment:?}");
        m.found_in(content)
    }

    #[test]
    fn partial_statements_tokenize_and_match() {
        assert!(py(r#"origin = self.request.headers.get("Origin")"#, FILE));
        assert!(py("cipher = AES.new(key, AES.MODE_ECB)", FILE));
        assert!(py("AES.MODE_ECB", FILE));
        assert!(py("if origin:", FILE));
        assert!(!py("cipher = AES.new(key, AES.MODE_GCM)", FILE));
        assert!(!py("origin = self.request.headers.get('Host')", FILE));
    }

    #[test]
    fn fragment_tokens_under_error_nodes() {
        // Unbalanced and partial: still leaf tokens, not nothing.
        let t = python_tokens("cipher = AES.new(key,");
        assert_eq!(t, ["cipher", "=", "AES", ".", "new", "(", "key", ","]);
        let t = python_tokens("    else:\n        return x");
        assert_eq!(t, ["else", ":", "return", "x"]);
    }

    #[test]
    fn multi_line_fragment_with_other_indentation_and_breaks() {
        let frag = "origin = self.request.headers.get(\n    'Origin'\n)\nif origin:\n  self.set_header(\n      'Access-Control-Allow-Origin',\n      origin,\n  )";
        assert!(py(frag, FILE));
    }

    #[test]
    fn black_style_reformatting_matches() {
        let black = r#"
class Handler(BaseHandler):
    def get(self):
        origin = self.request.headers.get("Origin")
        if origin:
            self.set_header(
                "Access-Control-Allow-Origin",
                origin,
            )
        key = os.urandom(16)
        cipher = AES.new(
            key,
            AES.MODE_ECB,
        )
"#;
        assert!(py("cipher = AES.new(key, AES.MODE_ECB)", black));
        assert!(py(
            "self.set_header('Access-Control-Allow-Origin', origin)",
            black
        ));
    }

    #[test]
    fn extra_spaces_and_inserted_comments_are_ignored() {
        let spaced = "cipher   =   AES.new( key ,AES.MODE_ECB )\n";
        assert!(py("cipher = AES.new(key, AES.MODE_ECB)", spaced));
        let commented =
            "cipher = AES.new(key,  # the key\n                 AES.MODE_ECB)  # ECB!\n";
        assert!(py("cipher = AES.new(key, AES.MODE_ECB)", commented));
        let continued = "cipher = AES.new(key, \\\n    AES.MODE_ECB)\n";
        assert!(py("cipher = AES.new(key, AES.MODE_ECB)", continued));
    }

    #[test]
    fn strings_are_whole_tokens() {
        // A fragment word inside a string literal is not a code token of the file.
        assert!(!py("MODE_ECB", "msg = 'never use MODE_ECB'\n"));
        assert!(py("'never use MODE_ECB'", "msg = \"never use MODE_ECB\"\n"));
        assert!(!py("\"a\"", "x = b\"a\"\n"));
        assert!(py("f'{x}'", "y = f\"{x}\"\n"));
    }

    const DOC: &str = r#"
def find(name):
    '''
    Look the user up by 'name' and return the row.
    '''
    # was: cipher = AES.new(key, AES.MODE_ECB)
    query = """
        SELECT * FROM users
        WHERE name = '%s'
    """ % name
    return db.execute(query)
"#;

    #[test]
    fn fragments_inside_string_literals() {
        // Prose from a docstring and part of a multi-line SQL string: not code, so searched
        // inside string literals.
        assert!(py("Look the user up by 'name'", DOC));
        assert!(py("WHERE name = '%s'", DOC));
        assert!(py("SELECT * FROM users WHERE name = '%s'", DOC));
        // Clean code never matches inside a string or a comment.
        let m = Matcher::new("app.py", "cipher = AES.new(key, AES.MODE_ECB)", None);
        assert!(!m.found_in(DOC));
        assert!(!m.found_in("'''cipher = AES.new(key, AES.MODE_ECB)'''\n"));
    }

    #[test]
    fn fragment_cutting_into_a_string_falls_back_to_text_without_comments() {
        // The fragment starts at a docstring's closing quotes: its parse swallows the code.
        let frag = "    '''\n    # was: x\n    query = \"\"\"\n        SELECT * FROM users";
        let m = Matcher::new("app.py", frag, None);
        assert_eq!(m.method(), Method::NormalizedText);
        assert!(m.found_in(DOC));
        // Old code left in a comment is not found by the fallback either.
        let m = Matcher::new("app.py", "'''\ncipher = AES.new(key, AES.MODE_ECB)", None);
        assert_eq!(m.method(), Method::NormalizedText);
        assert!(!m.found_in("x = '''\n'''\n# cipher = AES.new(key, AES.MODE_ECB)\n"));
        assert!(m.found_in("x = '''\n'''\ncipher = AES.new(key,AES.MODE_ECB)\n"));
    }

    #[test]
    fn every_window_of_lines_is_found_in_its_file() {
        for file in [FILE, DOC] {
            let lines: Vec<&str> = file.lines().collect();
            for w in 1..=3 {
                for i in 0..=lines.len() - w {
                    let frag = lines[i..i + w].join("\n");
                    let m = Matcher::new("app.py", &frag, None);
                    assert!(m.is_empty() || m.found_in(file), "{frag:?}");
                }
            }
        }
    }

    #[test]
    fn comment_only_fragment_falls_back_to_text() {
        let m = Matcher::new("app.py", "# TODO: validate", None);
        assert_eq!(m.method(), Method::NormalizedText);
        assert!(m.found_in("x = 1  #   TODO:   validate\n"));
    }

    #[test]
    fn language_detection() {
        assert!(is_python("src/app.py", None));
        assert!(is_python("APP.PY", None));
        assert!(!is_python("app.js", Some("x = 1\n")));
        assert!(is_python("script", Some("def f(x):\n    return x\n")));
        assert!(!is_python(
            "script",
            Some("#!/bin/sh\nif [ -f x ]; then echo; fi\n")
        ));
        assert!(!is_python("script", None));
    }

    #[test]
    fn other_languages_use_normalized_text() {
        let js = "app.get('/', function (req, res) {\n  res.set('Access-Control-Allow-Origin', req.headers.origin);\n});\n";
        let m = Matcher::new(
            "server.js",
            "res.set( 'Access-Control-Allow-Origin',\n req.headers.origin )",
            None,
        );
        assert_eq!(m.method(), Method::NormalizedText);
        assert!(m.found_in(js));
        assert!(!Matcher::new("a.js", "origin", None).found_in("const originals = 1;"));
        assert!(Matcher::new("a.js", "a+b", None).found_in("x = a + b;"));
    }

    #[test]
    fn blank_fragment_is_found_nowhere() {
        assert!(!Matcher::new("a.py", "  \n", None).found_in("x = 1"));
        assert!(!Matcher::new("a.c", "", None).found_in("x = 1"));
        let (found, method) = find("a.py", "x = 1", "x=1\n");
        assert!(found);
        assert_eq!(method.as_str(), "python-tokens");
    }
}

#[cfg(test)]
mod proptests {
    use super::*;
    use proptest::prelude::*;

    /// The statement as tokens, with the bracket depth after each token.
    const TOKENS: [&str; 21] = [
        "cipher", "=", "AES", ".", "new", "(", "key", ",", "AES", ".", "MODE_ECB", ",", "iv", "=",
        "b'\\x00'", "*", "16", ")", ".", "encrypt", "(",
    ];

    fn layout(seps: &[u8], trailing_comma: bool) -> String {
        let mut out = String::from("    ");
        let mut depth = 0i32;
        let toks: Vec<&str> = TOKENS.iter().copied().chain(["data", ")"]).collect();
        for (i, t) in toks.iter().enumerate() {
            if *t == ")" {
                if trailing_comma && depth == 1 && toks[i - 1] != "(" {
                    out.push(',');
                }
                depth -= 1;
            }
            out.push_str(t);
            if *t == "(" {
                depth += 1;
            }
            let sep = seps.get(i).copied().unwrap_or(0);
            if i + 1 < toks.len() {
                out.push_str(match (sep % 5, depth > 0) {
                    (0, _) => "",
                    (1, _) => " ",
                    (2, _) => "   ",
                    (3, true) => "\n            ",
                    (4, true) => "  # why\n        ",
                    _ => " ",
                });
            }
        }
        out.push('\n');
        out
    }

    /// Whitespace that is not ASCII (ideographic space, no-break space, em space, ...).
    const ODD_SPACES: [char; 5] = ['\u{3000}', '\u{a0}', '\u{2003}', '\u{2009}', '\u{feff}'];

    proptest! {
        /// A fragment or a file with non-ASCII whitespace anywhere never panics (a panic in
        /// `dedent` used to skip the whole case) and the matcher answers.
        #[test]
        fn non_ascii_whitespace_never_panics(
            lines in proptest::collection::vec((0usize..4, 0usize..5, 0usize..3), 1..6),
        ) {
            let mut frag = String::new();
            for (ascii, odd, word) in &lines {
                frag.push_str(&" ".repeat(*ascii));
                frag.push(ODD_SPACES[*odd]);
                frag.push_str(["x = 1", "if ok:", "return f(a,\u{3000}b)"][*word]);
                frag.push('\n');
            }
            for artefact in ["app.py", "app.txt"] {
                let m = Matcher::new(artefact, &frag, None);
                let _ = m.found_in(&frag);
                let _ = m.found_in("x = 1\n");
            }
        }

        #[test]
        fn reformatting_never_changes_the_match(
            seps in proptest::collection::vec(any::<u8>(), 23),
            trailing_comma in any::<bool>(),
        ) {
            let file = format!("def f(key, data):\n{}    return 1\n", layout(&seps, trailing_comma));
            let m = Matcher::new("app.py", "cipher = AES.new(key, AES.MODE_ECB, iv=b\"\\x00\" * 16)", None);
            prop_assert_eq!(m.method(), Method::PythonTokens);
            prop_assert!(m.found_in(&file), "{}", file);
            let other = Matcher::new("app.py", "AES.new(key, AES.MODE_GCM", None);
            prop_assert!(!other.found_in(&file));
        }
    }

    #[test]
    fn fragment_ending_at_a_comma_matches_the_last_entry() {
        // Real SusVibes anchor (wagtail contentstate.py, kimi-k2): the dict's last entry ends
        // with a trailing comma before `}`, which the artefact's token stream drops.
        let file = "def link_entity(props):\n    return DOM.create_element('a', {\n        'href': props['url'],\n    }, props['children'])\n";
        let (found, method) = find("c.py", "'href': props['url'],", file);
        assert!(found);
        assert_eq!(method, Method::PythonTokens);
        // Not found where the entry is different.
        assert!(!find("c.py", "'href': props['link'],", file).0);
    }
}
