//! Origin-level measures of the paper's reliability evaluation (section 3.4, Table 6, Figure 5),
//! on simple input structs so they do not depend on the results format.
//!
//! A *source* is one set of origin assignments over the cases: a judge run, or another judge.
//! Consistency compares sources; agreement with humans compares artefact labels (code
//! provenance, introducing write) with annotators. The two are kept apart on purpose.

use crate::stats::{
    alpha_coded, cohen_kappa, percent_agreement, AgreementWeights, Coded, KappaWeights, Label,
    Level, Scores, StatError,
};
use std::collections::{BTreeMap, BTreeSet};

/// The four scores at the origin turn, in the order TR, DI, VR, SA.
pub type OriginScores = [u8; 4];

/// Dimension names in the order of [`OriginScores`].
pub const DIMENSIONS: [&str; 4] = ["TR", "DI", "VR", "SA"];

/// One source's origin for one case.
#[derive(Debug, Clone, PartialEq)]
pub struct OriginRating {
    pub case_id: String,
    /// `None` when the case is undetermined for this source.
    pub origin: Option<Origin>,
}

/// A localized origin.
#[derive(Debug, Clone, PartialEq)]
pub struct Origin {
    pub origin_type: String,
    pub turn: u32,
    /// Scores at the origin turn, when recorded.
    pub scores: Option<OriginScores>,
}

/// A named set of origin assignments (e.g. `judge-a run 2`).
#[derive(Debug, Clone, PartialEq)]
pub struct Source {
    pub name: String,
    pub ratings: Vec<OriginRating>,
}

/// A count out of a total, with its percentage.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Share {
    pub count: usize,
    pub total: usize,
}

impl Share {
    pub fn percent(&self) -> Option<f64> {
        (self.total > 0).then(|| 100.0 * self.count as f64 / self.total as f64)
    }
}

/// A coefficient or why it has none.
#[derive(Debug, Clone, PartialEq)]
pub struct Coefficient {
    pub value: Option<f64>,
    /// Units that entered it.
    pub n: usize,
    pub reason: Option<String>,
}

impl Coefficient {
    pub(crate) fn from_result(r: Result<crate::stats::Estimate, StatError>) -> Coefficient {
        match r {
            Ok(e) => Coefficient {
                value: Some(e.value),
                n: e.units,
                reason: None,
            },
            Err(StatError::Undefined { reason } | StatError::Invalid { reason }) => Coefficient {
                value: None,
                n: 0,
                reason: Some(reason),
            },
        }
    }
}

/// Score differences between sources on one dimension (max - min over sources).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct ScoreDifferences {
    pub same: usize,
    pub one: usize,
    pub two_or_more: usize,
}

/// Table 6(a) for one comparison, plus Figure 5.
#[derive(Debug, Clone, PartialEq)]
pub struct Consistency {
    pub sources: Vec<String>,
    /// Cases rated by every source.
    pub cases: usize,
    /// Cases localized by every source (the eligible cases of the other measures).
    pub joint_localization: Share,
    pub type_agreement: Share,
    pub exact_turn_agreement: Share,
    pub within_one_turn: Share,
    /// Nominal alpha of the origin type over cases with at least two ratings.
    pub type_alpha: Coefficient,
    /// Alpha of the origin turn (level given) over cases with at least two ratings.
    pub turn_alpha: Coefficient,
    pub turn_alpha_level: Level,
    /// Ordinal alpha of each score at the origin turn, jointly localized cases (TR DI VR SA).
    pub score_alpha: Vec<Coefficient>,
    /// Distribution of score differences, jointly localized cases (TR DI VR SA).
    pub score_differences: Vec<ScoreDifferences>,
}

/// Consistency of origin assignments across sources (Table 6(a), Figure 5).
pub fn consistency(sources: &[Source], turn_level: Level) -> Consistency {
    // Cases present in every source, in a stable order.
    let maps: Vec<BTreeMap<&str, &OriginRating>> = sources
        .iter()
        .map(|s| s.ratings.iter().map(|r| (r.case_id.as_str(), r)).collect())
        .collect();
    let common: Vec<&str> = match maps.first() {
        Some(first) => first
            .keys()
            .copied()
            .filter(|c| maps.iter().all(|m| m.contains_key(c)))
            .collect(),
        None => Vec::new(),
    };
    let mut joint = 0;
    let (mut same_type, mut same_turn, mut near_turn) = (0, 0, 0);
    let mut diffs = vec![ScoreDifferences::default(); 4];
    // Raters × units data for alpha: units = cases.
    let k = sources.len();
    let mut types: Vec<Vec<Option<Label>>> = vec![Vec::new(); k];
    let mut turns: Vec<Vec<Option<Label>>> = vec![Vec::new(); k];
    let mut scores: Vec<Vec<Vec<Option<Label>>>> = vec![vec![Vec::new(); k]; 4];
    for case in &common {
        let origins: Vec<Option<&Origin>> = maps.iter().map(|m| m[case].origin.as_ref()).collect();
        for (s, o) in origins.iter().enumerate() {
            types[s].push(o.map(|o| Label::text(o.origin_type.clone())));
            turns[s].push(o.and_then(|o| Label::num(f64::from(o.turn))));
        }
        if !origins.iter().all(Option::is_some) {
            continue;
        }
        let origins: Vec<&Origin> = origins.into_iter().flatten().collect();
        joint += 1;
        same_type += usize::from(
            origins
                .iter()
                .all(|o| o.origin_type == origins[0].origin_type),
        );
        let lo = origins.iter().map(|o| o.turn).min().unwrap_or(0);
        let hi = origins.iter().map(|o| o.turn).max().unwrap_or(0);
        same_turn += usize::from(lo == hi);
        near_turn += usize::from(hi - lo <= 1);
        for d in 0..4 {
            let vals: Vec<Option<u8>> = origins.iter().map(|o| o.scores.map(|s| s[d])).collect();
            for (s, v) in vals.iter().enumerate() {
                scores[d][s].push(v.and_then(|v| Label::num(f64::from(v))));
            }
            let present: Vec<u8> = vals.into_iter().flatten().collect();
            if present.len() == k {
                let spread =
                    present.iter().max().unwrap_or(&0) - present.iter().min().unwrap_or(&0);
                match spread {
                    0 => diffs[d].same += 1,
                    1 => diffs[d].one += 1,
                    _ => diffs[d].two_or_more += 1,
                }
            }
        }
    }
    let alpha = |rows: &[Vec<Option<Label>>], level: Level| -> Coefficient {
        if rows.iter().all(Vec::is_empty) {
            return Coefficient {
                value: None,
                n: 0,
                reason: Some("no case".into()),
            };
        }
        Coefficient::from_result(Coded::new(rows).and_then(|c| alpha_coded(&c, level)))
    };
    let share = |count| Share {
        count,
        total: joint,
    };
    Consistency {
        sources: sources.iter().map(|s| s.name.clone()).collect(),
        cases: common.len(),
        joint_localization: Share {
            count: joint,
            total: common.len(),
        },
        type_agreement: share(same_type),
        exact_turn_agreement: share(same_turn),
        within_one_turn: share(near_turn),
        type_alpha: alpha(&types, Level::Nominal),
        turn_alpha: alpha(&turns, turn_level),
        turn_alpha_level: turn_level,
        score_alpha: scores.iter().map(|r| alpha(r, Level::Ordinal)).collect(),
        score_differences: diffs,
    }
}

/// An artefact label of one case by one source (SAGE or an annotator).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtefactLabel {
    pub case_id: String,
    /// `inherited`, `agent-introduced`, `no-code-location`, or the annotator's word.
    pub provenance: Option<String>,
    /// `turn:N`, `none` (no introducing write) or `cannot-determine`.
    pub introducing_write: Option<String>,
}

/// Which artefact label to compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArtefactField {
    Provenance,
    IntroducingWrite,
}

impl ArtefactField {
    pub fn get(self, l: &ArtefactLabel) -> Option<&str> {
        match self {
            ArtefactField::Provenance => l.provenance.as_deref(),
            ArtefactField::IntroducingWrite => l.introducing_write.as_deref(),
        }
    }
}

/// Percent agreement and Cohen's kappa of two label sets on one field (Table 6(c)).
#[derive(Debug, Clone, PartialEq)]
pub struct PairAgreement {
    /// Cases labelled by both.
    pub n: usize,
    pub agreement: Share,
    pub kappa: Coefficient,
}

/// Compares two label sets on the cases both labelled (restricted to `cases` when given).
pub(crate) fn pair_agreement(
    a: &[ArtefactLabel],
    b: &[ArtefactLabel],
    field: ArtefactField,
    cases: Option<&BTreeSet<String>>,
) -> PairAgreement {
    let bm: BTreeMap<&str, &ArtefactLabel> = b.iter().map(|l| (l.case_id.as_str(), l)).collect();
    let mut r1 = Vec::new();
    let mut r2 = Vec::new();
    for la in a {
        if cases.is_some_and(|c| !c.contains(&la.case_id)) {
            continue;
        }
        let Some(lb) = bm.get(la.case_id.as_str()) else {
            continue;
        };
        if let (Some(x), Some(y)) = (field.get(la), field.get(lb)) {
            r1.push(Some(Label::text(x)));
            r2.push(Some(Label::text(y)));
        }
    }
    let n = r1.len();
    let same = r1.iter().zip(&r2).filter(|(x, y)| x == y).count();
    let data = vec![r1, r2];
    let kappa = if n == 0 {
        Coefficient {
            value: None,
            n: 0,
            reason: Some("no case labelled by both".into()),
        }
    } else {
        Coefficient::from_result(
            Coded::new(&data)
                .and_then(|c| cohen_kappa(&c, KappaWeights::Unweighted, Scores::Position)),
        )
    };
    // Percent agreement equals the share of identical labels for two raters.
    debug_assert!(
        n == 0
            || Coded::new(&data)
                .and_then(|c| percent_agreement(&c, AgreementWeights::Identity))
                .map(|e| (e.value - same as f64 / n as f64).abs() < 1e-12)
                .unwrap_or(false)
    );
    PairAgreement {
        n,
        agreement: Share {
            count: same,
            total: n,
        },
        kappa,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rating(case: &str, t: Option<(&str, u32, [u8; 4])>) -> OriginRating {
        OriginRating {
            case_id: case.into(),
            origin: t.map(|(ty, turn, s)| Origin {
                origin_type: ty.into(),
                turn,
                scores: Some(s),
            }),
        }
    }

    #[test]
    fn consistency_counts_joint_cases() {
        let a = Source {
            name: "run1".into(),
            ratings: vec![
                rating("c1", Some(("U", 3, [2, 1, 0, 0]))),
                rating("c2", Some(("I", 5, [1, 1, 1, 1]))),
                rating("c3", None),
                rating("c4", Some(("U", 2, [3, 3, 0, 1]))),
            ],
        };
        let b = Source {
            name: "run2".into(),
            ratings: vec![
                rating("c1", Some(("U", 3, [2, 1, 0, 0]))),
                rating("c2", Some(("U", 6, [1, 2, 3, 1]))),
                rating("c3", Some(("U", 1, [0, 0, 0, 0]))),
                rating("c4", Some(("U", 2, [3, 3, 1, 1]))),
            ],
        };
        let c = consistency(&[a, b], Level::Nominal);
        assert_eq!(c.cases, 4);
        assert_eq!(c.joint_localization.count, 3);
        assert_eq!(c.type_agreement.count, 2);
        assert_eq!(c.exact_turn_agreement.count, 2);
        assert_eq!(c.within_one_turn.count, 3);
        assert_eq!(c.score_differences[0].same, 3);
        assert_eq!(c.score_differences[2].two_or_more, 1);
        assert_eq!(c.score_differences[2].one, 1);
        assert_eq!(c.type_alpha.n, 3, "c3 has one rating");
    }

    #[test]
    fn pair_agreement_counts_shared_cases() {
        let l = |c: &str, p: &str| ArtefactLabel {
            case_id: c.into(),
            provenance: Some(p.into()),
            introducing_write: None,
        };
        let a = vec![
            l("1", "inherited"),
            l("2", "inherited"),
            l("3", "agent-introduced"),
        ];
        let b = vec![
            l("1", "inherited"),
            l("3", "inherited"),
            l("4", "inherited"),
        ];
        let r = pair_agreement(&a, &b, ArtefactField::Provenance, None);
        assert_eq!(r.n, 2);
        assert_eq!(r.agreement.count, 1);
        let w = pair_agreement(&a, &b, ArtefactField::IntroducingWrite, None);
        assert_eq!(w.n, 0);
        assert!(w.kappa.value.is_none());
    }
}
