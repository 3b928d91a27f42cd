//! The lexicon judge (to be built).
