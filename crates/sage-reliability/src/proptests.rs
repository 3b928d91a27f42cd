//! Properties: invariance to the order of units (and raters), perfect agreement gives 1 where
//! the coefficient is defined, bounds.

use crate::stats::*;
use proptest::prelude::*;

/// Raters × units with values 0..cats and some missing.
fn ratings(max_raters: usize) -> impl Strategy<Value = Vec<Vec<Option<u8>>>> {
    (2..=max_raters, 1usize..30, 2u8..6).prop_flat_map(|(r, u, c)| {
        proptest::collection::vec(
            proptest::collection::vec(proptest::option::weighted(0.8, 0..c), u),
            r,
        )
    })
}

fn labels(d: &[Vec<Option<u8>>]) -> Vec<Vec<Option<Label>>> {
    d.iter()
        .map(|r| {
            r.iter()
                .map(|x| x.map(|v| Label::Num(f64::from(v))))
                .collect()
        })
        .collect()
}

fn permute_units(d: &[Vec<Option<u8>>], seed: usize) -> Vec<Vec<Option<u8>>> {
    let n = d[0].len();
    // A fixed permutation: rotate then reverse.
    let perm: Vec<usize> = (0..n).map(|i| (i + seed) % n).rev().collect();
    d.iter()
        .map(|r| perm.iter().map(|&i| r[i]).collect())
        .collect()
}

fn same(a: &StatResult, b: &StatResult) -> bool {
    match (a, b) {
        (Ok(x), Ok(y)) => (x.value - y.value).abs() <= 1e-9 * (1.0 + x.value.abs()),
        (Err(x), Err(y)) => std::mem::discriminant(x) == std::mem::discriminant(y),
        _ => false,
    }
}

fn all_stats(d: &[Vec<Option<u8>>]) -> Vec<StatResult> {
    let l = labels(d);
    let c = Coded::new(&l).expect("code");
    let mut out = Vec::new();
    for level in [
        Level::Nominal,
        Level::Ordinal,
        Level::Interval,
        Level::Ratio,
    ] {
        out.push(krippendorff_alpha(&l, level, None));
        out.push(alpha_coded(&c, level));
    }
    out.push(percent_agreement(&c, AgreementWeights::Identity));
    out.push(gwet_ac(&c, AgreementWeights::Identity));
    out.push(gwet_ac(&c, AgreementWeights::Quadratic));
    out.push(fleiss_kappa(&c, FleissMethod::Fleiss, FleissMissing::Gwet));
    out.push(fleiss_kappa(
        &c,
        FleissMethod::Fleiss,
        FleissMissing::Listwise,
    ));
    if d.len() == 2 {
        for w in [
            KappaWeights::Unweighted,
            KappaWeights::Linear,
            KappaWeights::Quadratic,
        ] {
            out.push(cohen_kappa(&c, w, Scores::Position));
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn invariant_to_unit_order(d in ratings(4), seed in 0usize..10) {
        let a = all_stats(&d);
        let b = all_stats(&permute_units(&d, seed));
        for (x, y) in a.iter().zip(&b) {
            prop_assert!(same(x, y), "{x:?} vs {y:?}");
        }
    }

    #[test]
    fn invariant_to_rater_order(d in ratings(4)) {
        let mut r = d.clone();
        r.reverse();
        let a = all_stats(&d);
        let b = all_stats(&r);
        // Cohen's kappa is symmetric too.
        for (x, y) in a.iter().zip(&b) {
            prop_assert!(same(x, y), "{x:?} vs {y:?}");
        }
    }

    #[test]
    fn bounds(d in ratings(5)) {
        let l = labels(&d);
        let c = Coded::new(&l).expect("code");
        for level in [Level::Nominal, Level::Ordinal, Level::Interval, Level::Ratio] {
            if let Ok(e) = krippendorff_alpha(&l, level, None) {
                prop_assert!(e.value <= 1.0 + 1e-12 && e.value.is_finite());
                prop_assert!(e.observed >= 0.0);
            }
        }
        if let Ok(e) = percent_agreement(&c, AgreementWeights::Identity) {
            prop_assert!((0.0..=1.0).contains(&e.value));
        }
        if let Ok(e) = gwet_ac(&c, AgreementWeights::Identity) {
            prop_assert!(e.value <= 1.0 + 1e-12 && e.value.is_finite());
        }
        if let Ok(e) = fleiss_kappa(&c, FleissMethod::Fleiss, FleissMissing::Listwise) {
            prop_assert!(e.value <= 1.0 + 1e-12 && e.value.is_finite());
        }
        if d.len() == 2 {
            if let Ok(e) = cohen_kappa(&c, KappaWeights::Unweighted, Scores::Position) {
                prop_assert!((-1.0 - 1e-12..=1.0 + 1e-12).contains(&e.value));
            }
        }
    }

    #[test]
    fn perfect_agreement_is_one_where_defined(
        truth in proptest::collection::vec(0u8..5, 1..30),
        raters in 2usize..5,
        holes in proptest::collection::vec(any::<bool>(), 0..150),
    ) {
        let d: Vec<Vec<Option<u8>>> = (0..raters)
            .map(|r| truth.iter().enumerate().map(|(u, &v)| {
                let hole = holes.get(r * truth.len() + u).copied().unwrap_or(false);
                (!hole).then_some(v)
            }).collect())
            .collect();
        let l = labels(&d);
        let c = Coded::new(&l).expect("code");
        let mut results = Vec::new();
        for level in [Level::Nominal, Level::Ordinal, Level::Interval, Level::Ratio] {
            results.push(krippendorff_alpha(&l, level, None));
        }
        results.push(percent_agreement(&c, AgreementWeights::Identity));
        results.push(gwet_ac(&c, AgreementWeights::Identity));
        results.push(fleiss_kappa(&c, FleissMethod::Fleiss, FleissMissing::Gwet));
        if raters == 2 {
            results.push(cohen_kappa(&c, KappaWeights::Quadratic, Scores::Position));
        }
        for r in results {
            match r {
                Ok(e) => prop_assert!((e.value - 1.0).abs() < 1e-12, "{e:?}"),
                Err(StatError::Undefined { .. }) => {}
                Err(e) => prop_assert!(false, "{e}"),
            }
        }
    }
}
