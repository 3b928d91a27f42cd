//! (to be built)
