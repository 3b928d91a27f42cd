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
//! [`mirror_out!`] writes a record with the same field names as its internal value; its
//! conversion takes the internal value apart with an exhaustive pattern, so each internal
//! field is named once here.

use crate::{measures, resample, stats};
use sage_schema::{mirror_out, words_out};

// ---- the report ------------------------------------------------------------------------

mirror_out! {
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

mirror_out! {
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

mirror_out! {
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

mirror_out! {
    /// A count out of a total.
    pub struct Share = measures::Share {
        count: usize,
        total: usize,
    }
}

mirror_out! {
    /// A coefficient, the units that entered it, or why it has no value.
    pub struct Coefficient = measures::Coefficient {
        value: Option<f64>,
        /// Units that entered it.
        n: usize,
        #[serde(skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    }
}

words_out! {
    /// Level of measurement of an alpha.
    #[serde(rename_all = "lowercase")]
    pub enum Level = stats::Level {
        Nominal,
        Ordinal,
        Interval,
        Ratio,
    }
}

mirror_out! {
    /// Score differences between sources on one dimension.
    pub struct ScoreDifferences = measures::ScoreDifferences {
        same: usize,
        one: usize,
        two_or_more: usize,
    }
}

// ---- Table 6(c): agreement with humans --------------------------------------------------

mirror_out! {
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

mirror_out! {
    /// Percent agreement and Cohen's kappa on one label.
    pub struct PairAgreement = measures::PairAgreement {
        /// Cases labelled by both.
        n: usize,
        agreement: Share,
        kappa: Coefficient,
    }
}

// ---- Table 6(b): task-disjoint resampling -----------------------------------------------

mirror_out! {
    /// SAGE against the first annotator, resampled by task.
    pub struct Resampling = super::Resampling {
        /// The annotator SAGE is compared with (the first).
        annotator: String,
        tasks: usize,
        provenance: ResamplingField,
        introducing_write: ResamplingField,
    }
}

mirror_out! {
    /// One label resampled.
    pub struct ResamplingField = super::ResamplingField {
        /// Percent agreement on all cases.
        all: Option<f64>,
        n: usize,
        partitions: PartitionSummary,
        leave_one_task_out: LeaveOneOut,
    }
}

mirror_out! {
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

mirror_out! {
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

mirror_out! {
    /// One subgroup dimension (framework, base model, deficiency, condition).
    pub struct SubgroupTable = super::SubgroupTable {
        subgroup: String,
        rows: Vec<SubgroupRow>,
    }
}

mirror_out! {
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
