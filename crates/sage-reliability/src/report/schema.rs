//! The published format `sage.reliability/1` (`reliability.json` of `sage reliability` and
//! `sage study`, `docs/reliability.md`) as types of its own.
//!
//! Every record the report holds is defined here, with its field names and serde attributes,
//! and converted explicitly from the values the report is computed in ([`super`]'s sections,
//! [`crate::measures`]' shares and coefficients, [`crate::resample`]'s summaries). Those values
//! derive no serde: renaming or adding a field of theirs stops the build here, at the
//! conversion, instead of silently changing the published JSON. Nothing reads the format back,
//! so the conversions go one way (`From`), as `sage.replay/1`'s do in sage-pipeline, which
//! this crate cannot reach (it sits a floor below).
//!
//! [`mirror!`] writes a record with the same field names as its internal value; its
//! conversion takes the internal value apart with an exhaustive pattern, so each internal
//! field is named once here.

use crate::{measures, resample, stats};
use serde::Serialize;

/// A conversion from a value of the report to its published record (`Vec` and `Option`
/// element by element).
trait Conv<T> {
    fn conv(self) -> T;
}

macro_rules! as_is {
    ($($t:ty),*) => {$(
        impl Conv<$t> for $t {
            fn conv(self) -> $t {
                self
            }
        }
    )*};
}
as_is!(String, bool, u32, u64, usize, f64, (f64, f64));

impl<A: Conv<B>, B> Conv<Vec<B>> for Vec<A> {
    fn conv(self) -> Vec<B> {
        self.into_iter().map(Conv::conv).collect()
    }
}

impl<A: Conv<B>, B> Conv<Option<B>> for Option<A> {
    fn conv(self) -> Option<B> {
        self.map(Conv::conv)
    }
}

/// A published record with the fields of an internal struct, and `From` the internal value.
macro_rules! mirror {
    ($(#[$m:meta])* pub struct $name:ident = $internal:ty {
        $( $(#[$fm:meta])* $f:ident : $t:ty ),* $(,)?
    }) => {
        #[derive(Debug, Clone, PartialEq, Serialize)]
        $(#[$m])*
        pub struct $name {
            $( $(#[$fm])* pub $f: $t ),*
        }
        impl From<$internal> for $name {
            fn from(v: $internal) -> $name {
                type Internal = $internal;
                let Internal { $( $f, )* } = v;
                $name { $( $f: $f.conv() ),* }
            }
        }
        impl Conv<$name> for $internal {
            fn conv(self) -> $name {
                self.into()
            }
        }
    };
}

/// A published word list (a unit enum) and `From` the internal one.
macro_rules! words {
    ($(#[$m:meta])* pub enum $name:ident = $internal:ty { $($v:ident),* $(,)? }) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
        $(#[$m])*
        pub enum $name { $($v),* }
        impl From<$internal> for $name {
            fn from(v: $internal) -> $name {
                type Internal = $internal;
                match v { $( Internal::$v => $name::$v ),* }
            }
        }
        impl Conv<$name> for $internal {
            fn conv(self) -> $name {
                self.into()
            }
        }
    };
}

// ---- the report ------------------------------------------------------------------------

mirror! {
    /// Everything `sage reliability` reports (`reliability.json`).
    pub struct ReliabilityReport = super::ReliabilityReport {
        version: String,
        cases: usize,
        primary_judge: Option<String>,
        judges: Vec<String>,
        runs_of_primary: Vec<u32>,
        annotators: Vec<String>,
        consistency: ConsistencySection,
        human: Vec<HumanComparison>,
        resampling: Option<Resampling>,
        subgroups: Vec<SubgroupTable>,
        notes: Vec<String>,
    }
}

// ---- Table 6(a), Figure 5: consistency of origins ---------------------------------------

mirror! {
    /// The three comparisons of origin assignments (repeated scoring, cross judge, all).
    pub struct ConsistencySection = super::ConsistencySection {
        /// The primary judge's runs ("Repeated scoring").
        repeated: Option<Consistency>,
        /// The first run of every judge ("Cross judge").
        cross_judge: Option<Consistency>,
        /// All runs of all judges ("All four ratings" in the paper).
        all_ratings: Option<Consistency>,
    }
}

mirror! {
    /// One comparison of origin assignments.
    pub struct Consistency = measures::Consistency {
        sources: Vec<String>,
        /// Cases rated by every source.
        cases: usize,
        /// Cases localized by every source (the eligible cases of the measures below).
        joint_localization: Share,
        type_agreement: Share,
        exact_turn_agreement: Share,
        within_one_turn: Share,
        type_alpha: Coefficient,
        turn_alpha: Coefficient,
        turn_alpha_level: Level,
        /// Ordinal alpha of each score at the origin turn (TR DI VR SA).
        score_alpha: Vec<Coefficient>,
        /// Score differences per dimension (TR DI VR SA).
        score_differences: Vec<ScoreDifferences>,
    }
}

mirror! {
    /// A count out of a total.
    pub struct Share = measures::Share {
        count: usize,
        total: usize,
    }
}

mirror! {
    /// A coefficient, the units that entered it, or why it has no value.
    pub struct Coefficient = measures::Coefficient {
        value: Option<f64>,
        /// Units that entered it.
        n: usize,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    }
}

words! {
    /// Level of measurement of an alpha.
    #[serde(rename_all = "lowercase")]
    pub enum Level = stats::Level {
        Nominal,
        Ordinal,
        Interval,
        Ratio,
    }
}

mirror! {
    /// Score differences between sources on one dimension.
    pub struct ScoreDifferences = measures::ScoreDifferences {
        same: usize,
        one: usize,
        two_or_more: usize,
    }
}

// ---- Table 6(c): agreement with humans --------------------------------------------------

mirror! {
    /// Two label sets compared on code provenance and the introducing write.
    pub struct HumanComparison = super::HumanComparison {
        /// `R1 vs R2`, `SAGE vs R1`, ...
        comparison: String,
        /// `shared` (labelled by every annotator) or `all`.
        cases: String,
        provenance: PairAgreement,
        introducing_write: PairAgreement,
    }
}

mirror! {
    /// Percent agreement and Cohen's kappa on one label.
    pub struct PairAgreement = measures::PairAgreement {
        /// Cases labelled by both.
        n: usize,
        agreement: Share,
        kappa: Coefficient,
    }
}

// ---- Table 6(b): task-disjoint resampling -----------------------------------------------

mirror! {
    /// SAGE against the first annotator, resampled by task.
    pub struct Resampling = super::Resampling {
        /// The annotator SAGE is compared with (the first).
        annotator: String,
        tasks: usize,
        provenance: ResamplingField,
        introducing_write: ResamplingField,
    }
}

mirror! {
    /// One label resampled.
    pub struct ResamplingField = super::ResamplingField {
        /// Percent agreement on all cases.
        all: Option<f64>,
        n: usize,
        partitions: PartitionSummary,
        leave_one_task_out: LeaveOneOut,
    }
}

mirror! {
    /// The statistic over random task-disjoint halves.
    pub struct PartitionSummary = resample::PartitionSummary {
        partitions: usize,
        seed: u64,
        /// Halves on which the statistic was defined.
        values: usize,
        median: Option<f64>,
        /// The 2.5th and 97.5th percentiles.
        central_95: Option<(f64, f64)>,
    }
}

mirror! {
    /// The statistic with each task left out in turn.
    pub struct LeaveOneOut = resample::LeaveOneOut {
        tasks: usize,
        min: Option<f64>,
        max: Option<f64>,
        /// The task whose exclusion gave the minimum / maximum.
        min_without: Option<String>,
        max_without: Option<String>,
    }
}

// ---- Table 7, Figure 6: subgroups -------------------------------------------------------

mirror! {
    /// One subgroup dimension (framework, base model, deficiency, condition).
    pub struct SubgroupTable = super::SubgroupTable {
        subgroup: String,
        rows: Vec<SubgroupRow>,
    }
}

mirror! {
    /// One group of a subgroup dimension.
    pub struct SubgroupRow = super::SubgroupRow {
        group: String,
        n: usize,
        /// Fewer than ten cases.
        small: bool,
        /// SAGE vs the first annotator.
        provenance: Option<Share>,
        introducing_write: Option<Share>,
        /// Exact origin-turn agreement among jointly localized cases.
        turn_repeated: Option<Share>,
        turn_cross_judge: Option<Share>,
    }
}
