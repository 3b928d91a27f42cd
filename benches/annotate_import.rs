//! `sage annotate import` on large sheets (plain timing, no harness):
//! `cargo bench --bench annotate_import [-- ROWS...]` (default 10000 100000 1000000). Each size
//! is a filled sheet of that many rows (one case per row, one annotator), read, validated and
//! stored exactly as the CLI does (`validate_sheet`, then `store` into an empty folder), and
//! the figure printed is rows per second end to end. Issue 29: the reader used to count the
//! lines before every row from the start of the file, so 20,000 rows took 4 s and 1,000,000
//! did not finish in 120 s.

use sage_pipeline::annotate::{store, validate_sheet};
use std::collections::BTreeMap;
use std::time::Instant;

fn sheet(rows: usize) -> String {
    let mut s = String::with_capacity(rows * 40);
    s.push_str("case_id,annotator,provenance,introducing_write,confirmation\n");
    for i in 0..rows {
        let (prov, iw) = if i % 3 == 0 {
            ("inherited", "none")
        } else {
            ("agent-introduced", "3")
        };
        s.push_str(&format!("case-{i:07},R1,{prov},{iw},TP\n"));
    }
    s
}

fn main() {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() {
        vec![10_000, 100_000, 1_000_000]
    } else {
        sizes
    };
    for n in sizes {
        let text = sheet(n);
        let dir = tempfile::tempdir().expect("temp dir");
        let t = Instant::now();
        let (rows, errors) = validate_sheet(&text, None, &BTreeMap::new());
        let read = t.elapsed();
        assert!(errors.is_empty(), "{:?}", errors.first());
        assert_eq!(rows.len(), n);
        store(dir.path(), &rows).expect("store");
        let all = t.elapsed();
        println!(
            "annotate import {n:>9} rows ({:.1} MB): read+validate {:.2} s, +store {:.2} s, {:.0} rows/s",
            text.len() as f64 / 1e6,
            read.as_secs_f64(),
            all.as_secs_f64(),
            n as f64 / all.as_secs_f64()
        );
    }
}
