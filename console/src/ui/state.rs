//! What every handler reads: the flags, the stage, the catalog, the guards and the
//! confirmations.

use std::sync::Arc;

use schedkit::aws::SdkConfig;
use schedkit::catalog::Catalog;
use schedkit::ops::stage::Stage;

use super::access::Access;
use super::html;
use super::once;
use crate::cli::Globals;

/// What every handler reads: the flags (for the actions, which are the commands'), the
/// stage's resources and the catalog.
pub(crate) struct Ui {
    pub globals: Globals,
    pub sdk: SdkConfig,
    pub stage: Stage,
    pub catalog: Catalog,
    pub access: Arc<Access>,
    /// The confirmations issued, each usable once, and what the used ones did.
    pub confirmations: once::Confirmations,
}

pub(crate) type Shared = Arc<Ui>;

impl Ui {
    /// The frame of a page in `section`.
    pub fn frame<'a>(&'a self, title: &'a str, section: &'a str) -> html::Frame<'a> {
        html::Frame {
            title,
            section,
            stage: &self.stage.stage,
            refresh: None,
        }
    }
}
