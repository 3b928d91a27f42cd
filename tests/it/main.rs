//! The single integration-test binary: one module per topic.

mod agree;
mod judges;
mod screen;
mod szz;
