//! The command rules (`data/commands.toml`): which tools are shells, which commands are never
//! executed (and why), which written paths are never kept, and the volatile parts of an
//! output; and the comparison of a command's output with the one the trace recorded.

use regex::Regex;
use serde::Deserialize;

/// The embedded rules.
pub const EMBEDDED_RULES: &str = include_str!("../data/commands.toml");

/// The rules' schema version this build reads.
pub const RULES_VERSION: u32 = 1;

/// Why a rules file cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum RulesError {
    /// Not TOML of the rules' schema.
    #[error("command rules: {0}")]
    Toml(#[from] toml::de::Error),
    /// A pattern that is not a regular expression.
    #[error("command rules: class or volatile part {name}: bad pattern {pattern:?}: {source}")]
    Pattern {
        /// The class or volatile part.
        name: String,
        /// The pattern.
        pattern: String,
        /// The cause.
        source: regex::Error,
    },
    /// Another schema version.
    #[error("command rules: version {0}, this sage reads version 1")]
    Version(u32),
}

#[derive(Deserialize)]
struct RawRules {
    version: u32,
    #[serde(default)]
    shell_tools: Vec<String>,
    #[serde(default)]
    python_tools: Vec<String>,
    #[serde(default)]
    ignore_written: Vec<String>,
    #[serde(default)]
    class: Vec<RawClass>,
    #[serde(default)]
    volatile: Vec<RawVolatile>,
}

#[derive(Deserialize)]
struct RawClass {
    name: String,
    #[serde(default)]
    any: bool,
    reason: String,
    patterns: Vec<String>,
}

#[derive(Deserialize)]
struct RawVolatile {
    name: String,
    pattern: String,
}

#[derive(Debug, Clone)]
struct Class {
    name: String,
    any: bool,
    reason: String,
    patterns: Vec<Regex>,
}

/// The command rules, read.
#[derive(Debug, Clone)]
pub struct Rules {
    shell_tools: Vec<String>,
    python_tools: Vec<String>,
    ignore_written: Vec<String>,
    classes: Vec<Class>,
    volatile: Vec<(String, Regex)>,
}

/// Whether a command line is executed, and if not, why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Run it in the sandbox.
    Execute,
    /// Never run: the class's name (`read-only`, `test-runner`, ...) and its reason.
    Refuse {
        /// The class.
        kind: String,
        /// The class's reason.
        reason: String,
    },
}

/// A command's output against the recorded one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OutputCheck {
    /// The output appears whole, as consecutive lines, in the recorded output (volatile
    /// parts masked on both sides).
    Equal,
    /// It does not: the first line that differs, as run and as recorded.
    Differs {
        /// 1-based line of the command's output.
        line: usize,
        /// The line as the sandbox printed it.
        ran: String,
        /// The recorded line at that place (empty when the recorded output ends first).
        recorded: String,
    },
    /// Nothing to compare: the command printed nothing, or the trace recorded no output.
    NotComparable(&'static str),
}

fn rx(name: &str, p: &str) -> Result<Regex, RulesError> {
    Regex::new(p).map_err(|source| RulesError::Pattern {
        name: name.to_string(),
        pattern: p.to_string(),
        source,
    })
}

impl Rules {
    /// The embedded rules.
    pub fn embedded() -> Rules {
        Rules::parse(EMBEDDED_RULES).expect("the embedded command rules are valid")
    }

    /// Rules from a TOML text of the schema of `data/commands.toml`.
    pub fn parse(text: &str) -> Result<Rules, RulesError> {
        let raw: RawRules = toml::from_str(text)?;
        if raw.version != RULES_VERSION {
            return Err(RulesError::Version(raw.version));
        }
        let mut classes = Vec::new();
        for c in raw.class {
            let patterns = c
                .patterns
                .iter()
                .map(|p| rx(&c.name, p))
                .collect::<Result<_, _>>()?;
            classes.push(Class {
                name: c.name,
                any: c.any,
                reason: c.reason,
                patterns,
            });
        }
        let volatile = raw
            .volatile
            .into_iter()
            .map(|v| Ok((v.name.clone(), rx(&v.name, &v.pattern)?)))
            .collect::<Result<_, RulesError>>()?;
        Ok(Rules {
            shell_tools: raw.shell_tools,
            python_tools: raw.python_tools,
            ignore_written: raw.ignore_written,
            classes,
            volatile,
        })
    }

    /// Whether calls of the tool `name` are shell command lines.
    pub fn is_shell_tool(&self, name: &str) -> bool {
        self.shell_tools.iter().any(|t| t == name)
    }

    /// Whether calls of the tool `name` are Python code (an IPython cell).
    pub fn is_python_tool(&self, name: &str) -> bool {
        self.python_tools.iter().any(|t| t == name)
    }

    /// Whether a path a command wrote is never kept as a write (a cache, a compiled file).
    pub fn ignores_written(&self, path: &str) -> bool {
        self.ignore_written.iter().any(|i| {
            path.split('/').any(|part| part == i) || (i.starts_with('.') && path.ends_with(i))
        })
    }

    /// Whether the command line `command` is executed.
    pub fn decide(&self, command: &str) -> Decision {
        let simple = simple_commands(command);
        if simple.is_empty() {
            return self.refuse("read-only").unwrap_or(Decision::Execute);
        }
        for c in self.classes.iter().filter(|c| c.any) {
            if simple
                .iter()
                .any(|s| c.patterns.iter().any(|p| p.is_match(s)))
            {
                return Decision::Refuse {
                    kind: c.name.clone(),
                    reason: c.reason.clone(),
                };
            }
        }
        for c in self.classes.iter().filter(|c| !c.any) {
            if simple
                .iter()
                .all(|s| !redirects_to_file(s) && c.patterns.iter().any(|p| p.is_match(s)))
            {
                return Decision::Refuse {
                    kind: c.name.clone(),
                    reason: c.reason.clone(),
                };
            }
        }
        Decision::Execute
    }

    fn refuse(&self, kind: &str) -> Option<Decision> {
        self.classes
            .iter()
            .find(|c| c.name == kind)
            .map(|c| Decision::Refuse {
                kind: c.name.clone(),
                reason: c.reason.clone(),
            })
    }

    /// `text` with every volatile part replaced by `<name>`.
    pub fn mask(&self, text: &str) -> String {
        let mut t = text.to_string();
        for (name, r) in &self.volatile {
            t = r.replace_all(&t, format!("<{name}>").as_str()).into_owned();
        }
        t
    }

    /// Compare the command's output with the output the trace recorded for it. The recorded
    /// output may wrap the command's (a return-code line before it, a framework's note after
    /// it), so the command's lines must appear in it, consecutively; trailing blanks on a line
    /// and blank lines at either end are ignored, volatile parts are masked on both sides.
    pub fn compare_output(&self, ran: &str, recorded: Option<&str>) -> OutputCheck {
        let ran_m = self.mask(ran);
        let ran_lines = trimmed_lines(&ran_m);
        if ran_lines.is_empty() {
            return OutputCheck::NotComparable("the command printed nothing");
        }
        let Some(recorded) = recorded else {
            return OutputCheck::NotComparable("the trace recorded no output for the command");
        };
        let rec_m = self.mask(recorded);
        let rec: Vec<&str> = rec_m.lines().map(str::trim_end).collect();
        // The longest run of equal lines from the command's first line, at any start.
        let mut best = (0usize, 0usize); // (matched lines, start in recorded)
        for start in 0..rec.len() {
            let n = ran_lines
                .iter()
                .zip(&rec[start..])
                .take_while(|(a, b)| a == b)
                .count();
            if n > best.0 {
                best = (n, start);
            }
            if n == ran_lines.len() {
                return OutputCheck::Equal;
            }
        }
        let (n, start) = best;
        OutputCheck::Differs {
            line: n + 1,
            ran: ran_lines[n].to_string(),
            recorded: if n == 0 {
                rec.iter()
                    .find(|l| !l.is_empty())
                    .map(|l| l.to_string())
                    .unwrap_or_default()
            } else {
                rec.get(start + n)
                    .map(|l| l.to_string())
                    .unwrap_or_default()
            },
        }
    }
}

fn trimmed_lines(s: &str) -> Vec<&str> {
    let v: Vec<&str> = s.lines().map(str::trim_end).collect();
    let first = v.iter().position(|l| !l.is_empty()).unwrap_or(v.len());
    let last = v.iter().rposition(|l| !l.is_empty()).map_or(0, |i| i + 1);
    if first >= last {
        Vec::new()
    } else {
        v[first..last].to_vec()
    }
}

/// Whether a simple command sends its output to a file (`> f`, `>> f`, `tee f`), which makes
/// it a writer whatever the program.
fn redirects_to_file(s: &str) -> bool {
    let mut q: Option<char> = None;
    let b: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        match q {
            Some(open) if c == open => q = None,
            Some(_) => {}
            None if c == '\'' || c == '"' => q = Some(c),
            None if c == '>' => {
                let rest: String = b[i + 1..].iter().collect();
                let rest = rest.trim_start_matches('>').trim_start();
                if !(rest.starts_with("&") || rest.starts_with("/dev/null")) {
                    return true;
                }
            }
            None => {}
        }
        i += 1;
    }
    s.split_whitespace().next() == Some("tee")
        || s.split_whitespace().any(|w| w == "tee") && !s.contains("tee /dev/null")
}

/// The simple commands of a command line: split at `&&`, `||`, `;`, `|` and new lines
/// outside quotes, heredoc bodies dropped, leading `VAR=value`, `sudo`, `env`, `command`,
/// `timeout N` and `(`/`{` removed; empty ones and comments dropped.
pub fn simple_commands(line: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut cur = String::new();
    let mut q: Option<char> = None;
    let mut heredocs: Vec<String> = Vec::new();
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    let flush = |cur: &mut String, out: &mut Vec<String>| {
        let s = strip_prefixes(cur.trim());
        if !s.is_empty() && !s.starts_with('#') {
            out.push(s);
        }
        cur.clear();
    };
    while i < chars.len() {
        let c = chars[i];
        if let Some(open) = q {
            if c == '\\' && open == '"' && i + 1 < chars.len() {
                cur.push(c);
                cur.push(chars[i + 1]);
                i += 2;
                continue;
            }
            if c == open {
                q = None;
            }
            cur.push(c);
            i += 1;
            continue;
        }
        match c {
            '\'' | '"' => {
                q = Some(c);
                cur.push(c);
            }
            '\\' if i + 1 < chars.len() => {
                if chars[i + 1] != '\n' {
                    cur.push(c);
                    cur.push(chars[i + 1]);
                }
                i += 1;
            }
            '<' if chars.get(i + 1) == Some(&'<') && chars.get(i + 2) != Some(&'<') => {
                // a heredoc: remember its delimiter, skip its body at the next new line
                let mut j = i + 2;
                if chars.get(j) == Some(&'-') {
                    j += 1;
                }
                while chars.get(j) == Some(&' ') {
                    j += 1;
                }
                let mut word = String::new();
                while let Some(&d) = chars.get(j) {
                    if d.is_whitespace() || ";&|)<>".contains(d) {
                        break;
                    }
                    if d != '\'' && d != '"' {
                        word.push(d);
                    }
                    j += 1;
                }
                if !word.is_empty() {
                    heredocs.push(word);
                }
                cur.extend(&chars[i..j]);
                i = j;
                continue;
            }
            '\n' => {
                flush(&mut cur, &mut out);
                // skip the bodies of the heredocs opened on this line
                for word in std::mem::take(&mut heredocs) {
                    while i + 1 < chars.len() {
                        let end = chars[i + 1..]
                            .iter()
                            .position(|&c| c == '\n')
                            .map_or(chars.len(), |p| i + 1 + p);
                        let body_line: String = chars[i + 1..end].iter().collect();
                        i = end;
                        if body_line.trim() == word {
                            break;
                        }
                    }
                }
            }
            ';' | '|' | '&' => {
                flush(&mut cur, &mut out);
                if chars.get(i + 1) == Some(&c) {
                    i += 1;
                }
            }
            '(' | ')' | '{' | '}' if cur.trim().is_empty() || c == ')' || c == '}' => {
                flush(&mut cur, &mut out);
            }
            _ => cur.push(c),
        }
        i += 1;
    }
    flush(&mut cur, &mut out);
    out
}

fn strip_prefixes(s: &str) -> String {
    let mut words: Vec<&str> = s.split_whitespace().collect();
    loop {
        match words.first() {
            Some(w) if w.contains('=') && !w.starts_with('=') && !w.starts_with('-') => {
                words.remove(0);
            }
            Some(&"sudo") | Some(&"env") | Some(&"command") | Some(&"exec") | Some(&"nohup")
            | Some(&"time") => {
                words.remove(0);
            }
            Some(&"timeout") => {
                words.remove(0);
                while words.first().is_some_and(|w| w.starts_with('-')) {
                    words.remove(0);
                }
                if !words.is_empty() {
                    words.remove(0);
                }
            }
            _ => break,
        }
    }
    if words.is_empty() {
        return String::new();
    }
    // keep the original spacing after the prefixes
    let first = words[0];
    match s.find(first) {
        Some(at) if s[at..].split_whitespace().count() == words.len() => s[at..].to_string(),
        _ => words.join(" "),
    }
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;
