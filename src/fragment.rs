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
use tree_sitter::{Node, Parser};

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
    static PARSER: RefCell<Option<Parser>> = const { RefCell::new(None) };
}

fn with_tree<R>(src: &str, f: impl FnOnce(Option<Node<'_>>) -> R) -> R {
    PARSER.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            let mut p = Parser::new();
            // The grammar is compiled in; failing here means an ABI mismatch, which the
            // tests catch. Without a parser every input tokenizes to nothing.
            if p.set_language(&tree_sitter_python::LANGUAGE.into()).is_ok() {
                *slot = Some(p);
            }
        }
        let tree = slot.as_mut().and_then(|p| p.parse(src, None));
        f(tree.as_ref().map(|t| t.root_node()))
    })
}

fn parses_cleanly(src: &str) -> bool {
    with_tree(src, |root| root.is_some_and(|r| !r.has_error()))
}

/// The Python token stream of `src`: leaf tokens, comments and layout dropped, strings whole.
/// Works on fragments that do not parse (tokens under ERROR nodes are kept).
pub fn python_tokens(src: &str) -> Vec<String> {
    let src = dedent(src);
    let mut out = Vec::new();
    with_tree(&src, |root| {
        if let Some(root) = root {
            collect_leaves(root, src.as_bytes(), &mut out);
        }
    });
    drop_trailing_commas(out)
}

fn collect_leaves(node: Node<'_>, src: &[u8], out: &mut Vec<String>) {
    let kind = node.kind();
    if kind == "comment" || kind == "line_continuation" || node.is_missing() {
        return;
    }
    if kind == "string" && node.child_count() > 0 {
        out.push(canonical_string(node, src));
        return;
    }
    if node.child_count() == 0 {
        let text = node.utf8_text(src).unwrap_or("").trim();
        if !text.is_empty() {
            // An ERROR leaf can span several words; split it so layout stays irrelevant.
            if kind == "ERROR" {
                out.extend(text_tokens(text));
            } else {
                out.push(text.to_string());
            }
        }
        return;
    }
    let mut cursor = node.walk();
    for child in node.children(&mut cursor) {
        collect_leaves(child, src, out);
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
fn dedent(src: &str) -> String {
    let indent = src
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    src.lines()
        .map(|l| {
            if l.len() >= indent {
                &l[indent..]
            } else {
                l.trim_start()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whitespace-normalized text as tokens: maximal runs of word characters, and every other
/// non-space character on its own.
pub fn text_tokens(src: &str) -> Vec<String> {
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
    tokens: Vec<String>,
}

impl Matcher {
    /// Prepare `fragment` for `artefact`; `sample` (e.g. the baseline) decides the language
    /// of an artefact without an extension. A Python fragment with no code token (only a
    /// comment) falls back to normalized text.
    pub fn new(artefact: &str, fragment: &str, sample: Option<&str>) -> Matcher {
        if is_python(artefact, sample) {
            let tokens = python_tokens(fragment);
            if !tokens.is_empty() {
                return Matcher {
                    method: Method::PythonTokens,
                    tokens,
                };
            }
        }
        Matcher {
            method: Method::NormalizedText,
            tokens: text_tokens(fragment),
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
        let hay = match self.method {
            Method::PythonTokens => python_tokens(content),
            Method::NormalizedText => text_tokens(content),
        };
        contains_seq(&hay, &self.tokens)
    }
}

/// Is `needle` a contiguous subsequence of `hay`?
pub fn contains_seq(hay: &[String], needle: &[String]) -> bool {
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
