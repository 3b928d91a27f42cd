//! L0: syntactic validity. The final snapshot must parse; every syntax error is reported
//! with its location.

use crate::py::{self, PyFile};
use serde::{Deserialize, Serialize};
use tree_sitter::Node;

/// One syntax error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SyntaxError {
    /// 1-based.
    pub line: usize,
    pub col: usize,
    /// `ERROR` (unparseable text), `MISSING` (a token the parser had to invent) or `PY2`
    /// (Python 2 syntax that tree-sitter accepts and Python 3 rejects).
    pub node: String,
    pub message: String,
}

/// Every syntax error of `file`, in document order.
pub fn check(file: &PyFile) -> Vec<SyntaxError> {
    let mut out = Vec::new();
    if file.root().has_error() || file.src.contains("print") || file.src.contains("exec") {
        walk(file, file.root(), &mut out);
    }
    out
}

fn walk(file: &PyFile, n: Node, out: &mut Vec<SyntaxError>) {
    let (line, col) = py::position(file, n);
    if n.is_missing() {
        out.push(SyntaxError {
            line,
            col,
            node: "MISSING".into(),
            message: format!("missing {}", n.kind()),
        });
        return;
    }
    if n.is_error() {
        let text: String = file.text(n).chars().take(40).collect();
        let text = text.lines().next().unwrap_or("").trim().to_string();
        out.push(SyntaxError {
            line,
            col,
            node: "ERROR".into(),
            message: if text.is_empty() {
                "unexpected end of input".into()
            } else {
                format!("unexpected `{text}`")
            },
        });
        // Report MISSING tokens inside the error region too; they point at the cause.
        let mut c = n.walk();
        for k in n.children(&mut c) {
            if k.is_missing() {
                walk(file, k, out);
            }
        }
        return;
    }
    if matches!(n.kind(), "print_statement" | "exec_statement") {
        out.push(SyntaxError {
            line,
            col,
            node: "PY2".into(),
            message: format!(
                "Python 2 `{}` statement",
                n.kind().trim_end_matches("_statement")
            ),
        });
    }
    let mut c = n.walk();
    for k in n.children(&mut c) {
        walk(file, k, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_file_has_no_errors() {
        assert!(check(&PyFile::parse("def f(x):\n    return x + 1\n")).is_empty());
    }

    #[test]
    fn errors_are_located() {
        let e = check(&PyFile::parse("def f(x):\n    return (x +\n\ny = 2\n"));
        assert!(!e.is_empty());
        assert!(e.iter().all(|e| e.line >= 1 && e.col >= 1), "{e:?}");
        let e = check(&PyFile::parse("x = 1\nif x\n    pass\n"));
        assert_eq!(e[0].line, 2, "{e:?}");
    }

    #[test]
    fn modern_syntax_is_valid() {
        let src = "type Alias = list[int]\ndef f[T](x: T) -> T:\n    match x:\n        case {\"k\": [1, *rest]} if rest:\n            pass\n        case _:\n            pass\n    if (n := len(str(x))) > 3:\n        print(f\"{x!r:>{n}} {x[\"k\"]}\")\n    try:\n        pass\n    except* ValueError:\n        pass\n    return x\n";
        assert_eq!(check(&PyFile::parse(src)), vec![]);
    }

    #[test]
    fn python2_print_is_an_error() {
        let e = check(&PyFile::parse("print \"hi\"\n"));
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].node, "PY2");
        assert!(check(&PyFile::parse("print(\"hi\")\n")).is_empty());
    }
}
