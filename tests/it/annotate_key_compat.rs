//! Annotation keys written before `sage.annotation-packet/1` had types of its own (issue 30)
//! still read: `tests/fixtures/annotate-key-main/key.json` was written by `sage annotate
//! export` (see its README). `sage annotate import --key` reads keys back, so it must load and
//! write back byte for byte, and resolve a sheet's packet ids to the cases.

use sage_pipeline::annotate::{self, Key, PACKET_VERSION};
use std::collections::BTreeMap;
use std::path::Path;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

#[test]
fn an_annotation_key_written_by_main_reads_and_writes_back_byte_for_byte() {
    let path = Path::new(ROOT).join("tests/fixtures/annotate-key-main/key.json");
    let text = std::fs::read_to_string(path).unwrap();
    // as `sage annotate import --key` reads it
    let key: Key = sage_trace::json::parse(&text).unwrap();
    assert_eq!(key.version, PACKET_VERSION);
    assert_eq!(key.annotator, "R1");
    assert_eq!(key.packets.len(), 29);
    let back = serde_json::to_string_pretty(&key).unwrap() + "\n";
    assert_eq!(back, text, "key.json does not write back as main wrote it");

    let sheet =
        "packet_id,annotator,provenance,introducing_write\nP-1188af7c17,R1,agent-introduced,none\n";
    let (rows, errors) = annotate::validate_sheet(sheet, Some(&key), &BTreeMap::new());
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].case_id, "ag2-fig1a-aes-ecb");
}
