//! The example worker: schedkit's worker entry point serving the example jobs, bound to the
//! policies of `infra/catalog.toml`. Lambda mode or polling mode, settings, signals and
//! telemetry are the library's (`schedkit::worker`).

use std::process::ExitCode;

use schedkit_worker::{CATALOG, jobs};

fn main() -> ExitCode {
    schedkit::worker::main(CATALOG, |setup| {
        let effects =
            jobs::EffectsTable::new(setup.dynamodb(), setup.settings.effects_table.clone());
        jobs::all(effects)
    })
}
