//! A parsed condition decided over an item, with DynamoDB's semantics: a comparison with an
//! attribute the item lacks is false, but for `<>`, which holds (a missing attribute is
//! unequal to anything, even another missing one: measured on DynamoDB), values of
//! different types are unequal and unordered, numbers compare as numbers, strings by their
//! UTF-8 bytes.

use std::cmp::Ordering;

use aws_sdk_dynamodb::types::AttributeValue;

use super::parse::{Cmp, Expr, Function, Operand, ParseError, Step};
use crate::store::attributes::Item;

/// What a condition is decided over.
pub(super) struct Scope<'a> {
    pub(super) item: &'a Item,
    pub(super) names: &'a [(String, String)],
    pub(super) values: &'a [(String, AttributeValue)],
}

impl Scope<'_> {
    pub(super) fn holds(&self, expr: &Expr) -> Result<bool, ParseError> {
        Ok(match expr {
            Expr::Or(a, b) => self.holds(a)? || self.holds(b)?,
            Expr::And(a, b) => self.holds(a)? && self.holds(b)?,
            Expr::Not(a) => !self.holds(a)?,
            Expr::Compare(a, cmp, b) => {
                if !matches!(cmp, Cmp::Eq | Cmp::Ne) {
                    self.ordered_values(&[a, b])?;
                }
                let (a, b) = (self.operand(a)?, self.operand(b)?);
                match (a, b) {
                    (Some(a), Some(b)) => {
                        let order = order(&a, &b);
                        match cmp {
                            Cmp::Eq => equal(&a, &b),
                            Cmp::Ne => !equal(&a, &b),
                            Cmp::Lt => order == Some(Ordering::Less),
                            Cmp::Le => matches!(order, Some(Ordering::Less | Ordering::Equal)),
                            Cmp::Gt => order == Some(Ordering::Greater),
                            Cmp::Ge => {
                                matches!(order, Some(Ordering::Greater | Ordering::Equal))
                            }
                        }
                    }
                    // Unequal to what is missing, and nothing else.
                    _ => *cmp == Cmp::Ne,
                }
            }
            Expr::Between(a, low, high) => {
                self.ordered_values(&[a, low, high])?;
                match (self.operand(a)?, self.operand(low)?, self.operand(high)?) {
                    (Some(a), Some(low), Some(high)) => {
                        matches!(order(&a, &low), Some(Ordering::Greater | Ordering::Equal))
                            && matches!(order(&a, &high), Some(Ordering::Less | Ordering::Equal))
                    }
                    _ => false,
                }
            }
            Expr::In(a, list) => match self.operand(a)? {
                None => false,
                Some(a) => {
                    let mut found = false;
                    for b in list {
                        found |= self.operand(b)?.is_some_and(|b| equal(&a, &b));
                    }
                    found
                }
            },
            Expr::Call(function, args) => {
                let Operand::Path(path) = &args[0] else {
                    unreachable!("the parser checks the first argument is a path")
                };
                let at = self.resolve(path)?;
                if *function == Function::BeginsWith {
                    self.ordered_values(&[&args[1]])?;
                }
                let arg = match args.get(1) {
                    Some(b) => self.operand(b)?,
                    None => None,
                };
                match function {
                    Function::Exists => at.is_some(),
                    Function::NotExists => at.is_none(),
                    Function::Type => match (at, arg) {
                        (Some(a), Some(AttributeValue::S(t))) => type_name(a) == t,
                        _ => false,
                    },
                    Function::BeginsWith => match (at, arg) {
                        (Some(AttributeValue::S(a)), Some(AttributeValue::S(b))) => {
                            a.starts_with(b.as_str())
                        }
                        _ => false,
                    },
                    Function::Contains => match (at, arg) {
                        (Some(a), Some(b)) => contains(a, &b),
                        _ => false,
                    },
                }
            }
        })
    }

    /// DynamoDB refuses to order by a value that is not a number, a string or a binary.
    fn ordered_values(&self, operands: &[&Operand]) -> Result<(), ParseError> {
        for operand in operands {
            if let Operand::Value(name) = operand {
                let value = self.operand(operand)?;
                if !matches!(
                    value,
                    Some(AttributeValue::N(_) | AttributeValue::S(_) | AttributeValue::B(_))
                ) {
                    return Err(ParseError(format!(
                        "value `{name}` cannot be ordered (not a number, string or binary)"
                    )));
                }
            }
        }
        Ok(())
    }

    fn operand(&self, operand: &Operand) -> Result<Option<AttributeValue>, ParseError> {
        Ok(match operand {
            Operand::Value(name) => Some(
                self.values
                    .iter()
                    .find(|(p, _)| p == name)
                    .map(|(_, v)| v.clone())
                    .ok_or_else(|| ParseError(format!("value `{name}` is not bound")))?,
            ),
            Operand::Path(path) => self.resolve(path)?.cloned(),
            Operand::Size(path) => self
                .resolve(path)?
                .and_then(size)
                .map(|n| AttributeValue::N(n.to_string())),
        })
    }

    fn resolve(&self, path: &[Step]) -> Result<Option<&AttributeValue>, ParseError> {
        let mut at: Option<&AttributeValue> = None;
        for (i, step) in path.iter().enumerate() {
            at = match step {
                Step::Name(name) => {
                    let key = self.attribute(name)?;
                    match (i, at) {
                        (0, _) => self.item.get(key),
                        (_, Some(AttributeValue::M(map))) => map.get(key),
                        _ => None,
                    }
                }
                Step::Index(n) => match at {
                    Some(AttributeValue::L(list)) => list.get(*n),
                    _ => None,
                },
            };
            if at.is_none() {
                return Ok(None);
            }
        }
        Ok(at)
    }

    fn attribute<'n>(&'n self, name: &'n str) -> Result<&'n str, ParseError> {
        let Some(placeholder) = name.strip_prefix('#') else {
            return Ok(name);
        };
        Ok(self
            .names
            .iter()
            .find(|(p, _)| p == name)
            .map_or(placeholder, |(_, a)| a.as_str()))
    }
}

fn number(n: &str) -> Option<f64> {
    n.parse().ok()
}

/// Numbers compared exactly when both are integers (epoch milliseconds are), else as f64.
fn compare_numbers(a: &str, b: &str) -> Option<Ordering> {
    match (a.parse::<i128>(), b.parse::<i128>()) {
        (Ok(a), Ok(b)) => Some(a.cmp(&b)),
        _ => number(a)?.partial_cmp(&number(b)?),
    }
}

fn order(a: &AttributeValue, b: &AttributeValue) -> Option<Ordering> {
    match (a, b) {
        (AttributeValue::N(a), AttributeValue::N(b)) => compare_numbers(a, b),
        (AttributeValue::S(a), AttributeValue::S(b)) => Some(a.as_bytes().cmp(b.as_bytes())),
        (AttributeValue::B(a), AttributeValue::B(b)) => Some(a.as_ref().cmp(b.as_ref())),
        _ => None,
    }
}

fn equal(a: &AttributeValue, b: &AttributeValue) -> bool {
    match (a, b) {
        (AttributeValue::N(x), AttributeValue::N(y)) => {
            compare_numbers(x, y) == Some(Ordering::Equal)
        }
        (AttributeValue::Ss(x), AttributeValue::Ss(y)) => same_set(x, y),
        (AttributeValue::Ns(x), AttributeValue::Ns(y)) => {
            x.len() == y.len()
                && x.iter().all(|n| {
                    y.iter()
                        .any(|m| compare_numbers(n, m) == Some(Ordering::Equal))
                })
        }
        _ => a == b,
    }
}

fn same_set(x: &[String], y: &[String]) -> bool {
    x.len() == y.len() && x.iter().all(|v| y.contains(v))
}

fn contains(a: &AttributeValue, b: &AttributeValue) -> bool {
    match (a, b) {
        (AttributeValue::S(a), AttributeValue::S(b)) => a.contains(b.as_str()),
        (AttributeValue::Ss(set), AttributeValue::S(b)) => set.contains(b),
        (AttributeValue::Ns(set), AttributeValue::N(b)) => set
            .iter()
            .any(|n| compare_numbers(n, b) == Some(Ordering::Equal)),
        (AttributeValue::L(list), b) => list.iter().any(|v| equal(v, b)),
        _ => false,
    }
}

/// `size()`: a string's UTF-8 length in bytes (DynamoDB measures strings so), the number
/// of a set's, a list's or a map's elements.
fn size(a: &AttributeValue) -> Option<usize> {
    Some(match a {
        AttributeValue::S(s) => s.len(),
        AttributeValue::B(b) => b.as_ref().len(),
        AttributeValue::Ss(v) => v.len(),
        AttributeValue::Ns(v) => v.len(),
        AttributeValue::Bs(v) => v.len(),
        AttributeValue::L(v) => v.len(),
        AttributeValue::M(v) => v.len(),
        _ => return None,
    })
}

fn type_name(a: &AttributeValue) -> &'static str {
    match a {
        AttributeValue::S(_) => "S",
        AttributeValue::N(_) => "N",
        AttributeValue::B(_) => "B",
        AttributeValue::Ss(_) => "SS",
        AttributeValue::Ns(_) => "NS",
        AttributeValue::Bs(_) => "BS",
        AttributeValue::L(_) => "L",
        AttributeValue::M(_) => "M",
        AttributeValue::Bool(_) => "BOOL",
        AttributeValue::Null(_) => "NULL",
        _ => "?",
    }
}
