//! The embedded data files the lexicon judge reads at start-up (see
//! `../sage-trace/embed_build.rs`).

const FILES: &[&str] = &["rubrics/lexicon.toml", "rubrics/injection.toml"];

#[path = "../sage-trace/src/required.rs"]
#[allow(dead_code)]
mod required;

#[path = "../sage-trace/embed_build.rs"]
mod embed_build;

fn main() {
    println!("cargo:rerun-if-changed=../sage-trace/embed_build.rs");
    embed_build::embed(FILES);
}
