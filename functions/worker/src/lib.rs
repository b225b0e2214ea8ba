//! The example jobs of schedkit's worker, one per behaviour the framework must handle, and
//! the catalog they are run by. `main.rs` hands them to the library's worker entry point;
//! the tests run them in-process the same way.

pub mod jobs;

use schedkit::worker::EmbeddedCatalog;

/// The job catalog the worker is built with (`SCHEDKIT_CATALOG` replaces it at start-up).
pub const CATALOG: EmbeddedCatalog = EmbeddedCatalog::new(
    "infra/catalog.toml",
    include_str!("../../../infra/catalog.toml"),
);
