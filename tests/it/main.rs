//! The single integration-test binary: one module per topic.

mod adapters_a;
mod agree;
mod judges;
mod screen;
mod szz;
