//! EventBridge Scheduler's dead letter: what AWS puts on the schedule DLQ when it gives up
//! on a firing (the input as its last attempt sent it, and why, as attributes). The local
//! firing engine writes it as AWS does, so an operator reads both the same way.

/// A firing the scheduler gave up on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchedulerDeadLetter<'a> {
    /// The input as the last attempt sent it: the letter's body.
    pub input: &'a str,
    /// The target's error code, when it gave one (`TargetDeliveryFailed` otherwise).
    pub error_code: Option<&'a str>,
    /// The last attempt's failure (at most 1024 characters on the letter).
    pub error_message: &'a str,
    /// Why retrying stopped (`MaximumRetryAttemptsExceeded`, `MaximumEventAgeExceeded`);
    /// None when no retry could cure the error.
    pub condition: Option<&'a str>,
    /// Attempts after the first.
    pub retries: u32,
    /// The schedule.
    pub schedule_arn: &'a str,
    /// The target it could not reach.
    pub target_arn: &'a str,
}

impl SchedulerDeadLetter<'_> {
    /// Its attributes, as EventBridge Scheduler names them (all `String`): `ERROR_CODE`,
    /// `ERROR_MESSAGE`, `RETRY_ATTEMPTS`, `SCHEDULE_ARN`, `TARGET_ARN`, and
    /// `EXHAUSTED_RETRY_CONDITION` when retrying stopped.
    pub fn attributes(&self) -> Vec<(&'static str, String)> {
        let mut out = vec![
            (
                "ERROR_CODE",
                self.error_code
                    .unwrap_or("TargetDeliveryFailed")
                    .to_string(),
            ),
            (
                "ERROR_MESSAGE",
                self.error_message.chars().take(1024).collect(),
            ),
            ("RETRY_ATTEMPTS", self.retries.to_string()),
            ("SCHEDULE_ARN", self.schedule_arn.to_string()),
            ("TARGET_ARN", self.target_arn.to_string()),
        ];
        if let Some(condition) = self.condition {
            out.push(("EXHAUSTED_RETRY_CONDITION", condition.to_string()));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_letter_carries_awss_attribute_names_and_the_condition_only_when_retrying_stopped() {
        let mut letter = SchedulerDeadLetter {
            input: "{}",
            error_code: None,
            error_message: &"x".repeat(2000),
            condition: Some("MaximumRetryAttemptsExceeded"),
            retries: 3,
            schedule_arn: "arn:aws:scheduler:us-east-1:1:schedule/g/s",
            target_arn: "arn:aws:sqs:us-east-1:1:q",
        };
        let attributes: std::collections::BTreeMap<_, _> =
            letter.attributes().into_iter().collect();
        assert_eq!(attributes["ERROR_CODE"], "TargetDeliveryFailed");
        assert_eq!(attributes["ERROR_MESSAGE"].len(), 1024);
        assert_eq!(attributes["RETRY_ATTEMPTS"], "3");
        assert_eq!(
            attributes["EXHAUSTED_RETRY_CONDITION"],
            "MaximumRetryAttemptsExceeded"
        );
        letter.condition = None;
        assert!(
            !letter
                .attributes()
                .iter()
                .any(|(n, _)| *n == "EXHAUSTED_RETRY_CONDITION")
        );
    }
}
