//! The one request shape ([`Prompt`] + [`Output`]) and what a provider's answer holds.

use crate::cost;
use serde_json::Value;

/// What is sent: a system prompt and the user message's blocks, in layout order.
///
/// The blocks are concatenated for OpenAI-compatible servers (which cache any shared
/// prefix automatically) and sent as separate content blocks to Anthropic, with a cache
/// breakpoint after block [`Prompt::cache_after`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Prompt {
    pub system: String,
    /// Mark the system prompt cacheable (Anthropic).
    pub cache_system: bool,
    pub blocks: Vec<String>,
    /// Index of the last block of the prefix shared with the next request (Anthropic).
    pub cache_after: Option<usize>,
}

impl Prompt {
    /// The user message as one text: every block in order.
    pub fn user_text(&self) -> String {
        let mut s = String::with_capacity(self.blocks.iter().map(String::len).sum());
        for b in &self.blocks {
            s.push_str(b);
        }
        s
    }
}

/// How the answer's shape is requested.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// A JSON schema the server enforces: OpenAI `response_format: json_schema` (strict),
    /// an Anthropic forced tool call with that input schema.
    Schema {
        name: String,
        description: String,
        schema: Value,
    },
    /// Any one JSON object (servers without schema support), parsed strictly.
    JsonObject,
}

/// The answer of one completion.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// Text content, to be parsed by the caller.
    Text(String),
    /// Structured input of a forced tool call.
    Json(Value),
}

/// A provider response reduced to what sage uses.
#[derive(Debug, Clone)]
pub struct Completion {
    /// The answer, or why the completion has none (cut off, refused, empty).
    pub answer: Result<Answer, String>,
    pub usage: cost::Usage,
}
