//! No code: this crate exists for its dependency list (see `Cargo.toml`).
//!
//! Cargo compiles a third-party crate once per feature set. The workspace asks more of some
//! crates than the library alone does (the console serves HTTP, so `hyper` gets `server`;
//! the tests' `regex` wants Unicode tables), so a crate built against only `schedkit` (a
//! team's own crate built from the book's "Writing jobs") would compile most of the graph
//! again, with other features and so other hashes. With the library's `unified-features`
//! feature (the starter turns it on), the library depends on this crate, which asks for
//! the workspace's feature set of each such crate: the crate then resolves the units the
//! checkout built, and sharing the checkout's build directory (`CARGO_BUILD_BUILD_DIR`) it
//! compiles only its own code and the library. Off by default: a release build (`make
//! package`, `sam build`) has no use for the wider features (tokio's `test-util`).
#![no_std]
