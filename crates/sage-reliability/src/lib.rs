//! Reliability: agreement statistics and the paper's multi-source reliability evaluation.
//!
//! - [`stats`]: the coefficients (percent agreement, Cohen, Fleiss, Gwet, Krippendorff), no I/O.
//! - [`bootstrap`]: the Hayes & Krippendorff (KALPHA) bootstrap of alpha, seeded.
//! - [`measures`]: origin-level consistency and agreement on artefact labels (Table 6).
//! - [`resample`]: task-disjoint partitions and leave-one-task-out.
//! - [`from_results`]: adapter from `sage localize` result sets to the report's inputs.
//! - [`report`]: Tables 6-7 and Figures 5-6 (Markdown, SVG, JSON) from simple input structs.

pub mod annotations;
pub mod bootstrap;
pub mod measures;
pub mod report;
pub mod resample;
pub mod stats;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod vectors_test;

pub use bootstrap::{kalpha_bootstrap, kalpha_setup, BootstrapResult, KalphaSetup};
pub use stats::{
    agreement_weights, alpha_coded, alpha_coded_units, alpha_numeric, alpha_numeric_units,
    cohen_kappa, fleiss_kappa, fleiss_kappa_counts, fleiss_kappa_units, gwet_ac, gwet_ac_table,
    gwet_ac_units, krippendorff_alpha, percent_agreement, percent_agreement_units,
    AgreementWeights, Coded, CodedUnits, Estimate, FleissMethod, FleissMissing, KappaWeights,
    Label, Level, Scores, StatError, StatResult, MISSING,
};
