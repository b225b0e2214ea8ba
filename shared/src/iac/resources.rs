//! The pieces every generated resource is written with: logical ids, quoted strings, and
//! where alarms notify. A leaf: the template's parts and the chains' resources build on it.

/// `long-report` → `LongReport`: a CloudFormation logical id.
pub fn logical_id(name: &str) -> String {
    name.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut c = p.chars();
            c.next()
                .map(|f| f.to_ascii_uppercase().to_string() + c.as_str())
                .unwrap_or_default()
        })
        .collect()
}

/// `text` as a YAML (JSON) string, quoted and escaped.
pub(super) fn q(text: &str) -> String {
    serde_json::to_string(text).expect("a string serialises")
}

/// Where an alarm notifies: the stage's own topic, or the one it was given.
pub(super) const NOTIFY: &str =
    "[!If [CreateTopic, !Ref NotificationTopic, !Ref NotificationTarget]]";
