//! The localize pipeline (to be built).
