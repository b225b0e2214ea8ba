//! Dead letters, in the one format schedkit writes and reads: the worker sends the original
//! body to the jobs DLQ with message attributes that say why (reason, error, job, key,
//! attempts, failed at, source queue and message), and only then lets the source message
//! be deleted, so a crash in between leaves a duplicate, never a loss; the operator's code
//! reads the same attributes back ([`DeadLetter::read`]). The schedule DLQ's letters are
//! EventBridge Scheduler's own format ([`SchedulerDeadLetter`]), which the local firing
//! engine writes as AWS does.

mod letter;
mod scheduler;

pub use letter::DeadLetter;
pub use scheduler::SchedulerDeadLetter;

/// The reason shown for a letter that SQS's own redrive policy moved (it has no reason
/// attribute: the worker died before it decided).
pub const REDRIVE_POLICY: &str = "redrive-policy";

/// Message attribute names on dead letters (SQS allows ten per message; we use eight).
pub mod attr {
    /// Why it was dead-lettered: a [`DeadLetterReason`](super::DeadLetterReason) as text.
    pub const REASON: &str = "schedkit.reason";
    /// The last error, cut to 1024 bytes (marked `…`); `-` when there was none.
    pub const ERROR: &str = "schedkit.error";
    /// The job the envelope named (at most 512 bytes); absent when it named none.
    pub const JOB: &str = "schedkit.job";
    /// The execution key (at most 512 bytes); absent when none could be derived.
    pub const KEY: &str = "schedkit.key";
    /// Attempts of the round that failed, a `Number`; 0 for a message rejected unrun.
    pub const ATTEMPTS: &str = "schedkit.attempts";
    /// When the worker gave up, RFC 3339 in UTC with milliseconds.
    pub const FAILED_AT: &str = "schedkit.failed-at";
    /// URL of the jobs queue the message was taken from.
    pub const SOURCE_QUEUE: &str = "schedkit.source-queue";
    /// The message's id on the jobs queue; absent when it was not known.
    pub const SOURCE_MESSAGE_ID: &str = "schedkit.source-message-id";
}

/// Why a message was dead-lettered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum DeadLetterReason {
    /// Not an envelope: not JSON, missing or mistyped fields, an unusable key.
    Poison,
    /// An envelope for a job this worker does not know.
    UnknownJob,
    /// The key was already used with a different payload.
    KeyConflict,
    /// Every attempt of the round failed.
    AttemptsExhausted,
    /// The job said trying again cannot help.
    PermanentError,
    /// The execution store refused the run's record for good (a validation error, access
    /// denied, a record that no longer decodes): retrying cannot help until someone fixes it.
    StoreRefused,
    /// The message names a record it does not own: a chain's end for a run that is not
    /// that chain's, or not from the execution that owns it; a step's message whose job or
    /// key is not its step's. The record is left as it was.
    RecordMismatch,
    /// The worker cannot do what the message asks with its settings: a chain whose state
    /// machine it does not know, or that Step Functions refused to start. Fix the worker's
    /// settings, then redrive.
    Unconfigured,
    /// The run waited for its job's limits longer than the job's `max_wait_seconds`
    /// (see [`crate::flow`]): its record is FAILED, unrun. Raise the limit or the wait,
    /// then redrive.
    LimitWait,
}

impl DeadLetterReason {
    /// Every reason, for whoever lists them (the web page's filter): a reason added here
    /// is one the page can select.
    pub const ALL: [DeadLetterReason; 9] = [
        DeadLetterReason::Poison,
        DeadLetterReason::UnknownJob,
        DeadLetterReason::KeyConflict,
        DeadLetterReason::AttemptsExhausted,
        DeadLetterReason::PermanentError,
        DeadLetterReason::StoreRefused,
        DeadLetterReason::RecordMismatch,
        DeadLetterReason::Unconfigured,
        DeadLetterReason::LimitWait,
    ];

    /// The text sent in the `schedkit.reason` attribute, which operators select on.
    pub fn as_str(self) -> &'static str {
        match self {
            DeadLetterReason::Poison => "poison",
            DeadLetterReason::UnknownJob => "unknown-job",
            DeadLetterReason::KeyConflict => "key-conflict",
            DeadLetterReason::AttemptsExhausted => "attempts-exhausted",
            DeadLetterReason::PermanentError => "permanent-error",
            DeadLetterReason::StoreRefused => "store-refused",
            DeadLetterReason::RecordMismatch => "record-mismatch",
            DeadLetterReason::Unconfigured => "unconfigured",
            DeadLetterReason::LimitWait => "limit-wait",
        }
    }
}

impl std::fmt::Display for DeadLetterReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
