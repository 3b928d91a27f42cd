//! The single integration-test binary: one module per topic.

mod agree;
mod screen;
mod szz;
