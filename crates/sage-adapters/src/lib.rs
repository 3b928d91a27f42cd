//! Adapters: each framework's native trace → [`sage_trace::CanonicalTrace`].
//!
//! Every adapter detects its format from the file's structure (never from its name: [`shape`],
//! [`detect`], rules in `mappings/detect.toml`), maps records to canonical turns through the
//! one [`support::TraceBuilder`] keeping a [`sage_trace::RawRef`] per item, and accounts for
//! every record it could not map in `dropped`. Mappings that are only field paths live as data
//! in `mappings/*.toml` (embedded, overridable with `--adapter FILE`); formats that need real
//! parsing are code. [`normalize`] is the one path from files to a canonical trace, through the [`Adapter`]
//! trait (the registry's adapters, detected or named; never a format matched by name).

#[macro_use]
mod mapped;

// One module per format.
pub mod ag2;
pub mod aider;
pub mod atif;
pub mod camel;
pub mod claude_code;
pub mod claude_stream;
pub mod codex;
pub mod deepagents;
pub mod inspect;
pub mod mini_swe_agent;
pub mod openhands;
pub mod openhands_sdk;
pub mod openinference;
pub mod otel;
pub mod swe_agent;

// What the formats share: detection, the mapping engine, edits, the turn builder and
// classifier, what a trace shows besides its writes.
pub mod detect;
pub mod edits;
pub mod kinds;
pub mod mapping;
pub mod recorded;
pub mod rules;
pub mod seen;
pub mod shape;
pub mod support;

mod adapter;
mod input;
mod normalize;
mod registry;

pub use adapter::Adapter;
pub use input::{AdapterError, SourceFile};
pub(crate) use mapping::embedded_mapping;
pub use mapping::EMBEDDED_MAPPINGS;
pub use normalize::{
    case_sources, detect, finish, normalize, normalize_seen, normalize_with_seen, read_head,
    verify_raw_refs, NormalizeOptions,
};
pub use registry::{by_name, registry, MappingAdapter};
pub use rules::Rules;
pub use shape::DETECT_BYTES;
