//! One conditional write's condition, as both stores obey it: the DynamoDB store sends its
//! expression, names and values; the in-memory store evaluates the very same expression
//! over the item as DynamoDB would hold it ([`Condition::holds`]). Changing a condition
//! changes it for both, so the simulation judges the conditions production sends.
//!
//! The language (a parser and an evaluator of DynamoDB's condition expressions) is written
//! by hand: the crates that evaluate it are whole DynamoDB emulators (on SQLite, or a
//! server) that keep their evaluator internal, and the crates that build expressions do
//! not evaluate them. `tests/tests/condition_language.rs` holds it to DynamoDB's own
//! answers on generated expressions and items.

mod eval;
mod parse;

use std::borrow::Cow;

use aws_sdk_dynamodb::types::AttributeValue;

pub use crate::store::attributes::Item;
pub use parse::ParseError;

/// A condition expression with the names and values it refers to.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    expression: Cow<'static, str>,
    names: Vec<(String, String)>,
    values: Vec<(String, AttributeValue)>,
}

impl Condition {
    /// A condition whose `#name` placeholders stand for the attribute of the same name
    /// (unless [`name`](Self::name) says otherwise).
    pub fn new(expression: impl Into<Cow<'static, str>>) -> Self {
        Condition {
            expression: expression.into(),
            names: Vec::new(),
            values: Vec::new(),
        }
    }

    /// Binds the value placeholder `placeholder` (`:now`) to `value`.
    pub fn value(mut self, placeholder: &str, value: AttributeValue) -> Self {
        self.values.retain(|(p, _)| p != placeholder);
        self.values.push((placeholder.to_string(), value));
        self
    }

    /// Binds the name placeholder `placeholder` (`#g0`) to the attribute `attribute`.
    pub fn name(mut self, placeholder: &str, attribute: &str) -> Self {
        self.names.retain(|(p, _)| p != placeholder);
        self.names
            .push((placeholder.to_string(), attribute.to_string()));
        self
    }

    /// The attribute a name placeholder (`#g0`) is bound to, if bound: the update sent
    /// beside the condition names its own placeholders by the same binding.
    pub fn bound(&self, placeholder: &str) -> Option<&str> {
        self.names
            .iter()
            .find(|(p, _)| p == placeholder)
            .map(|(_, a)| a.as_str())
    }

    /// The expression as DynamoDB receives it.
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// Every name placeholder of the expression with the attribute it stands for.
    pub fn names(&self) -> Vec<(String, String)> {
        placeholders(&self.expression, '#')
            .map(|p| {
                let attribute = self
                    .names
                    .iter()
                    .find(|(q, _)| *q == p)
                    .map_or_else(|| p[1..].to_string(), |(_, a)| a.clone());
                (p.to_string(), attribute)
            })
            .collect()
    }

    /// The values bound, as DynamoDB receives them.
    pub fn values(&self) -> &[(String, AttributeValue)] {
        &self.values
    }

    /// Whether the condition holds over `item` (None: there is no item), as DynamoDB
    /// decides it.
    ///
    /// # Panics
    /// On an expression DynamoDB would refuse as invalid (a syntax error, an unbound
    /// value): a bug of the code that wrote it, never a refusal to act on.
    pub fn holds(&self, item: Option<&Item>) -> bool {
        match self.evaluate(item) {
            Ok(holds) => holds,
            Err(e) => panic!("invalid condition `{}`: {e}", self.expression),
        }
    }

    /// [`holds`](Self::holds), with an invalid expression as an error.
    pub fn evaluate(&self, item: Option<&Item>) -> Result<bool, ParseError> {
        let expr = parse::parse(&self.expression)?;
        // DynamoDB refuses a request that binds a value none of its expressions use; a
        // condition's values are its own.
        let used: Vec<&str> = placeholders(&self.expression, ':').collect();
        if let Some((unused, _)) = self
            .values
            .iter()
            .find(|(p, _)| !used.contains(&p.as_str()))
        {
            return Err(ParseError(format!(
                "value `{unused}` is bound but unused in the expression"
            )));
        }
        let empty = Item::new();
        let scope = eval::Scope {
            item: item.unwrap_or(&empty),
            names: &self.names,
            values: &self.values,
        };
        scope.holds(&expr)
    }
}

/// A condition written in place, its values bound by the request that sends it: DynamoDB
/// alone evaluates it (the in-memory store has its own step for it).
impl From<&str> for Condition {
    fn from(expression: &str) -> Self {
        Condition::new(expression.to_string())
    }
}

impl From<String> for Condition {
    fn from(expression: String) -> Self {
        Condition::new(expression)
    }
}

/// The distinct placeholders starting with `sigil` in `expression`, in order.
fn placeholders(expression: &str, sigil: char) -> impl Iterator<Item = &str> {
    let mut seen: Vec<&str> = Vec::new();
    expression.match_indices(sigil).filter_map(move |(i, _)| {
        let rest = &expression[i + 1..];
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        let p = &expression[i..i + 1 + end];
        (end > 0 && !seen.contains(&p)).then(|| {
            seen.push(p);
            p
        })
    })
}

#[cfg(test)]
mod tests;
