//! The single integration-test binary: one module per topic, each driving the real `sage`
//! binary (or the library, where the topic is a library contract) on real files.
//!
//! - `adapters_chat`: chat-transcript formats (Aider, AG2, Who&When, CAMEL/OWL, Deep Agents)
//! - `adapters_events`: event-stream formats (OpenHands, SWE-agent, mini-SWE-agent, Claude
//!   Code, Codex, Inspect AI, OTel GenAI)
//! - `replay_fidelity`: real traces replayed to the result they recorded
//! - `fidelity`: the method-fidelity golden cases of `tests/data/fidelity` (issue 12)
//! - `architecture`: the invariants of `docs/architecture.md`
//! - `susvibes`: the real SusVibes traces of ../shared (claude-stream adapter, `sage case`)
//! - `golden`: the bundled corpus's results, SARIF, Table 5 and HTML, pinned (issue 30)
//! - `results_compat`, `screen_compat`, `confirm_key_compat`, `annotate_key_compat`: results,
//!   screen reports and keys written before their published types still read
//! - `corpus`, `localize`, `judges`, `screen`, `reliability`, `agree`, `szz`, `view`,
//!   `case_authoring`: one subcommand each
//! - `local_judge`: a real model (llama-server) as the judge; `hostile`: attack tests
//! - `overrides`: the user's environment overrides (classifier, detection rules, workspace
//!   roots, input limits), each end to end
//! - `need`: what a test needs from outside the repository; `support`: shared helpers

mod adapters_chat;
mod adapters_detect;
mod adapters_events;
mod adapters_formats;
mod agree;
mod annotate_key_compat;
mod architecture;
mod case_authoring;
mod cli;
mod confirm_key_compat;
mod corpus;
mod fidelity;
mod first_day;
mod funnel;
mod fuzz;
mod golden;
mod hostile;
mod judges;
mod local_judge;
mod localize;
mod need;
mod overrides;
mod reliability;
mod replay_fidelity;
mod results_compat;
mod screen;
mod screen_compat;
mod security;
mod support;
mod susvibes;
mod szz;
mod szz_adversarial;
mod view;
