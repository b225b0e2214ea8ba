use aws_sdk_dynamodb::types::AttributeValue;

use super::{Condition, Item};

fn s(v: &str) -> AttributeValue {
    AttributeValue::S(v.into())
}

fn n(v: i64) -> AttributeValue {
    AttributeValue::N(v.to_string())
}

fn item(pairs: &[(&str, AttributeValue)]) -> Item {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

#[test]
fn and_binds_tighter_than_or_and_not_tighter_than_and() {
    let c = Condition::new("#a = :x OR #b = :x AND #c = :x").value(":x", s("x"));
    // a OR (b AND c)
    assert!(c.holds(Some(&item(&[("a", s("x"))]))));
    assert!(!c.holds(Some(&item(&[("b", s("x"))]))));
    let c = Condition::new("NOT #a = :x AND #b = :x").value(":x", s("x"));
    assert!(c.holds(Some(&item(&[("b", s("x"))]))));
    assert!(!c.holds(Some(&item(&[("a", s("x")), ("b", s("x"))]))));
}

#[test]
fn a_comparison_with_a_missing_attribute_is_false_but_for_unequal() {
    for cmp in ["=", "<", "<=", ">", ">="] {
        let c = Condition::new(format!("#a {cmp} :x")).value(":x", n(1));
        assert!(!c.holds(Some(&item(&[]))), "{cmp}");
        assert!(!c.holds(None), "{cmp}");
    }
    let unequal = Condition::new("#a <> :x").value(":x", n(1));
    assert!(unequal.holds(Some(&item(&[]))));
    assert!(unequal.holds(None));
    assert!(Condition::new("#a <> #b").holds(None), "both missing");
}

#[test]
fn numbers_compare_as_numbers_and_strings_by_their_bytes() {
    let c = Condition::new("#a < :x").value(":x", n(10));
    assert!(c.holds(Some(&item(&[("a", n(9))]))));
    assert!(!c.holds(Some(&item(&[("a", s("9"))]))), "types differ");
    let c = Condition::new("#a <= :x").value(":x", s("2026-12-01T12:00:10.000Z"));
    assert!(c.holds(Some(&item(&[("a", s("2026-12-01T12:00:09.999Z"))]))));
    assert!(!c.holds(Some(&item(&[("a", s("2026-12-01T12:00:10.001Z"))]))));
    let c = Condition::new("#a = :x").value(":x", AttributeValue::N("1.0".into()));
    assert!(c.holds(Some(&item(&[("a", n(1))]))));
}

#[test]
fn functions_paths_in_and_between() {
    let holder = AttributeValue::M(item(&[("owner", s("w1"))]).into_iter().collect());
    let it = item(&[
        ("holders", AttributeValue::M(item(&[("k1", holder)]))),
        ("keys", AttributeValue::Ss(vec!["a".into(), "b".into()])),
        ("list", AttributeValue::L(vec![n(5)])),
        ("status", s("RUNNING")),
    ]);
    let check = |text: &str| {
        let mut c = Condition::new(text.to_string()).name("#g0", "k1");
        for (p, v) in [
            (":w", s("w1")),
            (":a", s("a")),
            (":two", n(2)),
            (":r", s("RUNNING")),
            (":d", s("DONE")),
            (":ss", s("SS")),
        ] {
            if text.contains(p) {
                c = c.value(p, v);
            }
        }
        c.holds(Some(&it))
    };
    assert!(check("#holders.#g0.#owner = :w"));
    assert!(!check("#holders.#g1.#owner = :w"));
    assert!(check(
        "attribute_exists(#holders.#g0) AND attribute_not_exists(#nothing)"
    ));
    assert!(check(
        "size(#keys) = :two AND contains(#keys, :a) AND size(#keys) >= :two"
    ));
    assert!(check(
        "#list[0] BETWEEN :two AND :two OR #status IN (:d, :r)"
    ));
    assert!(check(
        "begins_with(#status, :r) AND attribute_type(#keys, :ss)"
    ));
    assert!(!check("attribute_type(#status, :ss)"));
    assert!(check("NOT (#status = :d)"));
}

#[test]
fn an_expression_dynamodb_would_refuse_is_an_error_naming_the_problem() {
    let unbound = Condition::new("#a = :nothing").evaluate(None).unwrap_err();
    assert!(unbound.to_string().contains(":nothing"), "{unbound}");
    let unused = Condition::new("#a = :x")
        .value(":x", n(1))
        .value(":y", n(2))
        .evaluate(None)
        .unwrap_err();
    assert!(unused.to_string().contains(":y"), "{unused}");
    for text in [
        "#a =",
        "(#a = :x",
        "#a = :x OR",
        "attribute_exists(:x)",
        "#a ! :x",
    ] {
        assert!(
            Condition::new(text)
                .value(":x", n(1))
                .evaluate(None)
                .is_err(),
            "{text}"
        );
    }
}

#[test]
fn the_names_sent_are_every_placeholder_once_with_its_attribute() {
    let c = Condition::new("#a = :x AND #g0.#owner = :x AND #a <> :y").name("#g0", "k1");
    assert_eq!(
        c.names(),
        [
            ("#a".to_string(), "a".to_string()),
            ("#g0".to_string(), "k1".to_string()),
            ("#owner".to_string(), "owner".to_string())
        ]
    );
}
