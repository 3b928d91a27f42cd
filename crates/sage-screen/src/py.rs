//! Python parsing helpers shared by the screening levels: one tree-sitter parse per file, and
//! the few `ast`-level notions (constants, dotted names, string values) the levels need,
//! mirrored on tree-sitter nodes so that the native L3 behaves like the Python reference.

use tree_sitter::{Language, Node, Parser, Query, QueryCursor, StreamingIterator, Tree};

/// The Python grammar.
pub fn language() -> Language {
    tree_sitter_python::LANGUAGE.into()
}

/// A parsed Python file.
pub struct PyFile {
    pub src: String,
    pub tree: Tree,
}

impl PyFile {
    pub fn parse(src: &str) -> PyFile {
        let mut parser = Parser::new();
        parser
            .set_language(&language())
            .expect("the bundled tree-sitter-python grammar matches the tree-sitter ABI");
        // tree-sitter returns None only on cancellation or timeout, neither of which we set.
        let tree = parser
            .parse(src, None)
            .expect("tree-sitter parse without timeout always yields a tree");
        PyFile {
            src: src.to_string(),
            tree,
        }
    }

    pub fn root(&self) -> Node<'_> {
        self.tree.root_node()
    }

    pub fn text(&self, n: Node) -> &str {
        &self.src[n.start_byte()..n.end_byte()]
    }

    /// Every node captured by `query`, with its capture name, in document order.
    pub fn captures<'t, 'q>(&'t self, query: &'q Query) -> Vec<(&'q str, Node<'t>)> {
        let names = query.capture_names();
        let mut cursor = QueryCursor::new();
        let mut out = Vec::new();
        let mut it = cursor.captures(query, self.root(), self.src.as_bytes());
        while let Some((m, idx)) = it.next() {
            let c = m.captures()[*idx];
            out.push((names[c.index as usize], c.node));
        }
        out
    }
}

/// Compile a query against the Python grammar (queries are constants of this crate).
pub fn query(src: &str) -> Query {
    Query::new(&language(), src).expect("built-in tree-sitter query compiles")
}

/// 1-based line and column of a node's start (column in characters of the line).
pub fn position(file: &PyFile, n: Node) -> (usize, usize) {
    let p = n.start_position();
    let line_start = n.start_byte() - p.column;
    let col = file.src[line_start..n.start_byte()].chars().count();
    (p.row + 1, col + 1)
}

/// Strip `( ... )`: Python's `ast` has no parenthesis node.
pub(crate) fn unparen(mut n: Node) -> Node {
    while n.kind() == "parenthesized_expression" {
        match named_children(n).into_iter().next() {
            Some(c) => n = c,
            None => break,
        }
    }
    n
}

/// Named children without comments.
pub(crate) fn named_children(n: Node) -> Vec<Node> {
    let mut c = n.walk();
    n.named_children(&mut c)
        .filter(|x| x.kind() != "comment")
        .collect()
}

/// A Python constant, as `ast.Constant` holds it.
#[derive(Debug, Clone, PartialEq)]
pub enum Lit {
    Str(String),
    Bytes(String),
    Int(i128),
    Float(f64),
    Bool(bool),
    None,
    /// Ellipsis, complex numbers and integers too large to hold.
    Other,
}

impl Lit {
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Lit::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// The pieces of a string literal (or implicit concatenation): prefix flags and the literal
/// text between interpolations, decoded.
pub struct StrParts {
    pub fstring: bool,
    pub bytes: bool,
    pub has_interpolation: bool,
    /// Literal runs between interpolations (merged across concatenation).
    pub pieces: Vec<String>,
}

/// Decode a `string` or `concatenated_string` node.
pub(crate) fn string_parts(file: &PyFile, n: Node) -> Option<StrParts> {
    let parts: Vec<Node> = match n.kind() {
        "string" => vec![n],
        "concatenated_string" => named_children(n)
            .into_iter()
            .filter(|c| c.kind() == "string")
            .collect(),
        _ => return None,
    };
    let mut out = StrParts {
        fstring: false,
        bytes: false,
        has_interpolation: false,
        pieces: vec![String::new()],
    };
    for s in parts {
        let mut c = s.walk();
        let kids: Vec<Node> = s.children(&mut c).collect();
        let prefix = kids
            .iter()
            .find(|k| k.kind() == "string_start")
            .map(|k| {
                file.text(*k)
                    .trim_end_matches(['\'', '"'])
                    .to_ascii_lowercase()
            })
            .unwrap_or_default();
        let raw = prefix.contains('r');
        if prefix.contains('f') {
            out.fstring = true;
        }
        if prefix.contains('b') {
            out.bytes = true;
        }
        for k in kids {
            match k.kind() {
                "string_content" => {
                    let t = file.text(k);
                    let piece = if raw {
                        t.to_string()
                    } else {
                        decode_escapes(t)
                    };
                    out.pieces.last_mut().expect("non-empty").push_str(&piece);
                }
                "interpolation" => {
                    out.has_interpolation = true;
                    out.pieces.push(String::new());
                }
                _ => {}
            }
        }
    }
    Some(out)
}

/// Python escape sequences of a non-raw literal (the common ones; others stay as written).
fn decode_escapes(t: &str) -> String {
    let mut out = String::with_capacity(t.len());
    let mut it = t.chars().peekable();
    while let Some(ch) = it.next() {
        if ch != '\\' {
            out.push(ch);
            continue;
        }
        let Some(e) = it.next() else {
            out.push('\\');
            break;
        };
        match e {
            'n' => out.push('\n'),
            't' => out.push('\t'),
            'r' => out.push('\r'),
            '0' => out.push('\0'),
            '\\' => out.push('\\'),
            '\'' => out.push('\''),
            '"' => out.push('"'),
            '\n' => {}
            'a' => out.push('\x07'),
            'b' => out.push('\x08'),
            'f' => out.push('\x0c'),
            'v' => out.push('\x0b'),
            'x' | 'u' | 'U' => {
                let len = match e {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                };
                let hex: String = (0..len).filter_map(|_| it.next()).collect();
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(c) => out.push(c),
                    None => {
                        out.push('\\');
                        out.push(e);
                        out.push_str(&hex);
                    }
                }
            }
            other => {
                out.push('\\');
                out.push(other);
            }
        }
    }
    out
}

/// The value of `n` when Python's `ast` would make it an `ast.Constant`.
pub fn constant(file: &PyFile, n: Node) -> Option<Lit> {
    let n = unparen(n);
    match n.kind() {
        "string" | "concatenated_string" => {
            let p = string_parts(file, n)?;
            if p.fstring {
                return None; // JoinedStr, even without interpolation
            }
            let s = p.pieces.concat();
            Some(if p.bytes { Lit::Bytes(s) } else { Lit::Str(s) })
        }
        "integer" => Some(parse_int(file.text(n))),
        "float" => Some(
            file.text(n)
                .replace('_', "")
                .parse::<f64>()
                .map(Lit::Float)
                .unwrap_or(Lit::Other),
        ),
        "true" => Some(Lit::Bool(true)),
        "false" => Some(Lit::Bool(false)),
        "none" => Some(Lit::None),
        "ellipsis" => Some(Lit::Other),
        _ => None,
    }
}

fn parse_int(t: &str) -> Lit {
    let t = t.replace('_', "").to_ascii_lowercase();
    if t.ends_with('j') || t.ends_with('l') {
        return Lit::Other;
    }
    let (digits, radix) = if let Some(r) = t.strip_prefix("0x") {
        (r.to_string(), 16)
    } else if let Some(r) = t.strip_prefix("0o") {
        (r.to_string(), 8)
    } else if let Some(r) = t.strip_prefix("0b") {
        (r.to_string(), 2)
    } else {
        (t.clone(), 10)
    };
    i128::from_str_radix(&digits, radix)
        .map(Lit::Int)
        .unwrap_or(Lit::Other)
}

/// Roughly `ast.unparse`: dotted chains of names as `a.b.c`, anything else as written.
pub(crate) fn unparse(file: &PyFile, n: Node) -> String {
    let n = unparen(n);
    match n.kind() {
        "identifier" => file.text(n).to_string(),
        "attribute" => {
            let obj = n.child_by_field_name("object").map(|o| unparse(file, o));
            let attr = n
                .child_by_field_name("attribute")
                .map(|a| file.text(a).to_string())
                .unwrap_or_default();
            match obj {
                Some(o) => format!("{o}.{attr}"),
                None => attr,
            }
        }
        _ => file.text(n).to_string(),
    }
}

/// Whether an `identifier` node stands where Python's `ast` has an `ast.Name` (and not an
/// attribute name, keyword, parameter, definition name or import path).
pub(crate) fn is_name_position(n: Node) -> bool {
    let Some(p) = n.parent() else {
        return true;
    };
    let is_field = |field: &str| {
        p.child_by_field_name(field)
            .is_some_and(|c| c.id() == n.id())
    };
    match p.kind() {
        "attribute" => !is_field("attribute"),
        "keyword_argument" => !is_field("name"),
        "function_definition" | "class_definition" => !is_field("name"),
        "default_parameter" | "typed_default_parameter" => !is_field("name"),
        "parameters" | "lambda_parameters" | "typed_parameter" => false,
        "list_splat_pattern" | "dictionary_splat_pattern" => !p.parent().is_some_and(|g| {
            matches!(
                g.kind(),
                "parameters" | "lambda_parameters" | "typed_parameter"
            )
        }),
        "dotted_name" | "aliased_import" | "global_statement" | "nonlocal_statement" => false,
        _ => true,
    }
}

/// Module path of a `dotted_name` node, `a.b.c`.
pub(crate) fn dotted_name(file: &PyFile, n: Node) -> String {
    named_children(n)
        .into_iter()
        .filter(|c| c.kind() == "identifier")
        .map(|c| file.text(c))
        .collect::<Vec<_>>()
        .join(".")
}

/// One import as Python sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum Import {
    /// `import a.b` (`alias` None) or `import a.b as x`.
    Module {
        module: String,
        alias: Option<String>,
    },
    /// `from m import n [as k]`; `level` counts leading dots (relative imports).
    From {
        module: Option<String>,
        level: usize,
        name: String,
        alias: Option<String>,
    },
    /// `from m import *`.
    Star {
        module: Option<String>,
        level: usize,
    },
}

/// The imports of one `import_statement`, `import_from_statement` or
/// `future_import_statement`.
pub(crate) fn imports_of(file: &PyFile, stmt: Node) -> Vec<Import> {
    let mut out = Vec::new();
    let mut c = stmt.walk();
    match stmt.kind() {
        "import_statement" => {
            for n in stmt.children_by_field_name("name", &mut c) {
                match n.kind() {
                    "dotted_name" => out.push(Import::Module {
                        module: dotted_name(file, n),
                        alias: None,
                    }),
                    "aliased_import" => {
                        let module = n
                            .child_by_field_name("name")
                            .map(|d| dotted_name(file, d))
                            .unwrap_or_default();
                        let alias = n.child_by_field_name("alias").map(|a| file.text(a).into());
                        out.push(Import::Module { module, alias });
                    }
                    _ => {}
                }
            }
        }
        "import_from_statement" | "future_import_statement" => {
            let (module, level) = if stmt.kind() == "future_import_statement" {
                (Some("__future__".to_string()), 0)
            } else {
                match stmt.child_by_field_name("module_name") {
                    Some(m) if m.kind() == "dotted_name" => (Some(dotted_name(file, m)), 0),
                    Some(m) => {
                        let kids = named_children(m);
                        let level = kids
                            .iter()
                            .find(|k| k.kind() == "import_prefix")
                            .map(|k| file.text(*k).chars().filter(|c| *c == '.').count())
                            .unwrap_or(0);
                        let module = kids
                            .iter()
                            .find(|k| k.kind() == "dotted_name")
                            .map(|k| dotted_name(file, *k));
                        (module, level)
                    }
                    None => (None, 0),
                }
            };
            let kids = named_children(stmt);
            if kids.iter().any(|k| k.kind() == "wildcard_import") {
                out.push(Import::Star { module, level });
                return out;
            }
            for n in stmt.children_by_field_name("name", &mut c) {
                let (name, alias) = match n.kind() {
                    "dotted_name" => (dotted_name(file, n), None),
                    "aliased_import" => (
                        n.child_by_field_name("name")
                            .map(|d| dotted_name(file, d))
                            .unwrap_or_default(),
                        n.child_by_field_name("alias").map(|a| file.text(a).into()),
                    ),
                    _ => continue,
                };
                out.push(Import::From {
                    module: module.clone(),
                    level,
                    name,
                    alias,
                });
            }
        }
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first<'t>(f: &'t PyFile, kind: &str) -> Node<'t> {
        fn find<'t>(n: Node<'t>, kind: &str) -> Option<Node<'t>> {
            if n.kind() == kind {
                return Some(n);
            }
            let mut c = n.walk();
            let kids: Vec<Node<'t>> = n.children(&mut c).collect();
            kids.into_iter().find_map(|k| find(k, kind))
        }
        find(f.root(), kind).unwrap()
    }

    #[test]
    fn constants_mirror_ast() {
        let f = PyFile::parse("x = ('a' 'b\\n')\n");
        let s = first(&f, "concatenated_string");
        assert_eq!(constant(&f, s), Some(Lit::Str("ab\n".into())));
        let f = PyFile::parse("x = f'a{b}'\n");
        assert_eq!(constant(&f, first(&f, "string")), None);
        let f = PyFile::parse("x = 0o777\n");
        assert_eq!(constant(&f, first(&f, "integer")), Some(Lit::Int(0o777)));
        let f = PyFile::parse("x = rb'\\x'\n");
        assert_eq!(
            constant(&f, first(&f, "string")),
            Some(Lit::Bytes("\\x".into()))
        );
    }

    #[test]
    fn imports_are_read() {
        let f = PyFile::parse("from .a.b import c as d\nimport os.path, sys as s\n");
        let i = imports_of(&f, first(&f, "import_from_statement"));
        assert_eq!(
            i,
            vec![Import::From {
                module: Some("a.b".into()),
                level: 1,
                name: "c".into(),
                alias: Some("d".into())
            }]
        );
        let i = imports_of(&f, first(&f, "import_statement"));
        assert_eq!(i.len(), 2);
    }
}
