//! Task-disjoint resampling (paper section 3.4.1 (iii), Table 6(b)): how much an agreement
//! estimate depends on which tasks are in the evaluation set.
//!
//! - Random partitions: the tasks are shuffled (ChaCha8, seeded) and split into two halves of
//!   tasks (the first ⌊n/2⌋ tasks, then the rest), so every case of a task is on one side and
//!   the halves are near-equal in *tasks*, as the paper's splits are (SAGE.md, "1,000 random
//!   splits of tasks into two near-equal halves"); their case counts follow the tasks, so a
//!   half holding the largest task is larger. The statistic is computed on each half.
//! - Leave one task out: the statistic without each task in turn; its range.

use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

/// Summary of the per-half values over all partitions.
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionSummary {
    pub partitions: usize,
    pub seed: u64,
    /// Halves on which the statistic was defined.
    pub values: usize,
    pub median: Option<f64>,
    /// Central 95 %: the 2.5th and 97.5th percentiles (linear interpolation).
    pub central_95: Option<(f64, f64)>,
}

/// Range of the statistic when each task is left out in turn.
#[derive(Debug, Clone, PartialEq)]
pub struct LeaveOneOut {
    pub tasks: usize,
    pub min: Option<f64>,
    pub max: Option<f64>,
    /// The task whose exclusion gave the minimum / maximum.
    pub min_without: Option<String>,
    pub max_without: Option<String>,
}

/// Percentile with linear interpolation between order statistics (numpy's default).
pub(crate) fn percentile(sorted: &[f64], p: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let h = (sorted.len() - 1) as f64 * p;
    let lo = h.floor() as usize;
    let hi = h.ceil() as usize;
    Some(sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo]))
}

fn tasks_of<T>(items: &[T], task: &impl Fn(&T) -> String) -> BTreeMap<String, Vec<usize>> {
    let mut by_task: BTreeMap<String, Vec<usize>> = BTreeMap::new();
    for (i, it) in items.iter().enumerate() {
        by_task.entry(task(it)).or_default().push(i);
    }
    by_task
}

/// Runs `partitions` seeded task-disjoint random splits and summarises `stat` on the halves.
/// `stat` returns `None` where it is undefined (e.g. an empty half); such halves are skipped.
pub(crate) fn task_disjoint_partitions<T>(
    items: &[T],
    task: impl Fn(&T) -> String,
    partitions: usize,
    seed: u64,
    stat: impl Fn(&[&T]) -> Option<f64>,
) -> PartitionSummary {
    let by_task = tasks_of(items, &task);
    let groups: Vec<&Vec<usize>> = by_task.values().collect();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut order: Vec<usize> = (0..groups.len()).collect();
    let mut values = Vec::with_capacity(2 * partitions);
    for _ in 0..partitions {
        order.shuffle(&mut rng);
        let mut halves: [Vec<&T>; 2] = [Vec::new(), Vec::new()];
        let cut = order.len() / 2;
        for (pos, &g) in order.iter().enumerate() {
            let side = usize::from(pos >= cut);
            halves[side].extend(groups[g].iter().map(|&i| &items[i]));
        }
        for h in &halves {
            if !h.is_empty() {
                if let Some(v) = stat(h) {
                    values.push(v);
                }
            }
        }
    }
    values.sort_by(f64::total_cmp);
    PartitionSummary {
        partitions,
        seed,
        values: values.len(),
        median: percentile(&values, 0.5),
        central_95: percentile(&values, 0.025).zip(percentile(&values, 0.975)),
    }
}

/// The statistic without each task in turn.
pub(crate) fn leave_one_task_out<T>(
    items: &[T],
    task: impl Fn(&T) -> String,
    stat: impl Fn(&[&T]) -> Option<f64>,
) -> LeaveOneOut {
    let by_task = tasks_of(items, &task);
    let mut out = LeaveOneOut {
        tasks: by_task.len(),
        min: None,
        max: None,
        min_without: None,
        max_without: None,
    };
    for (t, idx) in &by_task {
        let kept: Vec<&T> = items
            .iter()
            .enumerate()
            .filter(|(i, _)| !idx.contains(i))
            .map(|(_, it)| it)
            .collect();
        if kept.is_empty() {
            continue;
        }
        let Some(v) = stat(&kept) else { continue };
        if out.min.is_none_or(|m| v < m) {
            out.min = Some(v);
            out.min_without = Some(t.clone());
        }
        if out.max.is_none_or(|m| v > m) {
            out.max = Some(v);
            out.max_without = Some(t.clone());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Item {
        task: String,
        agree: bool,
    }

    fn share(items: &[&Item]) -> Option<f64> {
        (!items.is_empty())
            .then(|| items.iter().filter(|i| i.agree).count() as f64 / items.len() as f64)
    }

    fn items() -> Vec<Item> {
        (0..40)
            .map(|i| Item {
                task: format!("t{}", i % 7),
                agree: i % 3 != 0,
            })
            .collect()
    }

    #[test]
    fn partitions_keep_tasks_together_and_are_seeded() {
        let it = items();
        // A statistic that fails if a task is split: every half must hold whole tasks.
        let whole = |h: &[&Item]| -> Option<f64> {
            for t in 0..7 {
                let name = format!("t{t}");
                let inside = h.iter().filter(|i| i.task == name).count();
                let total = it.iter().filter(|i| i.task == name).count();
                assert!(inside == 0 || inside == total, "task {name} split");
            }
            share(h)
        };
        let a = task_disjoint_partitions(&it, |i| i.task.clone(), 200, 3, whole);
        let b = task_disjoint_partitions(&it, |i| i.task.clone(), 200, 3, share);
        assert_eq!(a, b);
        assert_eq!(a.values, 400);
        let (lo, hi) = a.central_95.expect("range");
        let med = a.median.expect("median");
        assert!(lo <= med && med <= hi);
    }

    #[test]
    fn halves_are_halves_of_tasks_not_of_cases() {
        // 19 tasks as in the paper: one with 16 cases, the others with 3 to 6. Every half must
        // hold 9 or 10 whole tasks, whatever its case count (balancing by cases would pair
        // the large task with a handful of small ones).
        let mut it = Vec::new();
        for t in 0..19 {
            let n = if t == 0 { 16 } else { 3 + t % 4 };
            for i in 0..n {
                it.push(Item {
                    task: format!("t{t}"),
                    agree: i % 2 == 0,
                });
            }
        }
        let counts = std::cell::RefCell::new(Vec::new());
        let tasks_in = |h: &[&Item]| -> Option<f64> {
            let tasks: std::collections::BTreeSet<&str> =
                h.iter().map(|i| i.task.as_str()).collect();
            counts.borrow_mut().push(tasks.len());
            share(h)
        };
        let s = task_disjoint_partitions(&it, |i| i.task.clone(), 100, 7, tasks_in);
        assert_eq!(s.values, 200);
        let c = counts.into_inner();
        assert!(c.iter().all(|n| *n == 9 || *n == 10), "{c:?}");
        assert_eq!(c.iter().filter(|n| **n == 9).count(), 100);
    }

    #[test]
    fn leave_one_out_range() {
        let it = items();
        let r = leave_one_task_out(&it, |i| i.task.clone(), share);
        assert_eq!(r.tasks, 7);
        assert!(r.min.expect("min") <= r.max.expect("max"));
    }

    #[test]
    fn percentile_interpolates() {
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0], 0.5), Some(2.5));
        assert_eq!(percentile(&[], 0.5), None);
    }
}
