//! The pieces every generated resource is written with: logical ids, quoted strings, and
//! where alarms notify. A leaf: the template's parts and the chains' resources build on it.

pub use crate::catalog::logical_id;

/// `text` as a YAML (JSON) string, quoted and escaped.
pub(super) fn q(text: &str) -> String {
    serde_json::to_string(text).expect("a string serialises")
}

/// Where an alarm notifies: the stage's own topic, or the one it was given.
pub(super) const NOTIFY: &str =
    "[!If [CreateTopic, !Ref NotificationTopic, !Ref NotificationTarget]]";
