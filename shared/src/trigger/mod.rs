//! The trigger layer on EventBridge Scheduler: the catalog's schedules kept in sync with it
//! ([`sync`]), one-off runs ([`one_off`]), backfills of past spans ([`backfill`]), pause and resume ([`pause`]), and the
//! envelope template they send ([`template`]). The local firing engine that stands in for the scheduler where it never
//! fires (LocalStack) is not here but in `localstack/firing-engine`: it is an emulator, and
//! the library knows none.

#[cfg(feature = "trigger")]
pub mod backfill;
#[cfg(feature = "trigger")]
pub mod one_off;
#[cfg(feature = "trigger")]
pub mod paced;
pub mod pause;
#[cfg(feature = "trigger")]
pub mod sync;
pub mod template;

pub use error::TriggerError;

mod error;

/// A schedule as the Scheduler API holds it; None when the group has none by that name (a
/// job never synced, a one-time schedule that fired and deleted itself).
pub async fn stored_schedule(
    client: &aws_sdk_scheduler::Client,
    group: &str,
    name: &str,
) -> Result<
    Option<aws_sdk_scheduler::operation::get_schedule::GetScheduleOutput>,
    crate::aws::AwsError,
> {
    match client
        .get_schedule()
        .group_name(group)
        .name(name)
        .send()
        .await
    {
        Ok(s) => Ok(Some(s)),
        Err(e)
            if e.as_service_error()
                .is_some_and(|e| e.is_resource_not_found_exception()) =>
        {
            Ok(None)
        }
        Err(e) => Err(crate::aws::AwsError::of(
            format!("reading schedule {group}/{name}"),
            &e,
        )),
    }
}

/// The group one-time schedules live in, beside the catalog's `group` (sync never touches
/// it; the firing engine watches both).
pub fn once_group(group: &str) -> String {
    format!("{group}-once")
}
