//! The single integration-test binary: one module per topic.

mod adapters_a;
mod adapters_b;
mod adapters_b_fidelity;
mod agree;
mod corpus;
mod judges;
mod localize;
mod reliability;
mod screen;
mod szz;
mod view;
