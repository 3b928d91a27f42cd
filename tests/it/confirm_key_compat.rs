//! Confirmation keys written before `sage.confirm-key/1` had types of its own (issue 30) still
//! read: `tests/fixtures/confirm-key-main/key.json` was written by `sage confirm export` at main
//! 3f29153 (see its README). `sage confirm import` and `sage confirm report` read keys back, so
//! it must load and write back byte for byte.

use sage_pipeline::confirm::{Key, KEY_NAME};
use std::path::Path;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

#[test]
fn a_confirm_key_written_by_main_reads_and_writes_back_byte_for_byte() {
    let dir = Path::new(ROOT).join("tests/fixtures/confirm-key-main");
    let text = std::fs::read_to_string(dir.join(KEY_NAME)).unwrap();
    let key = Key::load(&dir).unwrap();
    assert_eq!(key.packets.len(), 10);
    assert_eq!(key.annotators["R2"].len(), 4);
    let back = serde_json::to_string_pretty(&key).unwrap() + "\n";
    assert_eq!(back, text, "key.json does not write back as main wrote it");
}
