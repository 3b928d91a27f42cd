//! The data-driven mapping engine: formats whose messages are only field paths.
//!
//! A mapping file (`adapters/*.toml`, format in `docs/adapters.md`) says where the message list
//! is, which field holds the actor, the role, the text, the tool calls and the tool results,
//! which messages are user/task messages (not agent turns), which are administrative, how
//! actors map to turn kinds, which tool calls are writes, and how to detect the format. The
//! engine turns every message into a canonical turn (or a tool result, or a dropped record),
//! keeping a JSON pointer to the raw value of every item.
//!
//! Input shapes: one JSON document (whole file), JSON Lines (one document per line, read line
//! by line with `BufRead`), or concatenated pretty-printed JSON documents. In each document the
//! message list is found through `messages.lists`; a document with no list is itself one
//! message.

use crate::support::TraceBuilder;
use crate::{edits, AdapterError, SourceFile};
use regex::Regex;
use sage_trace::Actor;
use sage_trace::{
    json_pointer, CanonicalTrace, RawRef, TextItem, ToolCall, ToolResult, Turn, TurnKind, Write,
    WriteOp,
};
use serde::Deserialize;
use serde_json::Value;
use std::io::BufRead;

/// Reason recorded for user/task messages, which are not canonical turns.
pub const NOT_AGENT_AUTHORED: &str = "not agent-authored: task/user message";

/// A mapping file as written (TOML).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MappingFile {
    pub adapter: AdapterMeta,
    #[serde(default)]
    pub detect: Vec<DetectRule>,
    pub messages: MessageMap,
    #[serde(default)]
    pub roles: RoleMap,
    #[serde(default)]
    pub tool_calls: Vec<ToolCallMap>,
    #[serde(default)]
    pub tool_results: ToolResultMap,
    #[serde(default)]
    pub code_execution: Option<CodeExecMap>,
    #[serde(default)]
    pub administrative: Vec<MatchRule>,
    #[serde(default)]
    pub kinds: Vec<MatchRule>,
    #[serde(default)]
    pub writes: Vec<WriteRule>,
    /// Workspace roots stripped from absolute paths (read by code adapters that use them).
    #[serde(default)]
    pub paths: PathsMap,
    /// Agent framework name → tool names that identify it (read by code adapters).
    #[serde(default)]
    pub agents: std::collections::BTreeMap<String, Vec<String>>,
}

/// Where the task's repository lives in the agent's sandbox.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct PathsMap {
    /// Absolute roots (`/project`); paths under one are named relative to it.
    #[serde(default)]
    pub roots: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AdapterMeta {
    /// Adapter name (`--framework NAME`).
    pub name: String,
    /// Mapping file version (bump on every change).
    pub version: String,
    /// Framework versions and format eras covered.
    pub covers: String,
    /// Kind of a turn no rule classifies (default `planning`; a turn with writes is
    /// `implementation`).
    #[serde(default)]
    pub default_kind: Option<String>,
}

pub use crate::rules::DetectRule;

/// Where messages are and which of their fields mean what (JSON pointers, first present wins).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MessageMap {
    /// Pointers (in a document) to the message array; `""` = the document is the array.
    #[serde(default)]
    pub lists: Vec<String>,
    /// Pointers (in a message) to the object holding its fields (`/kwargs` for LangChain
    /// `dumpd`, `/data` for `messages_to_dict`, `""` = the message itself).
    #[serde(default = "root_only")]
    pub base: Vec<String>,
    /// The agent's name.
    #[serde(default)]
    pub actor: Vec<String>,
    /// The name of an agent whose messages carry none (else the role is used).
    #[serde(default)]
    pub default_actor: Option<String>,
    /// Optional regex with groups `name` and `role` applied to the actor string
    /// (`Orchestrator (thought)` → name `Orchestrator`, role `thought`).
    #[serde(default)]
    pub actor_pattern: Option<String>,
    /// The role (`assistant`, `user`, `tool`, `ai`, ...).
    #[serde(default)]
    pub role: Vec<String>,
    /// The text: a string, or a list of content blocks.
    #[serde(default)]
    pub text: Vec<String>,
    /// In a content block: the type field, the text field and the types that hold text.
    #[serde(default = "block_type")]
    pub block_type: String,
    #[serde(default = "block_text")]
    pub block_text: String,
    #[serde(default = "block_text_types")]
    pub block_text_types: Vec<String>,
}

fn root_only() -> Vec<String> {
    vec![String::new()]
}
fn block_type() -> String {
    "/type".into()
}
fn block_text() -> String {
    "/text".into()
}
fn block_text_types() -> Vec<String> {
    vec!["text".into()]
}

/// Which roles and names are not agents.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct RoleMap {
    /// Role values of user/task messages (dropped: not agent-authored).
    #[serde(default)]
    pub user: Vec<String>,
    /// Regex on the actor name of user/task messages (`^(user_proxy|human)$`).
    #[serde(default)]
    pub user_names: Option<String>,
    /// Role values of tool results (attached to the turn that made the call).
    #[serde(default)]
    pub tool: Vec<String>,
    /// Role values of system messages (kept as administrative turns).
    #[serde(default)]
    pub system: Vec<String>,
}

/// Where a message's tool calls are.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCallMap {
    /// Pointer (in the message base) to the array of calls.
    pub list: String,
    /// Only elements whose `type_field` equals `type_value` (content blocks).
    #[serde(default)]
    pub type_field: Option<String>,
    #[serde(default)]
    pub type_value: Option<String>,
    pub name: Vec<String>,
    pub args: Vec<String>,
    #[serde(default)]
    pub id: Vec<String>,
}

/// Tool results: whole messages with a tool role, and/or a list inside a message.
#[derive(Debug, Clone, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ToolResultMap {
    /// Pointer (in the message base) to an array of results (`/tool_responses`).
    #[serde(default)]
    pub list: Option<String>,
    #[serde(default)]
    pub call_id: Vec<String>,
    #[serde(default)]
    pub text: Vec<String>,
    /// Pointer to a field that marks an error when it equals `error_value`.
    #[serde(default)]
    pub error_field: Option<String>,
    #[serde(default)]
    pub error_value: Option<String>,
}

/// Code blocks executed by an executor agent (AG2/AutoGen): a message whose text matches
/// `output` is the execution result of the code blocks of the latest agent turn that has
/// any; those blocks become tool calls, and a block whose first line is
/// `# filename: <path>` becomes a full-content write of that file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CodeExecMap {
    pub output: String,
    /// Tool name given to executed code blocks.
    #[serde(default = "exec_tool")]
    pub tool: String,
    #[serde(default = "yes")]
    pub filename_comment: bool,
}
fn exec_tool() -> String {
    "execute_code".into()
}
fn yes() -> bool {
    true
}

/// A rule matching a message (all given regexes must match); `kind` for `[[kinds]]`,
/// `reason` for `[[administrative]]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MatchRule {
    #[serde(default)]
    pub actor: Option<String>,
    #[serde(default)]
    pub role: Option<String>,
    #[serde(default)]
    pub text: Option<String>,
    /// Regex on the names of the turn's tool calls (any).
    #[serde(default)]
    pub tool: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
}

/// A tool call that writes an artefact. Argument paths are pointers into the call's
/// arguments (parsed when they are a JSON string).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteRule {
    /// Tool names this rule applies to.
    pub tools: Vec<String>,
    /// Only when the argument at `when_field` equals `when_value` (`/command` = `create`).
    #[serde(default)]
    pub when_field: Option<String>,
    #[serde(default)]
    pub when_value: Option<String>,
    /// `full-content`, `str-replace`, `search-replace`, `insert`, `delete`, `shell`
    /// (plain shell edits in a command), `apply-patch` (`*** Begin Patch`), `unified-diff`,
    /// `restore` (an undo whose tool result prints the whole file; code adapters only).
    pub op: String,
    #[serde(default)]
    pub path: Vec<String>,
    #[serde(default)]
    pub content: Vec<String>,
    #[serde(default)]
    pub old: Vec<String>,
    #[serde(default)]
    pub new: Vec<String>,
    #[serde(default)]
    pub all: Vec<String>,
    #[serde(default)]
    pub line: Vec<String>,
    /// For `shell`/`apply-patch`: the command or patch text.
    #[serde(default)]
    pub command: Vec<String>,
}

/// A parse error in a mapping file.
#[derive(Debug, thiserror::Error)]
#[error("mapping {origin}: {message}")]
pub struct MappingError {
    pub origin: String,
    pub message: String,
}

/// A checked mapping, regexes compiled.
#[derive(Debug, Clone)]
pub struct Mapping {
    pub file: MappingFile,
    /// Where it came from (`crates/sage-adapters/mappings/ag2.toml (embedded)` or the user's path).
    pub origin: String,
    actor_pattern: Option<Pattern>,
    user_names: Option<Pattern>,
    code_output: Option<Pattern>,
    admin: Vec<CompiledRule>,
    kinds: Vec<CompiledRule>,
    default_kind: TurnKind,
}

#[derive(Debug, Clone)]
struct CompiledRule {
    actor: Option<Pattern>,
    role: Option<Pattern>,
    text: Option<Pattern>,
    tool: Option<Pattern>,
    kind: Option<TurnKind>,
}

/// The literals each pattern of the embedded files needs (computed by `build.rs`): a name or
/// message that has none of a pattern's is answered without compiling it.
const NEEDS: sage_trace::pattern::Needs = include!(concat!(env!("OUT_DIR"), "/needs.rs"));

/// A mapping's regex, compiled on first use when the mapping is embedded (every embedded
/// mapping is parsed at start-up for detection, and a run uses one adapter's patterns), at
/// parse time for a mapping file (a bad pattern is reported there). Clones share it.
#[derive(Debug, Clone)]
struct Pattern {
    src: String,
    re: std::sync::Arc<std::sync::OnceLock<Regex>>,
    /// The pattern for ASCII text (it compiles several times faster): most names and
    /// messages need no other.
    ascii: sage_trace::pattern::AsciiPatterns,
}

impl Pattern {
    fn is_match(&self, text: &str) -> bool {
        self.ascii
            .is_match(text)
            .unwrap_or_else(|| (**self).is_match(text))
    }
}

impl std::ops::Deref for Pattern {
    type Target = Regex;
    fn deref(&self) -> &Regex {
        self.re.get_or_init(|| {
            Regex::new(&self.src).expect("a mapping's pattern is checked when it is parsed")
        })
    }
}

impl Mapping {
    /// Parse and check a mapping file.
    pub fn parse(text: &str, origin: &str) -> Result<Mapping, MappingError> {
        Mapping::parse_opts(text, origin, true)
    }

    /// [`Mapping::parse`]; `check` false leaves the regexes to their first use (for the
    /// embedded mappings, which a unit test parses with `check`).
    fn parse_opts(text: &str, origin: &str, check: bool) -> Result<Mapping, MappingError> {
        let err = |m: String| MappingError {
            origin: origin.to_string(),
            message: m,
        };
        let file: MappingFile = toml::from_str(text).map_err(|e| err(e.to_string()))?;
        Mapping::from_file(file, origin, check)
    }

    /// The mapping of a parsed file; `check` as for [`Mapping::parse_opts`].
    fn from_file(file: MappingFile, origin: &str, check: bool) -> Result<Mapping, MappingError> {
        let err = |m: String| MappingError {
            origin: origin.to_string(),
            message: m,
        };
        let re = |s: &Option<String>, what: &str| -> Result<Option<Pattern>, MappingError> {
            s.as_deref()
                .map(|p| {
                    let cell = std::sync::OnceLock::new();
                    if check {
                        let _ = cell.set(Regex::new(p).map_err(|e| err(format!("{what}: {e}")))?);
                    }
                    Ok(Pattern {
                        src: p.to_string(),
                        re: std::sync::Arc::new(cell),
                        ascii: sage_trace::pattern::AsciiPatterns::with_needs(
                            &[p],
                            false,
                            false,
                            NEEDS,
                        ),
                    })
                })
                .transpose()
        };
        let compile = |rules: &[MatchRule],
                       need_kind: bool|
         -> Result<Vec<CompiledRule>, MappingError> {
            rules
                .iter()
                .map(|r| {
                    let kind = match &r.kind {
                        Some(k) => Some(
                            TurnKind::parse(k).ok_or_else(|| err(format!("unknown kind {k:?}")))?,
                        ),
                        None if need_kind => {
                            return Err(err("a [[kinds]] rule needs `kind`".into()))
                        }
                        None => None,
                    };
                    Ok(CompiledRule {
                        actor: re(&r.actor, "actor")?,
                        role: re(&r.role, "role")?,
                        text: re(&r.text, "text")?,
                        tool: re(&r.tool, "tool")?,
                        kind,
                    })
                })
                .collect()
        };
        if let Some(why) = file.detect.iter().find_map(|r| r.problem()) {
            return Err(err(format!("[[detect]]: {why}")));
        }
        if check {
            if let Some(why) = file.detect.iter().find_map(|r| r.lines_problem()) {
                return Err(err(format!("[[detect]]: {why}")));
            }
        }
        for w in &file.writes {
            if !matches!(
                w.op.as_str(),
                "full-content"
                    | "str-replace"
                    | "search-replace"
                    | "insert"
                    | "delete"
                    | "shell"
                    | "apply-patch"
                    | "unified-diff"
                    | "restore"
            ) {
                return Err(err(format!("unknown write op {:?}", w.op)));
            }
        }
        let default_kind = match &file.adapter.default_kind {
            Some(k) => TurnKind::parse(k).ok_or_else(|| err(format!("unknown kind {k:?}")))?,
            None => TurnKind::Planning,
        };
        Ok(Mapping {
            origin: origin.to_string(),
            actor_pattern: re(&file.messages.actor_pattern, "actor_pattern")?,
            user_names: re(&file.roles.user_names, "user_names")?,
            code_output: re(
                &file.code_execution.as_ref().map(|c| c.output.clone()),
                "code_execution.output",
            )?,
            admin: compile(&file.administrative, false)?,
            kinds: compile(&file.kinds, true)?,
            default_kind,
            file,
        })
    }

    pub fn name(&self) -> &str {
        &self.file.adapter.name
    }

    /// The compiled `roles.user_names` pattern (names of the user side).
    pub(crate) fn user_names(&self) -> Option<&Regex> {
        self.user_names.as_deref()
    }

    /// The score of this mapping's best `[[detect]]` rule on `shape`, with its evidence.
    pub fn detect(&self, shape: &crate::shape::Shape) -> Option<(u8, String)> {
        crate::rules::best_rule(&self.file.detect, shape)
    }

    /// Normalize one trace file with this mapping.
    pub fn normalize(&self, files: &[SourceFile]) -> Result<CanonicalTrace, AdapterError> {
        let main = crate::support::main_file(files)?;
        let mut run = MappingRun::new(self, files);
        for_each_document(main, |doc, line| {
            run.feed_document(&doc, line);
            Ok(())
        })?;
        Ok(run.finish())
    }
}

/// Call `f` on every JSON document of `src` with the line it starts on (`None` for a
/// whole-file document). JSON Lines are streamed line by line; a line that is not JSON is
/// reported through `f`'s caller as an error naming the line.
pub(crate) fn for_each_document(
    src: &SourceFile,
    mut f: impl FnMut(Value, Option<usize>) -> Result<(), AdapterError>,
) -> Result<(), AdapterError> {
    let shape = sniff_shape(src)?;
    match shape {
        Shape::Lines => {
            let file = std::fs::File::open(&src.path)
                .map_err(|e| AdapterError::new(&src.name, None, format!("cannot read: {e}")))?;
            let reader = std::io::BufReader::new(file);
            for (i, line) in reader.split(b'\n').enumerate() {
                let n = i + 1;
                let line = line.map_err(|e| {
                    AdapterError::new(
                        &src.name,
                        Some(format!("line {n}")),
                        format!("cannot read: {e}"),
                    )
                })?;
                let text = std::str::from_utf8(&line).map_err(|e| {
                    AdapterError::new(
                        &src.name,
                        Some(format!("line {n}, byte {}", e.valid_up_to())),
                        "not UTF-8 text",
                    )
                })?;
                if text.trim().is_empty() {
                    continue;
                }
                let v: Value = serde_json::from_str(text).map_err(|e| {
                    AdapterError::new(
                        &src.name,
                        Some(format!("line {n}, column {}", e.column())),
                        format!("not JSON: {e}"),
                    )
                })?;
                f(v, Some(n))?;
            }
            Ok(())
        }
        Shape::Whole | Shape::Concatenated => {
            let text = src.read_text()?;
            let mut it = serde_json::Deserializer::from_str(&text).into_iter::<Value>();
            let mut docs = Vec::new();
            // Newlines are counted from the previous value on, not from the file's start,
            // so many concatenated values stay linear in the file size.
            let (mut counted_to, mut line_at) = (0usize, 1usize);
            loop {
                let before = it.byte_offset();
                match it.next() {
                    None => break,
                    Some(Ok(v)) => {
                        // The value starts at the first non-space byte after `before`.
                        let start = text[before..]
                            .find(|c: char| !c.is_whitespace())
                            .map(|o| before + o)
                            .unwrap_or(before);
                        line_at += text[counted_to..start].matches('\n').count();
                        counted_to = start;
                        docs.push((v, line_at));
                    }
                    Some(Err(e)) => {
                        return Err(AdapterError::new(
                            &src.name,
                            Some(format!("line {}, column {}", e.line(), e.column())),
                            format!("not JSON: {e}"),
                        ))
                    }
                }
            }
            if docs.is_empty() {
                return Err(AdapterError::new(
                    &src.name,
                    Some("whole file".into()),
                    "no JSON value in the file",
                ));
            }
            let single = docs.len() == 1;
            for (v, line) in docs {
                f(v, if single { None } else { Some(line) })?;
            }
            Ok(())
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Shape {
    Whole,
    Lines,
    Concatenated,
}

/// JSON Lines when the first non-blank line is a complete JSON object on its own and the file
/// has more than one line; otherwise one document (or concatenated documents).
fn sniff_shape(src: &SourceFile) -> Result<Shape, AdapterError> {
    use std::io::Read;
    let mut head = Vec::new();
    std::fs::File::open(&src.path)
        .and_then(|f| f.take(crate::DETECT_BYTES as u64).read_to_end(&mut head))
        .map_err(|e| AdapterError::new(&src.name, None, format!("cannot read: {e}")))?;
    let text = String::from_utf8_lossy(&head);
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let first = lines.next().unwrap_or("");
    let second = lines.next();
    if second.is_some()
        && first.trim_start().starts_with('{')
        && serde_json::from_str::<Value>(first).is_ok()
    {
        return Ok(Shape::Lines);
    }
    Ok(if first.trim_start().starts_with('[') {
        Shape::Whole
    } else {
        Shape::Concatenated
    })
}

/// The string (or text) at the first pointer of `paths` that names a value in `v`.
pub(crate) fn first_str<'a>(
    v: &'a Value,
    base: &str,
    paths: &[String],
) -> Option<(&'a str, String)> {
    for p in paths {
        let full = format!("{base}{p}");
        if let Some(Value::String(s)) = json_pointer(v, &full) {
            return Some((s.as_str(), full));
        }
    }
    None
}

fn first_value<'a>(v: &'a Value, base: &str, paths: &[String]) -> Option<(&'a Value, String)> {
    for p in paths {
        let full = format!("{base}{p}");
        if let Some(x) = json_pointer(v, &full) {
            if !x.is_null() {
                return Some((x, full));
            }
        }
    }
    None
}

/// A value's text as [`sage_trace::RawStore`] resolves it: the string itself, or the
/// value's compact JSON text.
pub(crate) fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Where a message lives: its document's line and its pointer in the document.
#[derive(Debug, Clone)]
struct Loc<'a> {
    file: &'a str,
    line: Option<usize>,
    /// Set when the document is JSON text held in a string at this pointer of the record.
    outer: Option<&'a str>,
}

impl Loc<'_> {
    fn raw(&self, pointer: &str) -> RawRef {
        match self.outer {
            Some(o) => RawRef::json_inner(self.file, self.line, o, pointer),
            None => RawRef::json(self.file, self.line, pointer),
        }
    }
    fn record(&self, pointer: &str) -> String {
        match self.line {
            Some(l) => format!("line {l} {pointer}"),
            None => pointer.to_string(),
        }
    }
}

/// The state of one mapping run over one trace.
pub struct MappingRun<'m> {
    m: &'m Mapping,
    file: String,
    /// The one turn builder every adapter uses (numbering, call ids, results, drops).
    pub(crate) b: TraceBuilder,
}

/// A message, classified.
enum Class {
    User,
    ToolResult,
    CodeOutput,
    System,
    Agent,
}

impl<'m> MappingRun<'m> {
    pub fn new(m: &'m Mapping, files: &[SourceFile]) -> Self {
        MappingRun {
            m,
            file: files.first().map(|f| f.name.clone()).unwrap_or_default(),
            b: TraceBuilder::new(m.name(), files),
        }
    }

    pub fn finish(self) -> CanonicalTrace {
        self.b.finish()
    }

    /// Map one document: its message list, or the document itself as one message.
    pub(crate) fn feed_document(&mut self, doc: &Value, line: Option<usize>) {
        let mm = &self.m.file.messages;
        for lp in &mm.lists {
            if let Some(Value::Array(items)) = json_pointer(doc, lp) {
                for i in 0..items.len() {
                    self.feed_message(doc, line, &format!("{lp}/{i}"));
                }
                return;
            }
        }
        self.feed_message(doc, line, "");
    }

    /// Map one message at `ptr` in `doc`.
    pub(crate) fn feed_message(&mut self, doc: &Value, line: Option<usize>, ptr: &str) {
        self.feed_message_as(doc, line, None, ptr, None)
    }

    /// Map one message at `ptr` in `doc`, where `doc` was parsed from the JSON text held by
    /// the string at `outer` of the record (if given), and the actor is `actor` when the
    /// record names it outside the message (AG2 runtime log `source_name`). A message that
    /// is a bare string is its text.
    pub(crate) fn feed_message_as(
        &mut self,
        doc: &Value,
        line: Option<usize>,
        outer: Option<&str>,
        ptr: &str,
        actor: Option<&str>,
    ) {
        let m = self.m;
        let mm = &m.file.messages;
        let file = self.file.clone();
        let loc = Loc {
            file: &file,
            line,
            outer,
        };
        if let Some(Value::String(s)) = json_pointer(doc, ptr) {
            self.feed_bare_text(s, &loc, ptr, actor);
            return;
        }
        let Some(base) = mm
            .base
            .iter()
            .map(|b| format!("{ptr}{b}"))
            .find(|b| json_pointer(doc, b).is_some_and(Value::is_object))
        else {
            self.b.drop_record(loc.raw(ptr), "not a message object");
            return;
        };
        // Fields are looked up in the base object, then in the message itself
        // (`messages_to_dict` keeps `type` outside `data`).
        let field = |paths: &[String]| {
            first_str(doc, &base, paths)
                .or_else(|| first_str(doc, ptr, paths))
                .map(|(s, _)| s.to_string())
        };
        let actor_raw = actor.map(str::to_string).or_else(|| field(&mm.actor));
        let role = field(&mm.role);
        let (mut name, mut actor_role) = (
            actor_raw
                .clone()
                .or_else(|| mm.default_actor.clone())
                .or_else(|| role.clone())
                .unwrap_or_else(|| "agent".into()),
            role.clone(),
        );
        if let (Some(re), Some(a)) = (&m.actor_pattern, &actor_raw) {
            if let Some(c) = re.captures(a) {
                if let Some(n) = c.name("name") {
                    name = n.as_str().trim().to_string();
                }
                if let Some(r) = c.name("role") {
                    actor_role = Some(r.as_str().trim().to_string());
                }
            }
        }
        let mut texts = self.message_texts(doc, &base, &loc).into_iter();
        let text = texts.next();
        let more: Vec<TextItem> = texts.collect();
        let role_s = role.as_deref().unwrap_or("");
        let class = if m.file.roles.tool.iter().any(|r| r == role_s) {
            Class::ToolResult
        } else if m
            .code_output
            .as_ref()
            .is_some_and(|re| text.as_ref().is_some_and(|t| re.is_match(&t.text)))
        {
            Class::CodeOutput
        } else if m.file.roles.user.iter().any(|r| r == role_s)
            || m.user_names.as_ref().is_some_and(|re| {
                actor_raw.as_deref().is_some_and(|a| re.is_match(a)) || re.is_match(&name)
            })
        {
            Class::User
        } else if m.file.roles.system.iter().any(|r| r == role_s) {
            Class::System
        } else {
            Class::Agent
        };
        // Tool results listed inside any message (AG2 `tool_responses`).
        let listed_results = self.listed_results(doc, &base, &loc);
        match class {
            Class::ToolResult | Class::CodeOutput if !listed_results.is_empty() => {
                for r in listed_results {
                    self.attach_result(r, &loc, ptr);
                }
            }
            Class::ToolResult => {
                let rm = &m.file.tool_results;
                let call_id = first_str(doc, &base, &rm.call_id).map(|(s, _)| s.to_string());
                let out = first_value(doc, &base, &rm.text)
                    .map(|(v, p)| self.result_text(doc, v, &p, &loc))
                    .or(text);
                let is_error = is_error(doc, &base, rm);
                match out {
                    Some(t) => self.attach_result(
                        ToolResult {
                            call_id,
                            output: t.text,
                            is_error,
                            raw: t.raw,
                        },
                        &loc,
                        ptr,
                    ),
                    None => self.b.drop_record(loc.raw(ptr), "tool result without text"),
                }
            }
            Class::CodeOutput => {
                let t = text.expect("code output matched on text");
                self.attach_code_output(t, &loc, ptr);
            }
            Class::User => {
                self.b.drop_record(loc.raw(ptr), NOT_AGENT_AUTHORED);
            }
            Class::System | Class::Agent => {
                let mut turn = Turn::new(
                    Actor {
                        name,
                        role: actor_role,
                    },
                    TurnKind::Planning,
                );
                turn.message = text.filter(|t| !t.text.is_empty());
                self.tool_calls(doc, &base, &loc, &mut turn);
                for r in listed_results {
                    turn.tool_results.push(r);
                }
                let sys = matches!(class, Class::System);
                turn.kind = self.classify(&turn, role_s, sys);
                if turn.message.is_none()
                    && turn.tool_calls.is_empty()
                    && turn.tool_results.is_empty()
                {
                    self.b
                        .drop_record(loc.raw(ptr), "empty message (no text, no tool call)");
                    return;
                }
                let at = self.b.push(turn);
                self.b.continue_message(at, more);
            }
        }
    }

    /// A message that is only a string, spoken by `actor`.
    fn feed_bare_text(&mut self, s: &str, loc: &Loc, ptr: &str, actor: Option<&str>) {
        let text = TextItem {
            text: s.to_string(),
            raw: loc.raw(ptr),
        };
        let name = actor.unwrap_or("agent").to_string();
        if self.m.code_output.as_ref().is_some_and(|re| re.is_match(s)) {
            self.attach_code_output(text, loc, ptr);
            return;
        }
        if self
            .m
            .user_names
            .as_ref()
            .is_some_and(|re| re.is_match(&name))
        {
            self.b.drop_record(loc.raw(ptr), NOT_AGENT_AUTHORED);
            return;
        }
        let mut turn = Turn::new(Actor { name, role: None }, TurnKind::Planning);
        turn.message = Some(text);
        turn.kind = self.classify(&turn, "", false);
        self.b.push(turn);
    }

    /// The message's text blocks, each with its own pointer (a message split over several
    /// blocks keeps every block: the first is the turn's message, the later ones turns of
    /// their own after it).
    fn message_texts(&self, doc: &Value, base: &str, loc: &Loc) -> Vec<TextItem> {
        let mm = &self.m.file.messages;
        let Some((v, p)) = first_value(doc, base, &mm.text) else {
            return vec![];
        };
        match v {
            Value::String(s) => vec![TextItem {
                text: s.clone(),
                raw: loc.raw(&p),
            }],
            Value::Array(blocks) => {
                let mut out = Vec::new();
                for (i, b) in blocks.iter().enumerate() {
                    if let Value::String(s) = b {
                        out.push(TextItem {
                            text: s.clone(),
                            raw: loc.raw(&format!("{p}/{i}")),
                        });
                        continue;
                    }
                    let ty = json_pointer(b, &mm.block_type)
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    if mm.block_text_types.iter().any(|t| t == ty) {
                        if let Some(Value::String(s)) = json_pointer(b, &mm.block_text) {
                            if s.trim().is_empty() {
                                continue;
                            }
                            out.push(TextItem {
                                text: s.clone(),
                                raw: loc.raw(&format!("{p}/{i}{}", mm.block_text)),
                            });
                        }
                    }
                }
                out
            }
            Value::Null => vec![],
            other => vec![TextItem {
                text: other.to_string(),
                raw: loc.raw(&p),
            }],
        }
    }

    fn result_text(&self, _doc: &Value, v: &Value, p: &str, loc: &Loc) -> TextItem {
        if let Value::Array(blocks) = v {
            for (i, b) in blocks.iter().enumerate() {
                if let Some(Value::String(s)) = json_pointer(b, "/text") {
                    return TextItem {
                        text: s.clone(),
                        raw: loc.raw(&format!("{p}/{i}/text")),
                    };
                }
            }
        }
        TextItem {
            text: value_text(v),
            raw: loc.raw(p),
        }
    }

    fn listed_results(&self, doc: &Value, base: &str, loc: &Loc) -> Vec<ToolResult> {
        let rm = &self.m.file.tool_results;
        let Some(lp) = &rm.list else { return vec![] };
        let lp = format!("{base}{lp}");
        let Some(Value::Array(items)) = json_pointer(doc, &lp) else {
            return vec![];
        };
        let mut out = Vec::new();
        for i in 0..items.len() {
            let ip = format!("{lp}/{i}");
            let call_id = first_str(doc, &ip, &rm.call_id).map(|(s, _)| s.to_string());
            if let Some((v, p)) = first_value(doc, &ip, &rm.text) {
                let t = self.result_text(doc, v, &p, loc);
                out.push(ToolResult {
                    call_id,
                    output: t.text,
                    is_error: is_error(doc, &ip, rm),
                    raw: t.raw,
                });
            }
        }
        out
    }

    fn tool_calls(&mut self, doc: &Value, base: &str, loc: &Loc, turn: &mut Turn) {
        for tm in &self.m.file.tool_calls {
            let lp = format!("{base}{}", tm.list);
            // An array of calls, or one call object (`function_call`, a CAMEL
            // FunctionCallingMessage itself); a lone object without a name is no call.
            let elems: Vec<String> = match json_pointer(doc, &lp) {
                Some(Value::Array(items)) => {
                    (0..items.len()).map(|i| format!("{lp}/{i}")).collect()
                }
                Some(Value::Object(_)) if first_str(doc, &lp, &tm.name).is_some() => {
                    vec![lp.clone()]
                }
                _ => continue,
            };
            for ip in elems {
                if let (Some(tf), Some(tv)) = (&tm.type_field, &tm.type_value) {
                    if json_pointer(doc, &format!("{ip}{tf}")).and_then(Value::as_str) != Some(tv) {
                        continue;
                    }
                }
                let Some((name, _)) = first_str(doc, &ip, &tm.name) else {
                    self.b.drop_record(loc.raw(&ip), "tool call without a name");
                    continue;
                };
                let id = first_str(doc, &ip, &tm.id).map(|(s, _)| s.to_string());
                if id.is_some() && turn.tool_calls.iter().any(|c| c.id == id) {
                    continue; // the same call listed twice (LangChain blocks + tool_calls)
                }
                let (args_text, args_ptr, args_val) = match first_value(doc, &ip, &tm.args) {
                    Some((v, p)) => (value_text(v), p, Some(v)),
                    None => (String::new(), ip.clone(), None),
                };
                let call = ToolCall {
                    id,
                    name: name.to_string(),
                    arguments: args_text,
                    raw: loc.raw(&args_ptr),
                };
                if let Some(av) = args_val {
                    self.writes_of(&call, av, &args_ptr, loc, turn);
                }
                turn.tool_calls.push(call);
            }
        }
    }

    /// Apply the `[[writes]]` rules to a call whose arguments `args` are at `args_ptr` of the
    /// document on `line` of the main file (for adapters that find calls by code).
    pub(crate) fn apply_write_rules(
        &mut self,
        call: &ToolCall,
        args: &Value,
        args_ptr: &str,
        line: Option<usize>,
        turn: &mut Turn,
    ) {
        let file = self.file.clone();
        let loc = Loc {
            file: &file,
            line,
            outer: None,
        };
        self.writes_of(call, args, args_ptr, &loc, turn);
    }

    /// Writes of one tool call, by the `[[writes]]` rules.
    fn writes_of(
        &mut self,
        call: &ToolCall,
        args: &Value,
        args_ptr: &str,
        loc: &Loc,
        turn: &mut Turn,
    ) {
        // Arguments recorded as a JSON string are parsed; their fields get `inner` pointers.
        let parsed;
        let (av, nested) = match args {
            Value::String(s) => match serde_json::from_str::<Value>(s) {
                Ok(v) if v.is_object() => {
                    parsed = v;
                    (&parsed, true)
                }
                _ => (args, false),
            },
            _ => (args, false),
        };
        // Arguments nested as JSON text inside an already nested document cannot be pointed
        // into (one level of nesting only); such writes point at the arguments string.
        let raw_of = |p: &str| -> RawRef {
            match (nested, loc.outer) {
                (true, None) => RawRef::json_inner(loc.file, loc.line, args_ptr, p),
                (true, Some(_)) => loc.raw(args_ptr),
                (false, _) => loc.raw(&format!("{args_ptr}{p}")),
            }
        };
        let get = |paths: &[String]| -> Option<(String, String)> {
            first_value(av, "", paths).map(|(v, p)| (value_text(v), p))
        };
        for w in &self.m.file.writes {
            if !w.tools.iter().any(|t| t == &call.name) {
                continue;
            }
            if let (Some(f), Some(val)) = (&w.when_field, &w.when_value) {
                if json_pointer(av, f).and_then(Value::as_str) != Some(val) {
                    continue;
                }
            }
            let path = get(&w.path).map(|(s, _)| s);
            let via = call.name.clone();
            let mut push = |artefact: String, op: WriteOp, raw: RawRef| {
                turn.writes.push(Write {
                    artefact: edits::clean_path(&artefact),
                    op,
                    via: via.clone(),
                    final_state: false,
                    raw,
                })
            };
            match w.op.as_str() {
                "shell" | "apply-patch" => {
                    let Some((cmd, p)) = get(&w.command) else {
                        continue;
                    };
                    let parsed = if w.op == "shell" {
                        edits::shell_edits(&cmd)
                    } else {
                        edits::parse_apply_patch(&cmd)
                    };
                    for e in parsed.edits {
                        push(e.path, e.op, raw_of(&p));
                    }
                    for u in parsed.uninterpreted {
                        self.b.note(format!(
                            "{}: edit not interpreted ({}): {}",
                            raw_of(&p).display(),
                            u.reason,
                            u.text
                        ));
                    }
                }
                op => {
                    let Some(path) = path else {
                        self.b.note(format!(
                            "{}: {} call without a file path: write not recorded",
                            raw_of("").display(),
                            call.name
                        ));
                        continue;
                    };
                    let built = match op {
                        "full-content" => {
                            get(&w.content).map(|(c, p)| (WriteOp::FullContent { content: c }, p))
                        }
                        "str-replace" | "search-replace" => {
                            let old = get(&w.old);
                            let new = get(&w.new);
                            let all = first_value(av, "", &w.all)
                                .and_then(|(v, _)| v.as_bool())
                                .unwrap_or(false);
                            match (old, new) {
                                (Some((o, _)), Some((n, p))) => Some((
                                    if op == "str-replace" {
                                        WriteOp::StrReplace {
                                            old: o,
                                            new: n,
                                            all,
                                            tolerance: sage_trace::Tolerance::TrimmedRetry,
                                        }
                                    } else {
                                        WriteOp::SearchReplace {
                                            search: o,
                                            replace: n,
                                            tolerance: sage_trace::Tolerance::LinesThenElision,
                                        }
                                    },
                                    p,
                                )),
                                _ => None,
                            }
                        }
                        "insert" => {
                            let line = first_value(av, "", &w.line).and_then(|(v, _)| {
                                v.as_u64()
                                    .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
                            });
                            match (line, get(&w.new).or_else(|| get(&w.content))) {
                                (Some(l), Some((t, p))) => Some((
                                    WriteOp::Insert {
                                        after_line: l as usize,
                                        text: t,
                                    },
                                    p,
                                )),
                                _ => None,
                            }
                        }
                        "unified-diff" => {
                            get(&w.content).map(|(d, p)| (WriteOp::UnifiedDiff { diff: d }, p))
                        }
                        "delete" => {
                            Some((WriteOp::Delete, w.path.first().cloned().unwrap_or_default()))
                        }
                        "restore" => {
                            // The restored content is in the tool result, which this engine
                            // does not read at call time.
                            self.b.note(format!(
                                "{}: {} on {path} restores an earlier state the call does not \
                                 hold; not recorded",
                                raw_of("").display(),
                                call.name
                            ));
                            continue;
                        }
                        _ => None,
                    };
                    match built {
                        Some((op, p)) => push(path, op, raw_of(&p)),
                        None => self.b.note(format!(
                            "{}: {} call on {path}: arguments incomplete for a {} write; not recorded",
                            raw_of("").display(),
                            call.name,
                            w.op
                        )),
                    }
                }
            }
        }
    }

    fn classify(&self, turn: &Turn, role: &str, system: bool) -> TurnKind {
        let text = turn.message.as_ref().map(|t| t.text.as_str()).unwrap_or("");
        let hit = |r: &CompiledRule| {
            r.actor
                .as_ref()
                .is_none_or(|re| re.is_match(&turn.actor.name))
                && r.role.as_ref().is_none_or(|re| {
                    re.is_match(role) || turn.actor.role.as_deref().is_some_and(|x| re.is_match(x))
                })
                && r.text.as_ref().is_none_or(|re| re.is_match(text))
                && r.tool
                    .as_ref()
                    .is_none_or(|re| turn.tool_calls.iter().any(|c| re.is_match(&c.name)))
        };
        if system || self.m.admin.iter().any(hit) {
            return TurnKind::Administrative;
        }
        if let Some(k) = self.m.kinds.iter().find(|r| hit(r)).and_then(|r| r.kind) {
            return k;
        }
        if !turn.writes.is_empty() {
            TurnKind::Implementation
        } else {
            self.m.default_kind
        }
    }

    /// Attach a tool result to the turn that made the call (by id), else the latest agent
    /// turn (the builder's rule, shared by every adapter).
    fn attach_result(&mut self, r: ToolResult, loc: &Loc, ptr: &str) {
        if self.b.result(r).is_none() {
            self.b.drop_record(
                loc.raw(ptr),
                format!("tool result before any agent turn ({})", loc.record(ptr)),
            );
        }
    }

    /// An executor's output: the result of the code blocks of the latest turn that has any.
    fn attach_code_output(&mut self, out: TextItem, loc: &Loc, ptr: &str) {
        let ce = self
            .m
            .file
            .code_execution
            .clone()
            .expect("code output implies config");
        let idx = self.b.trace.turns.iter().rposition(|t| {
            t.tool_calls.iter().any(|c| c.name == ce.tool)
                || t.message
                    .as_ref()
                    .is_some_and(|m| !edits::code_blocks(&m.text).is_empty())
        });
        let Some(i) = idx else {
            self.b.drop_record(
                loc.raw(ptr),
                "code execution output with no code block before it",
            );
            return;
        };
        let turn = &mut self.b.trace.turns[i];
        let already = turn.tool_calls.iter().any(|c| c.name == ce.tool);
        if !already {
            if let Some(msg) = turn.message.clone() {
                for (k, b) in edits::code_blocks(&msg.text).into_iter().enumerate() {
                    let id = format!("code-{}-{}", turn.index, k + 1);
                    turn.tool_calls.push(ToolCall {
                        id: Some(id),
                        name: ce.tool.clone(),
                        arguments: b.code.clone(),
                        raw: msg.raw.clone(),
                    });
                    if ce.filename_comment {
                        if let Some(path) = edits::filename_comment(&b.code) {
                            turn.writes.push(Write {
                                artefact: path,
                                op: WriteOp::FullContent {
                                    content: b.code.clone(),
                                },
                                via: format!("{} (# filename:)", ce.tool),
                                final_state: false,
                                raw: msg.raw.clone(),
                            });
                        }
                    }
                }
                if !turn.writes.is_empty() && turn.kind == self.m.default_kind {
                    turn.kind = TurnKind::Implementation;
                }
            }
        }
        let call_id = turn
            .tool_calls
            .iter()
            .rev()
            .find(|c| c.name == ce.tool)
            .and_then(|c| c.id.clone());
        turn.tool_results.push(ToolResult {
            call_id,
            is_error: !out.text.contains("exitcode: 0"),
            output: out.text,
            raw: out.raw,
        });
    }
}

fn is_error(doc: &Value, base: &str, rm: &ToolResultMap) -> bool {
    match (&rm.error_field, &rm.error_value) {
        (Some(f), Some(v)) => json_pointer(doc, &format!("{base}{f}"))
            .map(|x| value_text(x) == *v)
            .unwrap_or(false),
        _ => false,
    }
}

/// The embedded mapping files as JSON (converted by `build.rs`), read at start-up without the
/// TOML parser; in [`EMBEDDED_MAPPINGS`] order.
const EMBEDDED_MAPPINGS_JSON: &[&str] = &[
    include_str!(concat!(env!("OUT_DIR"), "/ag2.json")),
    include_str!(concat!(env!("OUT_DIR"), "/who-and-when.json")),
    include_str!(concat!(env!("OUT_DIR"), "/camel.json")),
    include_str!(concat!(env!("OUT_DIR"), "/deepagents.json")),
    include_str!(concat!(env!("OUT_DIR"), "/claude-stream.json")),
];

/// The embedded mapping files, by adapter name.
pub const EMBEDDED_MAPPINGS: &[(&str, &str)] = &[
    ("ag2", include_str!("../mappings/ag2.toml")),
    (
        "who-and-when",
        include_str!("../mappings/who-and-when.toml"),
    ),
    ("camel", include_str!("../mappings/camel.toml")),
    ("deepagents", include_str!("../mappings/deepagents.toml")),
    (
        "claude-stream",
        include_str!("../mappings/claude-stream.toml"),
    ),
];

/// The embedded mapping named `name`, parsed. Embedded mappings are checked by tests, so a
/// failure here is a build defect, reported as an adapter error rather than a panic.
pub(crate) fn embedded_mapping(name: &str) -> Result<Mapping, AdapterError> {
    // Parsed (and its regexes compiled) once per process: every case's detection builds the
    // registry, and compiling the mappings' regexes per case used to be most of a small
    // case's cost. A clone shares the compiled regexes.
    static PARSED: std::sync::OnceLock<Vec<(&'static str, Result<Mapping, String>)>> =
        std::sync::OnceLock::new();
    let parsed = PARSED.get_or_init(|| {
        EMBEDDED_MAPPINGS
            .iter()
            .zip(EMBEDDED_MAPPINGS_JSON)
            .map(|((n, _), json)| {
                let m = serde_json::from_str(json)
                    .map_err(|e| e.to_string())
                    .and_then(|file| {
                        Mapping::from_file(file, &format!("mappings/{n}.toml (embedded)"), false)
                            .map_err(|e| e.to_string())
                    });
                (*n, m)
            })
            .collect()
    });
    match parsed.iter().find(|(n, _)| *n == name) {
        Some((_, Ok(m))) => Ok(m.clone()),
        Some((_, Err(e))) => Err(AdapterError::new("-", None, e.clone())),
        None => Err(AdapterError::new(
            "-",
            None,
            format!("no embedded mapping {name:?}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every embedded mapping compiles its regexes (at run time they compile on first use).
    #[test]
    fn embedded_mappings_parse_with_their_regexes() {
        for (n, text) in EMBEDDED_MAPPINGS {
            Mapping::parse(text, n).unwrap();
        }
    }

    /// A user's mapping is refused for a detection line pattern that does not compile (the
    /// embedded ones compile theirs on first use).
    #[test]
    fn a_mapping_with_a_bad_line_pattern_is_refused() {
        let text = format!(
            "{}\n[[detect]]\nlines = ['(']\nscore = 10\n",
            EMBEDDED_MAPPINGS[0].1
        );
        let e = Mapping::parse(&text, "mine.toml").unwrap_err().to_string();
        assert!(e.contains("[[detect]]: lines \"(\""), "{e}");
        assert!(Mapping::parse_opts(&text, "mine.toml", false).is_ok());
    }

    /// The JSON copies read at start-up are the TOML files, value for value, in order.
    #[test]
    fn the_embedded_json_is_the_toml_files() {
        assert_eq!(EMBEDDED_MAPPINGS.len(), EMBEDDED_MAPPINGS_JSON.len());
        for ((n, text), json) in EMBEDDED_MAPPINGS.iter().zip(EMBEDDED_MAPPINGS_JSON) {
            let from_toml: MappingFile = toml::from_str(text).unwrap();
            let from_json: MappingFile = serde_json::from_str(json).unwrap();
            assert_eq!(format!("{from_json:?}"), format!("{from_toml:?}"), "{n}");
        }
    }

    const MINI: &str = r#"
[adapter]
name = "mini"
version = "1"
covers = "test"
[[detect]]
all = ["\"who\""]
score = 50
[messages]
lists = ["/msgs"]
actor = ["/who"]
role = ["/role"]
text = ["/content"]
[roles]
user = ["user"]
tool = ["tool"]
[[tool_calls]]
list = "/calls"
name = ["/name"]
args = ["/args"]
id = ["/id"]
[tool_results]
call_id = ["/id"]
text = ["/content"]
[[kinds]]
actor = "(?i)review"
kind = "review"
[[writes]]
tools = ["write"]
op = "full-content"
path = ["/path"]
content = ["/text"]
"#;

    #[test]
    fn maps_messages_calls_results_writes() {
        let m = Mapping::parse(MINI, "test").unwrap();
        let score = |t: &str| m.detect(&crate::shape::Shape::of_json_text(t)).map(|d| d.0);
        // An older mapping file's substring needles still work.
        assert_eq!(score(r#"{"who": 1}"#), Some(50));
        assert_eq!(score("nothing"), None);
        let doc: Value = serde_json::json!({"msgs": [
            {"who": "u", "role": "user", "content": "do it"},
            {"who": "coder", "role": "assistant", "content": "ok",
             "calls": [{"id": "c1", "name": "write", "args": {"path": "a.py", "text": "x=1\n"}}]},
            {"role": "tool", "id": "c1", "content": "done"},
            {"who": "Reviewer", "role": "assistant", "content": "looks fine"}
        ]});
        let mut run = MappingRun::new(&m, &[SourceFile::new("t.json", "t.json")]);
        run.feed_document(&doc, None);
        let t = run.finish();
        assert_eq!(t.turns.len(), 2);
        assert_eq!(t.dropped.len(), 1);
        assert_eq!(t.dropped[0].reason, NOT_AGENT_AUTHORED);
        assert_eq!(t.turns[0].kind, TurnKind::Implementation);
        assert_eq!(t.turns[0].writes[0].artefact, "a.py");
        assert_eq!(t.turns[0].tool_results[0].output, "done");
        assert_eq!(t.turns[1].kind, TurnKind::Review);
        let mut store = sage_trace::RawStore::new();
        store.insert("t.json", doc.to_string().into_bytes());
        for turn in &t.turns {
            for (text, raw) in turn.text_items() {
                assert!(
                    store.resolve(raw).unwrap().contains(text),
                    "{}",
                    raw.display()
                );
            }
        }
    }

    #[test]
    fn bad_mapping_is_an_error() {
        assert!(Mapping::parse("[adapter]\nname='x'", "t").is_err());
        let bad = MINI.replace("kind = \"review\"", "kind = \"nope\"");
        assert!(Mapping::parse(&bad, "t").is_err());
    }
}
