//! The urgent queue beside each jobs queue: where runs of a positive priority wait, so that
//! an operator's urgent `fire` or a customer-facing export never queues behind a night's
//! backfill.
//!
//! SQS has no priorities: a poller cannot find one urgent message among 10,000 without
//! receiving them all. So a run of priority above 0 is sent to a second queue, named after
//! the first with [`URGENT_SUFFIX`] (`schedkit-prod-jobs-urgent` beside
//! `schedkit-prod-jobs`), which every worker reads beside its own: the poller keeps a
//! receive on it open at all times, Lambda has a second event source on it. Neither queue
//! starves the other: both are read at once, the urgent one only adds to what is in hand.
//! Within the urgent queue, and within a limit's line, the priority orders runs as before.
//!
//! A receipt from the urgent queue is tagged ([`tagged`]) wherever it goes (a limit's line
//! keeps waiters' receipts), so that whoever hides, deletes or sends again a copy reaches
//! the queue it came from.

/// What an urgent queue's name adds to its jobs queue's name.
pub const URGENT_SUFFIX: &str = "-urgent";

/// What a receipt from the urgent queue starts with. SQS's receipts are base64, which
/// never holds a `:`.
const RECEIPT_TAG: &str = "urgent:";

/// The urgent queue beside the jobs queue `queue_url` (a URL or an ARN: both end with the
/// queue's name).
pub fn urgent_queue_of(queue: &str) -> String {
    format!("{queue}{URGENT_SUFFIX}")
}

/// Whether a run of `priority` (its envelope's, else its job's) goes to the urgent queue:
/// any above 0, the default.
pub fn is_urgent(priority: i32) -> bool {
    priority > 0
}

/// The queue a run of `priority` is sent to: the urgent queue beside `queue` when the run
/// is urgent and the stage has one, `queue` otherwise.
pub fn queue_for<'a>(queue: &'a str, urgent: Option<&'a str>, priority: i32) -> &'a str {
    match urgent {
        Some(u) if is_urgent(priority) => u,
        _ => queue,
    }
}

/// A receipt from the urgent queue, tagged as such.
pub(crate) fn tagged(receipt: &str) -> String {
    format!("{RECEIPT_TAG}{receipt}")
}

/// The receipt as its queue knows it, and whether it came from the urgent queue.
pub(crate) fn untagged(receipt: &str) -> (bool, &str) {
    match receipt.strip_prefix(RECEIPT_TAG) {
        Some(r) => (true, r),
        None => (false, receipt),
    }
}

/// The name of the queue an ARN or URL names: its last segment.
pub(crate) fn queue_name(queue: &str) -> &str {
    queue.rsplit(['/', ':']).next().unwrap_or(queue)
}

/// Whether an SQS error (as [`crate::aws::describe`] tells it) says the urgent queue is
/// not there for this caller: it does not exist, or the caller's role names no such queue
/// (IAM answers before SQS looks: a stage deployed before it had urgent queues says
/// AccessDenied, not that the queue does not exist).
pub(crate) fn absent(error: &str) -> bool {
    ["NonExistentQueue", "QueueDoesNotExist", "AccessDenied"]
        .iter()
        .any(|code| error.contains(code))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tagged_receipt_comes_back_as_its_queue_knows_it() {
        let r = "AQEBwJnKyrHigUMZj6rYigCgxlaS3SLy0a+/==";
        assert_eq!(untagged(&tagged(r)), (true, r));
        assert_eq!(untagged(r), (false, r));
    }

    #[test]
    fn only_a_positive_priority_goes_to_the_urgent_queue_and_only_if_there_is_one() {
        let urgent = urgent_queue_of("https://sqs/1/schedkit-prod-jobs");
        assert_eq!(urgent, "https://sqs/1/schedkit-prod-jobs-urgent");
        let main = "https://sqs/1/schedkit-prod-jobs";
        assert_eq!(queue_for(main, Some(&urgent), 1), urgent);
        assert_eq!(queue_for(main, Some(&urgent), 0), main);
        assert_eq!(queue_for(main, Some(&urgent), -3), main);
        assert_eq!(queue_for(main, None, 10), main);
    }

    #[test]
    fn a_queue_not_there_or_not_granted_is_absent_and_a_throttle_is_not() {
        assert!(absent(
            "AWS.SimpleQueueService.NonExistentQueue: The specified queue does not exist."
        ));
        assert!(absent("QueueDoesNotExist: no queue"));
        assert!(absent(
            "AccessDenied: User: arn:aws:sts::1:assumed-role/w is not authorized to perform: sqs:receivemessage on resource: arn:aws:sqs:eu-west-1:1:schedkit-dev-jobs-urgent"
        ));
        assert!(!absent("ThrottlingException: Rate exceeded"));
        assert!(!absent("dispatch failure: io error"));
    }

    #[test]
    fn a_queue_is_named_by_its_last_segment_in_a_url_or_an_arn() {
        assert_eq!(
            queue_name("https://sqs.eu-west-1.amazonaws.com/1/q-urgent"),
            "q-urgent"
        );
        assert_eq!(queue_name("arn:aws:sqs:eu-west-1:1:q-urgent"), "q-urgent");
    }
}
