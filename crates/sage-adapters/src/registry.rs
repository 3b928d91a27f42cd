//! The built-in adapters and the embedded mapping files.

use crate::mapping::{embedded_mapping, Mapping, EMBEDDED_MAPPINGS};
use crate::{ag2, aider, atif, camel, claude_code, claude_stream, codex, deepagents, inspect};
use crate::{mini_swe_agent, openhands, openhands_sdk, openinference, otel, shape, swe_agent};
use crate::{Adapter, AdapterError, SourceFile};
use sage_trace::CanonicalTrace;
use std::sync::Arc;

/// An adapter that is only a mapping file (a user's `--adapter FILE` for a format sage does
/// not know, or an embedded mapping with no code around it).
pub struct MappingAdapter {
    pub mapping: Arc<Mapping>,
    name: &'static str,
}

impl MappingAdapter {
    pub fn new(mapping: Mapping) -> Self {
        // Names live as long as the process, interned: the registry is built per case, but
        // only a handful of distinct mappings are ever loaded.
        static NAMES: std::sync::Mutex<Vec<&'static str>> = std::sync::Mutex::new(Vec::new());
        let mut names = NAMES.lock().unwrap_or_else(|p| p.into_inner());
        let name: &'static str = match names.iter().find(|n| **n == mapping.name()) {
            Some(n) => n,
            None => {
                let n: &'static str = Box::leak(mapping.name().to_string().into_boxed_str());
                names.push(n);
                n
            }
        };
        drop(names);
        MappingAdapter {
            mapping: Arc::new(mapping),
            name,
        }
    }
}

impl Adapter for MappingAdapter {
    fn name(&self) -> &'static str {
        self.name
    }
    fn versions(&self) -> &str {
        &self.mapping.file.adapter.covers
    }
    fn detect(
        &self,
        shape: &shape::Shape,
        _code_rules: &crate::rules::DetectRules,
    ) -> Option<(u8, String)> {
        // a mapping carries its own rules
        self.mapping.detect(shape)
    }
    fn normalize(&self, files: &[SourceFile]) -> Result<CanonicalTrace, AdapterError> {
        self.mapping.normalize(files)
    }
    fn mapping(&self) -> Option<&Mapping> {
        Some(&self.mapping)
    }
    fn with_mapping(&self, mapping: Mapping) -> Option<Box<dyn Adapter>> {
        Some(Box::new(MappingAdapter::new(mapping)))
    }
}

/// Every built-in adapter.
pub fn registry() -> Vec<Box<dyn Adapter>> {
    let mut v: Vec<Box<dyn Adapter>> = vec![Box::new(aider::Aider)];
    for (name, _) in EMBEDDED_MAPPINGS {
        match *name {
            "ag2" => v.push(Box::new(ag2::Ag2::embedded())),
            "camel" => v.push(Box::new(camel::Camel::embedded())),
            "deepagents" => v.push(Box::new(deepagents::DeepAgents::embedded())),
            "claude-stream" => v.push(Box::new(claude_stream::ClaudeStream::embedded())),
            _ => {
                if let Ok(m) = embedded_mapping(name) {
                    v.push(Box::new(MappingAdapter::new(m)));
                }
            }
        }
    }
    v.push(Box::new(openhands::OpenHands));
    v.push(Box::new(openhands_sdk::OpenHandsSdk));
    v.push(Box::new(swe_agent::SweAgent));
    v.push(Box::new(mini_swe_agent::MiniSweAgent));
    v.push(Box::new(claude_code::ClaudeCode));
    v.push(Box::new(codex::Codex));
    v.push(Box::new(inspect::Inspect));
    v.push(Box::new(otel::OtelGenAi));
    v.push(Box::new(atif::Atif));
    v.push(Box::new(openinference::OpenInference));
    v
}

/// [`registry`] built once per process: building it clones every embedded mapping, which
/// was a tenth of a small case's cost when every case built it two or three times.
pub(crate) fn shared_registry() -> &'static [Box<dyn Adapter>] {
    static REGISTRY: std::sync::OnceLock<Vec<Box<dyn Adapter>>> = std::sync::OnceLock::new();
    REGISTRY.get_or_init(registry)
}

/// The adapter named `name`.
pub fn by_name(name: &str) -> Option<Box<dyn Adapter>> {
    registry().into_iter().find(|a| a.name() == name)
}
