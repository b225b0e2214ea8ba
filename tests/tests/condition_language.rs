//! The in-memory store decides every conditional write by evaluating the very condition the
//! DynamoDB store sends (`schedkit::store::Condition`). This holds that evaluator to
//! DynamoDB's own answers: generated conditions (comparators, `IN`, `BETWEEN`, `NOT`,
//! `AND`, `OR`, the functions, document paths) over generated items, each decided by a
//! conditional write on LocalStack's DynamoDB and by `Condition::holds`; they must agree
//! on every case. Then the store's own conditions over records in every status.
//!
//! CI runs 400 cases; `SCHEDKIT_LANGUAGE_CASES=5000` runs more.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::AttributeValue;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use schedkit::store::{Condition, Item};
use schedkit_testkit::{Stack, StackOptions};

fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.into())
}

fn n(v: &str) -> AttributeValue {
    AttributeValue::N(v.into())
}

/// A value an attribute or a placeholder may hold.
fn value(rng: &mut StdRng) -> AttributeValue {
    match rng.random_range(0..9) {
        0 => s("x"),
        1 => s("xy"),
        2 => s("y"),
        3 => n("1"),
        4 => n("2"),
        5 => n("10"),
        6 => n("1.0"),
        7 => AttributeValue::Ss(vec!["x".into(), "y".into()]),
        _ => AttributeValue::L(vec![n("1"), s("x")]),
    }
}

fn scalar(rng: &mut StdRng) -> AttributeValue {
    match rng.random_range(0..6) {
        0 => s("x"),
        1 => s("xy"),
        2 => s(""),
        3 => n("1"),
        4 => n("2"),
        _ => n("10"),
    }
}

/// An item with some of `a`, `b` and `m` (a map holding `owner`).
fn item(rng: &mut StdRng, key: &str) -> Item {
    let mut item = Item::new();
    item.insert("execution_key".into(), s(key));
    for name in ["a", "b"] {
        if rng.random_bool(0.7) {
            item.insert(name.into(), value(rng));
        }
    }
    if rng.random_bool(0.5) {
        let mut map = std::collections::HashMap::new();
        if rng.random_bool(0.7) {
            map.insert("owner".to_string(), scalar(rng));
        }
        item.insert("m".into(), AttributeValue::M(map));
    }
    item
}

/// Builds one condition and the values it binds.
struct Gen<'r> {
    rng: &'r mut StdRng,
    values: Vec<(String, AttributeValue)>,
}

impl Gen<'_> {
    fn value(&mut self, scalar_only: bool) -> String {
        let placeholder = format!(":v{}", self.values.len());
        let v = if scalar_only {
            scalar(self.rng)
        } else {
            value(self.rng)
        };
        self.values.push((placeholder.clone(), v));
        placeholder
    }

    fn path(&mut self) -> &'static str {
        ["#a", "#b", "#m.#owner", "#b"][self.rng.random_range(0..4)]
    }

    /// A comparison's right side; `ordered`: of `<`, `<=`, `>`, `>=`, which DynamoDB
    /// refuses a set, a list or a map as a value for.
    fn operand(&mut self, ordered: bool) -> String {
        match self.rng.random_range(0..5) {
            0 => format!("size({})", self.path()),
            1 | 2 => self.path().to_string(),
            _ => self.value(ordered),
        }
    }

    fn leaf(&mut self) -> String {
        let path = self.path();
        match self.rng.random_range(0..9) {
            0 => format!("attribute_exists({path})"),
            1 => format!("attribute_not_exists({path})"),
            2 => {
                // DynamoDB refuses a prefix that is not a string or a binary.
                let at = format!(":v{}", self.values.len());
                let prefix = ["", "x", "xy", "y"][self.rng.random_range(0..4)];
                self.values.push((at.clone(), s(prefix)));
                format!("begins_with({path}, {at})")
            }
            3 => format!("contains({path}, {})", self.value(true)),
            4 => format!("{path} IN ({}, {})", self.value(false), self.value(false)),
            5 => {
                // DynamoDB refuses bounds out of order or of two types.
                let (low, high) = match self.rng.random_bool(0.5) {
                    true => (n("1"), n(["2", "10"][self.rng.random_range(0..2)])),
                    false => (s(["", "x"][self.rng.random_range(0..2)]), s("xy")),
                };
                let low_at = format!(":v{}", self.values.len());
                self.values.push((low_at.clone(), low));
                let high_at = format!(":v{}", self.values.len());
                self.values.push((high_at.clone(), high));
                format!("{path} BETWEEN {low_at} AND {high_at}")
            }
            _ => {
                let cmp = ["=", "<>", "<", "<=", ">", ">="][self.rng.random_range(0..6)];
                let ordered = !matches!(cmp, "=" | "<>");
                let mut right = self.operand(ordered);
                if right == path {
                    // DynamoDB refuses to compare an operand with itself.
                    right = self.value(ordered);
                }
                format!("{path} {cmp} {right}")
            }
        }
    }

    fn condition(&mut self, depth: u32) -> String {
        if depth == 0 || self.rng.random_bool(0.35) {
            return self.leaf();
        }
        match self.rng.random_range(0..3) {
            0 => format!("NOT ({})", self.condition(depth - 1)),
            1 => format!(
                "({}) AND ({})",
                self.condition(depth - 1),
                self.condition(depth - 1)
            ),
            _ => format!(
                "({}) OR ({})",
                self.condition(depth - 1),
                self.condition(depth - 1)
            ),
        }
    }
}

/// DynamoDB's answer: does a write under `condition` pass over the item at `key`?
async fn dynamodb_says(ddb: &Client, table: &str, key: &str, condition: &Condition) -> bool {
    let mut request = ddb
        .update_item()
        .table_name(table)
        .key("execution_key", s(key))
        .update_expression("SET #probe_ = :probe_")
        .condition_expression(condition.expression())
        .expression_attribute_names("#probe_", "probe")
        .expression_attribute_values(":probe_", n("1"));
    for (placeholder, attribute) in condition.names() {
        request = request.expression_attribute_names(placeholder, attribute);
    }
    for (placeholder, value) in condition.values() {
        request = request.expression_attribute_values(placeholder, value.clone());
    }
    match request.send().await {
        Ok(_) => true,
        Err(e) => {
            let service = e.as_service_error();
            assert!(
                service.is_some_and(|e| e.is_conditional_check_failed_exception()),
                "DynamoDB refused `{}` as invalid: {:?}",
                condition.expression(),
                e.into_service_error()
            );
            false
        }
    }
}

#[tokio::test]
async fn the_evaluator_agrees_with_dynamodb_on_generated_conditions_and_items() {
    let stack = Stack::lane("language", StackOptions::default()).await;
    let store = stack.store();
    let (ddb, table) = (store.client(), store.table());
    let cases: usize = std::env::var("SCHEDKIT_LANGUAGE_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(400);
    let mut rng = StdRng::seed_from_u64(38);
    let (mut held, mut disagreements) = (0, Vec::new());
    for case in 0..cases {
        let key = format!("language-{case}");
        let absent = rng.random_bool(0.1);
        let it = item(&mut rng, &key);
        if !absent {
            ddb.put_item()
                .table_name(table)
                .set_item(Some(it.clone()))
                .send()
                .await
                .expect("put the item");
        }
        let mut generator = Gen {
            rng: &mut rng,
            values: Vec::new(),
        };
        let text = generator.condition(3);
        let mut condition = Condition::new(text);
        for (placeholder, v) in generator.values {
            condition = condition.value(&placeholder, v);
        }
        let ours = condition.holds((!absent).then_some(&it));
        let theirs = dynamodb_says(ddb, table, &key, &condition).await;
        held += usize::from(theirs);
        if ours != theirs {
            disagreements.push(format!(
                "`{}` {:?} over {:?}: DynamoDB {theirs}, ours {ours}",
                condition.expression(),
                condition.values(),
                (!absent).then_some(&it)
            ));
        }
    }
    assert!(
        disagreements.is_empty(),
        "{} of {cases} disagree:\n{}",
        disagreements.len(),
        disagreements.join("\n")
    );
    // Both answers were common: the cases tell holding from failing apart.
    assert!(
        held > cases / 5 && held < cases * 4 / 5,
        "{held} of {cases} held"
    );
}
