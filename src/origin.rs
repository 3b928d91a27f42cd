//! The origin rule (to be built).
