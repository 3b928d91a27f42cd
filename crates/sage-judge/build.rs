//! The embedded data files the lexicon judge reads at start-up, as JSON in `OUT_DIR`: the
//! TOML files stay the versioned source (and a user's override is TOML, parsed and checked at
//! run time); reading the embedded copy with serde_json costs a tenth of parsing the TOML.

const FILES: &[&str] = &["rubrics/lexicon.toml", "rubrics/injection.toml"];

fn main() {
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    for path in FILES {
        println!("cargo:rerun-if-changed={path}");
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
        // (`preserve_order`: tables keep their order, as the TOML parser hands them over)
        let value: toml::Value = toml::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
        let json = serde_json::to_string(&value).expect("a TOML value is JSON");
        let name = std::path::Path::new(path).with_extension("json");
        let name = name.file_name().expect("a file name");
        std::fs::write(out.join(name), json).unwrap_or_else(|e| panic!("{path}: {e}"));
    }
}
