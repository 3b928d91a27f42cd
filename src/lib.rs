//! sage: audit recorded runs of LLM coding agents.
//!
//! The library reads as the SAGE pipeline, one module per stage, each handing a typed value
//! to the next:
//!
//! adapters → [`trace`] (canonical trace) → [`history`] (artefact history, code provenance)
//! → [`judge`] (turn scores) → [`origin`] (origin rule) → [`reliability`] → [`report`].
//!
//! [`case`] loads the inputs of one audit (trace, baseline, task context, failure anchor) and
//! [`localize`] runs the pipeline over a folder of cases. [`screen`] finds silent-failure
//! candidates, [`annotate`] and [`view`] serve human reviewers, and [`szz`] asks the same
//! question of a git history.

pub mod adapters;
pub mod annotate;
pub mod case;
pub mod config;
pub mod error;
pub mod fragment;
pub mod history;
pub mod judge;
pub mod localize;
pub mod origin;
pub mod reliability;
pub mod report;
pub mod screen;
pub mod szz;
pub mod trace;
pub mod view;
