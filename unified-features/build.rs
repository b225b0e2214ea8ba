//! Empty: cargo resolves a package's `[build-dependencies]` only when it has a build script,
//! and those entries give the crates compiled for build scripts and procedural macros the
//! workspace's features (see `Cargo.toml`).
fn main() {}
