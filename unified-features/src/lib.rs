//! No code: this crate exists for its dependency list (see `Cargo.toml`).
//!
//! Cargo compiles a third-party crate once per feature set. The workspace asks more of some
//! crates than the library alone does (the console serves HTTP, so `hyper` gets `server`;
//! the tests' `regex` wants Unicode tables), so a crate built against only `schedkit` (the
//! example worker `sam build` compiles, a team's own crate built from the book, the library
//! linted without its optional features) would compile most of the graph again, with
//! other features and so other hashes. The library depends on this crate, which asks for
//! the workspace's feature set of each such crate: every build of `schedkit` then resolves
//! the same units, and a build that shares this checkout's build directory
//! (`CARGO_BUILD_BUILD_DIR`) compiles only its own code.
#![no_std]
