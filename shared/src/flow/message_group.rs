//! The SQS `MessageGroupId` a run's message is sent with: its fair share, so that SQS's fair
//! queues (standard queues whose senders set a group) hand a quiet tenant's messages out
//! before a noisy tenant's backlog, as the limit's line does once they are received.
//!
//! On AWS a standard queue with groups is a fair queue without any setting; without groups
//! it is the plain queue it was. LocalStack keeps the group on the message (a receive
//! returns it) but delivers in its own order. A copy sent again keeps its message's group.

use serde_json::{Map, Value};

use super::FlowControl;

/// The longest group SQS takes.
const LONGEST_GROUP: usize = 128;

impl FlowControl {
    /// The group of a run of `job` with `payload`: the first `fair` share one of its limits
    /// renders (`{tenant}`: the tenant), else the key of its own concurrency (`{tenant}`
    /// too), else the job: each job's backlog is one noisy neighbour, not everyone's. None
    /// when a template cannot be filled (the worker refuses such a run anyway).
    pub fn message_group(&self, job: &str, payload: Option<&Map<String, Value>>) -> Option<String> {
        let fair = self.limits.iter().find_map(|l| l.fair.as_ref());
        let own_key = self.limits.iter().find_map(|l| l.key.as_ref());
        let text = match fair.or(own_key) {
            Some(template) => format!("{job}/{}", template.render(payload).ok()?),
            None => job.to_string(),
        };
        Some(sqs_group(&text))
    }
}

/// `text` as SQS takes a group: at most 128 characters, each an ASCII letter, digit or
/// punctuation; anything else is replaced by its hash (one text, one group, always).
pub fn sqs_group(text: &str) -> String {
    let fits = text.len() <= LONGEST_GROUP
        && !text.is_empty()
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b.is_ascii_punctuation());
    if fits {
        text.to_string()
    } else {
        format!("#{}", crate::hash::stable_hash([text.as_bytes()]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Catalog;
    use serde_json::json;

    fn group(catalog: &str, job: &str, payload: Value) -> Option<String> {
        let catalog = Catalog::parse(catalog, "c.toml").unwrap();
        let payload = payload.as_object().cloned();
        catalog.jobs[job]
            .policy
            .flow
            .message_group(job, payload.as_ref())
    }

    #[test]
    fn a_run_is_grouped_by_its_fair_share_else_its_own_key_else_its_job() {
        let fair = "[limits.api]\nconcurrency = 4\nfair = \"{tenant}\"\n[jobs.sync]\nowner = \"t\"\nlimits = [\"api\"]\n";
        assert_eq!(
            group(fair, "sync", json!({ "tenant": "acme" })).as_deref(),
            Some("sync/acme")
        );
        let own = "[jobs.sync]\nowner = \"t\"\nconcurrency = { limit = 1, key = \"{tenant}\" }\n";
        assert_eq!(
            group(own, "sync", json!({ "tenant": "acme" })).as_deref(),
            Some("sync/acme")
        );
        let plain = "[jobs.sync]\nowner = \"t\"\n";
        assert_eq!(group(plain, "sync", json!({})).as_deref(), Some("sync"));
        assert_eq!(group(fair, "sync", json!({})), None, "no tenant to fill");
    }

    #[test]
    fn a_group_sqs_would_refuse_becomes_its_hash() {
        assert_eq!(sqs_group("sync/acme-01"), "sync/acme-01");
        let spaced = sqs_group("sync/Acme Corp");
        assert!(
            spaced.starts_with('#') && spaced.len() <= LONGEST_GROUP,
            "{spaced}"
        );
        assert_eq!(spaced, sqs_group("sync/Acme Corp"), "one text, one group");
        assert_ne!(spaced, sqs_group("sync/Acme Co"));
        assert!(sqs_group(&"x".repeat(129)).starts_with('#'));
        assert!(sqs_group("sync/Zürich").starts_with('#'));
    }
}
