//! EventBridge Scheduler schedules that tests create by hand, beside the catalog's.

use aws_sdk_scheduler::Client;
use aws_sdk_scheduler::operation::create_schedule::builders::CreateScheduleFluentBuilder;
use aws_sdk_scheduler::types::{FlexibleTimeWindow, FlexibleTimeWindowMode, Target};

/// The role every test schedule names (LocalStack does not check it).
pub const SCHEDULER_ROLE: &str = "arn:aws:iam::000000000000:role/scheduler";

/// A CreateSchedule request for `group`/`name` that sends `input` (or nothing) to the
/// queue `queue_arn`, without a flexible window; the caller adds what else it needs (an
/// end date, an action after completion) and sends it.
pub fn to_queue(
    client: &Client,
    group: &str,
    name: &str,
    expression: &str,
    queue_arn: &str,
    input: Option<&str>,
) -> CreateScheduleFluentBuilder {
    client
        .create_schedule()
        .group_name(group)
        .name(name)
        .schedule_expression(expression)
        .flexible_time_window(
            FlexibleTimeWindow::builder()
                .mode(FlexibleTimeWindowMode::Off)
                .build()
                .expect("the mode is set"),
        )
        .target(
            Target::builder()
                .arn(queue_arn)
                .role_arn(SCHEDULER_ROLE)
                .set_input(input.map(str::to_owned))
                .build()
                .expect("arn and role are set"),
        )
}

/// Whether `group`/`name` exists.
pub async fn exists(client: &Client, group: &str, name: &str) -> bool {
    client
        .get_schedule()
        .group_name(group)
        .name(name)
        .send()
        .await
        .is_ok()
}
