//! Errors shared across stages.
