//! The words every stage of sage shares: the canonical trace and its raw records, the case
//! manifest, and the score records a judge produces.
//!
//! This crate is the bottom of the pipeline. It knows no trace framework (that is
//! `sage-adapters`), no judge (`sage-judge`) and no rule (`sage-history`): it only defines the
//! values they hand each other, and how a value is traced back to the raw bytes it came from.

#![warn(missing_docs)]

pub mod archive;
mod canonical;
pub mod case;
pub mod json;
pub mod pattern;
mod rawjson;
pub mod required;
pub mod safe;
pub mod score;
pub mod text;

pub use canonical::*;
pub use rawjson::json_pointer;
pub use score::*;
