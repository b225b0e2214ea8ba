//! Execution keys and payload hashes.
//!
//! The key names one logical run: two deliveries with the same key are the same run, so
//! the second one is a duplicate. The payload hash tells a true duplicate from a different
//! run that reuses a key by mistake (a conflict).

use std::fmt;
use std::str::FromStr;

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use crate::envelope::{Envelope, MAX_KEY_BYTES, format_instant};

/// A per-job key template over payload fields, e.g. `invoice:{billing_month}:{tenant}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyTemplate {
    source: String,
    parts: Vec<Part>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Literal(String),
    Field(String),
}

/// A key template that does not parse, or a payload that does not fill it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// A `{` with no `}` after it (or another `{` before it): the template is invalid.
    #[error("key template `{template}`: unclosed `{{` at position {position}")]
    Unclosed {
        /// The template as written.
        template: String,
        /// Byte offset of the `{`, from 0.
        position: usize,
    },
    /// A `}` that closes nothing: the template is invalid.
    #[error("key template `{template}`: `}}` without `{{` at position {position}")]
    Unopened {
        /// The template as written.
        template: String,
        /// Byte offset of the `}`, from 0.
        position: usize,
    },
    /// `{}` (or only spaces) where a payload field name belongs.
    #[error("key template `{template}`: empty field name at position {position}")]
    EmptyField {
        /// The template as written.
        template: String,
        /// Byte offset of the `{`, from 0.
        position: usize,
    },
    /// The payload lacks (or has null for) a field the template names: the message is poison.
    #[error("key template `{template}` needs payload field `{field}`, which is missing")]
    MissingField {
        /// The job's template.
        template: String,
        /// The top-level payload field it needs.
        field: String,
    },
    /// The field holds an object or an array, which has no text form for a key.
    #[error(
        "key template `{template}` needs payload field `{field}` to be a string, number or boolean, not {found}"
    )]
    NotScalar {
        /// The job's template.
        template: String,
        /// The payload field at fault.
        field: String,
        /// What it holds instead: `an object` or `an array`.
        found: &'static str,
    },
    /// The key came out empty (a template over empty fields): DynamoDB takes no empty key.
    #[error("derived key is empty: the payload fields the key template names are empty")]
    Empty,
    /// The key is over `MAX_KEY_BYTES`; holds its length in bytes.
    #[error("derived key is {0} bytes long; keys are limited to 1024 bytes")]
    TooLong(usize),
    /// The key (explicit or derived) lies in the space of schedkit's own items
    /// ([`crate::store::INTERNAL_PREFIX`]): a run under it could overwrite or be deleted
    /// with one of them.
    #[error(
        "key `{0}` is reserved for schedkit's own items (no execution key may start with `{prefix}`)",
        prefix = crate::store::INTERNAL_PREFIX
    )]
    Reserved(String),
}

impl FromStr for KeyTemplate {
    type Err = KeyError;

    fn from_str(template: &str) -> Result<Self, KeyError> {
        let mut parts = Vec::new();
        let mut literal = String::new();
        let mut chars = template.char_indices();
        while let Some((i, c)) = chars.next() {
            match c {
                '{' => {
                    let mut name = String::new();
                    let mut closed = false;
                    for (_, c) in chars.by_ref() {
                        if c == '}' {
                            closed = true;
                            break;
                        }
                        name.push(c);
                    }
                    if !closed || name.contains('{') {
                        return Err(KeyError::Unclosed {
                            template: template.into(),
                            position: i,
                        });
                    }
                    let name = name.trim().to_string();
                    if name.is_empty() {
                        return Err(KeyError::EmptyField {
                            template: template.into(),
                            position: i,
                        });
                    }
                    if !literal.is_empty() {
                        parts.push(Part::Literal(std::mem::take(&mut literal)));
                    }
                    parts.push(Part::Field(name));
                }
                '}' => {
                    return Err(KeyError::Unopened {
                        template: template.into(),
                        position: i,
                    });
                }
                c => literal.push(c),
            }
        }
        if !literal.is_empty() {
            parts.push(Part::Literal(literal));
        }
        Ok(KeyTemplate {
            source: template.into(),
            parts,
        })
    }
}

impl fmt::Display for KeyTemplate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

impl KeyTemplate {
    /// The text every key it renders starts with (up to its first field).
    pub(crate) fn literal_prefix(&self) -> &str {
        match self.parts.first() {
            Some(Part::Literal(s)) => s,
            _ => "",
        }
    }

    /// The payload fields it reads, in order.
    pub fn fields(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Field(name) => Some(name.as_str()),
            Part::Literal(_) => None,
        })
    }

    /// Fills the template from the payload's top-level fields.
    pub fn render(&self, payload: Option<&Map<String, Value>>) -> Result<String, KeyError> {
        let mut out = String::new();
        for part in &self.parts {
            match part {
                Part::Literal(s) => out.push_str(s),
                Part::Field(name) => {
                    let missing = || KeyError::MissingField {
                        template: self.source.clone(),
                        field: name.clone(),
                    };
                    let value = payload.and_then(|p| p.get(name)).ok_or_else(missing)?;
                    match value {
                        Value::String(s) => out.push_str(s),
                        Value::Number(n) => out.push_str(&n.to_string()),
                        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
                        Value::Null => return Err(missing()),
                        other => {
                            return Err(KeyError::NotScalar {
                                template: self.source.clone(),
                                field: name.clone(),
                                found: if other.is_array() {
                                    "an array"
                                } else {
                                    "an object"
                                },
                            });
                        }
                    }
                }
            }
        }
        Ok(out)
    }
}

/// The execution key of an envelope: its explicit `key`, else the job's template over the
/// payload, else `<job>#<scheduled_for>`. Whichever it is, it may not lie in schedkit's own
/// key space ([`KeyError::Reserved`]).
pub fn execution_key(
    envelope: &Envelope,
    template: Option<&KeyTemplate>,
) -> Result<String, KeyError> {
    let key = match (&envelope.key, template) {
        (Some(key), _) => key.clone(),
        (None, Some(t)) => t.render(envelope.payload.as_ref())?,
        (None, None) => format!(
            "{}#{}",
            envelope.job,
            format_instant(&envelope.scheduled_for)
        ),
    };
    if key.is_empty() {
        return Err(KeyError::Empty);
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(KeyError::TooLong(key.len()));
    }
    if crate::store::is_internal(&key) {
        return Err(KeyError::Reserved(key));
    }
    Ok(key)
}

/// SHA-256 (hex) of the job name and its canonical payload, and for a chain's step, of the
/// chain and step it runs. Object keys are sorted at every level and no whitespace is
/// written, so field order and formatting never change the hash. The schedule time is left
/// out on purpose: an explicit key fired twice is the same run. The step is in: a plain
/// message under a step's key (the same job and payload) is another run, a key conflict,
/// and never takes over the step's record.
pub fn payload_hash(envelope: &Envelope) -> String {
    let mut canonical = String::new();
    write_canonical(&envelope.payload_value(), &mut canonical);
    let mut h = Sha256::new();
    h.update(envelope.job.as_bytes());
    h.update([0u8]);
    h.update(canonical.as_bytes());
    if let Some(chain) = &envelope.chain
        && let Some(step) = &chain.step
    {
        h.update([0u8]);
        h.update(chain.name.as_bytes());
        h.update([0u8]);
        h.update(step.as_bytes());
    }
    hex::encode(h.finalize())
}

/// Written by hand: serde_json's own output order depends on a feature flag
/// (`preserve_order`) that any crate in the build can switch on.
fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(v, out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(v, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// The key of `step` of the chain run `chain_key`: its record's, and its message's (the
/// generated definitions write it; a step message under any other key is refused).
pub fn step_key(chain_key: &str, step: &str) -> String {
    format!("{chain_key}#{step}")
}

/// A Step Functions execution name for an execution key: at most 80 characters of
/// letters, digits, `-` and `_`, with a stable hash of the whole key so two keys that read
/// alike after the replacement stay apart, and every version names a key alike.
pub fn execution_name(key: &str) -> String {
    let mut readable: String = key
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(63)
        .collect();
    let h = crate::hash::stable_hash([key.as_bytes()]);
    readable.push('-');
    readable.push_str(&format!("{h:016x}"));
    readable
}

/// The execution name of run `run` of the chain run `key`: the first run is named after
/// the key alone (so a trigger delivered twice starts one execution), each rerun after the
/// key and its number (Step Functions keeps a closed execution's name for 90 days).
pub fn chain_execution_name(key: &str, run: u32) -> String {
    if run <= 1 {
        execution_name(key)
    } else {
        execution_name(&format!("{key}#run-{run}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_run_of_a_chain_has_its_own_execution_name_and_the_first_is_the_keys() {
        let key = "month-end#2026-12-01T01:00:00Z";
        assert_eq!(chain_execution_name(key, 1), execution_name(key));
        let second = chain_execution_name(key, 2);
        assert!(
            second.starts_with("month-end_2026-12-01T01_00_00Z_run-2-"),
            "{second}"
        );
        assert_ne!(second, chain_execution_name(key, 3));
        let long = "x".repeat(300);
        assert!(chain_execution_name(&long, 12).len() <= 80);
    }

    fn envelope(payload: Value) -> Envelope {
        let mut e = Envelope::new("invoice", "2026-11-01T00:00:00Z".parse().unwrap());
        e.payload = payload.as_object().cloned();
        e
    }

    #[test]
    fn explicit_key_wins_then_template_then_job_and_time() {
        let t: KeyTemplate = "invoice:{billing_month}:{tenant}".parse().unwrap();
        let mut e = envelope(json!({"billing_month": "2026-10", "tenant": 42}));
        assert_eq!(
            execution_key(&e, None).unwrap(),
            "invoice#2026-11-01T00:00:00Z"
        );
        assert_eq!(execution_key(&e, Some(&t)).unwrap(), "invoice:2026-10:42");
        e.key = Some("explicit".into());
        assert_eq!(execution_key(&e, Some(&t)).unwrap(), "explicit");
    }

    #[test]
    fn a_template_over_empty_fields_is_refused_before_dynamodb_sees_an_empty_key() {
        let t: KeyTemplate = "{tenant}".parse().unwrap();
        let err = execution_key(&envelope(json!({"tenant": ""})), Some(&t)).unwrap_err();
        assert_eq!(err, KeyError::Empty);
        assert!(err.to_string().starts_with("derived key is empty"));
    }

    #[test]
    fn a_key_in_schedkits_own_space_is_refused_however_it_was_made() {
        let internal = crate::store::job_key("long-report");
        let t: KeyTemplate = "{tenant}".parse().unwrap();
        let derived = envelope(json!({ "tenant": internal }));
        assert_eq!(
            execution_key(&derived, Some(&t)).unwrap_err(),
            KeyError::Reserved(internal.clone())
        );
        let mut explicit = envelope(json!({}));
        explicit.key = Some(crate::store::slot_key("x"));
        let err = execution_key(&explicit, None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "key `.schedkit/overlap/x` is reserved for schedkit's own items (no execution key may start with `.schedkit/`)"
        );
        // A job named like the space still derives an ordinary key.
        let job = Envelope::new(".schedkit", "2026-11-01T00:00:00Z".parse().unwrap());
        assert!(execution_key(&job, None).is_ok());
    }

    #[test]
    fn template_errors_name_the_field_and_position() {
        let t: KeyTemplate = "x:{tenant}".parse().unwrap();
        assert_eq!(
            execution_key(&envelope(json!({})), Some(&t))
                .unwrap_err()
                .to_string(),
            "key template `x:{tenant}` needs payload field `tenant`, which is missing"
        );
        assert_eq!(
            execution_key(&envelope(json!({"tenant": {"id": 1}})), Some(&t))
                .unwrap_err()
                .to_string(),
            "key template `x:{tenant}` needs payload field `tenant` to be a string, number or boolean, not an object"
        );
        assert_eq!(
            "a{b".parse::<KeyTemplate>().unwrap_err().to_string(),
            "key template `a{b`: unclosed `{` at position 1"
        );
        assert_eq!(
            "ab}".parse::<KeyTemplate>().unwrap_err().to_string(),
            "key template `ab}`: `}` without `{` at position 2"
        );
        assert_eq!(
            "a{ }".parse::<KeyTemplate>().unwrap_err().to_string(),
            "key template `a{ }`: empty field name at position 1"
        );
    }

    #[test]
    fn hash_ignores_field_order_and_whitespace_but_not_values() {
        let a = Envelope::parse(r#"{"job":"j","scheduled_for":"2026-01-01T00:00:00Z","payload":{"a":1,"b":{"y":2,"x":[1,2]}}}"#).unwrap();
        let b = Envelope::parse(r#"{"payload":{"b":{"x":[1, 2],"y":2},"a":1},"scheduled_for":"2026-02-01T00:00:00Z","job":"j"}"#).unwrap();
        let c = Envelope::parse(r#"{"job":"j","scheduled_for":"2026-01-01T00:00:00Z","payload":{"a":2,"b":{"y":2,"x":[1,2]}}}"#).unwrap();
        assert_eq!(payload_hash(&a), payload_hash(&b));
        assert_ne!(payload_hash(&a), payload_hash(&c));
        assert_eq!(payload_hash(&a).len(), 64);
        // A chain's step is not the same run as a plain message of its job and payload.
        let step = Envelope::parse(r#"{"job":"j","scheduled_for":"2026-01-01T00:00:00Z","payload":{"a":1,"b":{"y":2,"x":[1,2]}},"chain":{"name":"c","key":"k","step":"s"}}"#).unwrap();
        assert_ne!(payload_hash(&a), payload_hash(&step));
    }

    #[test]
    fn canonical_json_sorts_nested_keys() {
        let mut s = String::new();
        write_canonical(&json!({"b": [{"d": 1, "c": "x\"y"}], "a": null}), &mut s);
        assert_eq!(s, r#"{"a":null,"b":[{"c":"x\"y","d":1}]}"#);
    }
}
