//! The trigger layer on EventBridge Scheduler: the catalog's schedules kept in sync with it
//! ([`sync`]), one-off runs ([`one_off`]), backfills of past spans ([`backfill`]), pause and resume ([`pause`]), and the
//! envelope template they send ([`template`]). The local firing engine that stands in for the scheduler where it never
//! fires (LocalStack) is not here but in `localstack/firing-engine`: it is an emulator, and
//! the library knows none.

#[cfg(feature = "trigger")]
pub mod backfill;
#[cfg(feature = "trigger")]
pub mod one_off;
pub mod pause;
#[cfg(feature = "trigger")]
pub mod sync;
pub mod template;

pub use error::TriggerError;

mod error;

/// The group one-time schedules live in, beside the catalog's `group` (sync never touches
/// it; the firing engine watches both).
pub fn once_group(group: &str) -> String {
    format!("{group}-once")
}
