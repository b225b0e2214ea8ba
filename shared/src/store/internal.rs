//! schedkit's own items in the executions table, and the key space they live in.
//!
//! Beside the execution records, the table holds items that are not runs: a job's overlap
//! slot, a job's pause and failure streak, the permits of flow-control gates (`limit/`,
//! `concurrency/`; see [`crate::flow`]) and the audit trail's entries (`audit/`). They live
//! under keys that start with [`INTERNAL_PREFIX`], and no execution key may: an explicit
//! key, a key template's output, a chain step's key or a derived `<job>#<time>` that would
//! start with it is refused as poison ([`crate::key::execution_key`]), so no message can
//! name, run over or delete one of these items, and no operator action on an internal item
//! can reach a run.

/// What every internal item's key starts with, and no execution key may.
pub const INTERNAL_PREFIX: &str = ".schedkit/";

/// Whether `key` lies in schedkit's own key space.
pub fn is_internal(key: &str) -> bool {
    key.starts_with(INTERNAL_PREFIX)
}

/// The item of `job`'s overlap slot: the run holding it, and the run waiting for it.
pub fn slot_key(job: &str) -> String {
    format!("{INTERNAL_PREFIX}overlap/{job}")
}

/// The item of `job`'s own state: its pause (who, when, why) and its streak of FAILED
/// runs, one item so that one conditional write decides between them (a resume forgets the
/// streak a pending automatic pause was counted on).
pub fn job_key(job: &str) -> String {
    format!("{INTERNAL_PREFIX}job/{job}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_internal_key_is_in_the_reserved_space_and_names_its_job() {
        for key in [slot_key("long-report"), job_key("long-report")] {
            assert!(is_internal(&key), "{key}");
            assert!(key.ends_with("/long-report"), "{key}");
        }
        assert_ne!(slot_key("a"), job_key("a"));
        assert!(!is_internal("pause#long-report"));
        assert!(!is_internal("long-report#2026-12-01T00:00:00Z"));
    }
}
