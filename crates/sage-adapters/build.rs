//! The embedded data files every trace read needs at start-up: detection rules, turn kinds,
//! mappings (see `../sage-trace/embed_build.rs`).

const FILES: &[&str] = &[
    "mappings/detect.toml",
    "mappings/turn-kinds.toml",
    "mappings/ag2.toml",
    "mappings/who-and-when.toml",
    "mappings/camel.toml",
    "mappings/deepagents.toml",
    "mappings/claude-stream.toml",
];

#[path = "../sage-trace/src/required.rs"]
#[allow(dead_code)]
mod required;

#[path = "../sage-trace/embed_build.rs"]
mod embed_build;

fn main() {
    println!("cargo:rerun-if-changed=../sage-trace/embed_build.rs");
    embed_build::embed(FILES);
}
