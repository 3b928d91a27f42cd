//! L0: syntactic validity. The final snapshot must parse; every syntax error is reported
//! with its location.

use crate::py::{self, PyFile};
use tree_sitter::Node;

/// One syntax error.
#[derive(Debug, Clone, PartialEq)]
pub struct SyntaxError {
    /// 1-based.
    pub line: usize,
    pub col: usize,
    /// `ERROR` (unparseable text), `MISSING` (a token the parser had to invent), `PY2`
    /// (Python 2 syntax that tree-sitter accepts and Python 3 rejects) or `PYTHON` (where
    /// the interpreter locates the error, when that is not where tree-sitter's first error
    /// starts).
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

/// Where Python's compiler puts a syntax error: line, column (both 1-based), message.
pub type PythonError = (usize, usize, String);

/// Python's own account of where each source fails to compile: `(line, col, message)`, or
/// `None` when Python compiles it. One subprocess for every source; `Err` when `python`
/// cannot be run (then tree-sitter's locations stand).
///
/// Tree-sitter decides L0 (paper §3.2.4), but its error recovery may wrap a whole class in
/// one ERROR node that starts far above the mistake; the interpreter names the real line.
pub(crate) fn python_locations(
    python: &std::path::Path,
    sources: &[&str],
    task: &str,
    wall: std::time::Duration,
) -> Result<Vec<Option<PythonError>>, crate::ToolError> {
    let unexpected = |what: String| crate::ToolError::Start {
        tool: python.display().to_string(),
        cause: what,
    };
    const PROG: &str = r#"import json, sys
out = []
for src in json.load(sys.stdin):
    try:
        compile(src, "<final>", "exec", dont_inherit=True)
        out.append(None)
    except SyntaxError as e:
        out.append([e.lineno or 1, e.offset or 1, e.msg])
    except Exception:
        out.append(None)
json.dump(out, sys.stdout)
"#;
    let mut cmd = sage_sandbox::child::command(python);
    cmd.args(["-c", PROG]);
    let input = serde_json::to_vec(sources).map_err(|e| unexpected(e.to_string()))?;
    let tool = python.display().to_string();
    let out = crate::tool::ask(cmd, &tool, task, Some(input), wall)?;
    if !out.status.success() {
        return Err(unexpected(format!("it failed ({})", out.status)));
    }
    let v: Vec<Option<PythonError>> = serde_json::from_slice(&out.stdout)
        .map_err(|e| unexpected(format!("unexpected output: {e}")))?;
    if v.len() != sources.len() {
        return Err(unexpected("unexpected output".into()));
    }
    Ok(v)
}

/// Put Python's location first when it lies elsewhere than tree-sitter's first error.
pub(crate) fn relocate(errors: &mut Vec<SyntaxError>, python: Option<&PythonError>) {
    let (Some((line, col, msg)), Some(first)) = (python, errors.first()) else {
        return;
    };
    if first.line == *line {
        return;
    }
    errors.insert(
        0,
        SyntaxError {
            line: *line,
            col: *col,
            node: "PYTHON".into(),
            message: msg.clone(),
        },
    );
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
