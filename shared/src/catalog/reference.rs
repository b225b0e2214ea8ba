//! The catalog's JSON Schema and the reference page generated from it.
//!
//! Both come from the catalog's own types ([`CatalogFile`] and the tables under it) and
//! their doc comments, through `schemars`: a field added to the catalog appears in the
//! reference the next time it is generated, and [`undocumented`] names a field whose doc
//! comment is missing (a test fails on either). The book's catalog reference is
//! [`markdown`]'s output, committed; `schedkit catalog schema` prints [`schema`] for an
//! editor's completion of `catalog.toml`.

use serde_json::{Map, Value};

use super::model::{
    CHAINS_MAX, CatalogFile, HOST_TIMEOUT_MAX_SECONDS, OWN_ALARMS_MAX, SECRETS_MAX,
};

/// The catalog's JSON Schema (draft 2020-12), as serde reads `catalog.toml`.
pub fn schema() -> Value {
    schemars::schema_for!(CatalogFile).to_value()
}

/// Every field, variant or table of the schema without a description, by its path
/// (`jobs.<name>.retry.max_attempts`).
pub fn undocumented() -> Vec<String> {
    let schema = schema();
    let mut missing = Vec::new();
    for table in tables(&schema) {
        for (field, property) in &table.fields {
            let path = format!("{}.{field}", table.path);
            if description(&schema, property).is_none() {
                missing.push(path.clone());
            }
            for (value, meaning) in variants(&schema, property) {
                if meaning.is_none() {
                    missing.push(format!("{path} = \"{value}\""));
                }
            }
        }
    }
    missing
}

/// The reference page: every table of the catalog, each field with its type, whether it is
/// required or its default, and its doc comment.
pub fn markdown() -> String {
    let schema = schema();
    let mut page = String::from(
        "# The catalog reference\n\n\
         <!-- Generated from the catalog's own types by `schedkit catalog reference`; do not \
         edit: a test fails when this page and the types differ. -->\n\n\
         Every table and field `catalog.toml` may hold. A field not listed is an error (every \
         table refuses unknown fields), and `schedkit catalog check` names the file, the job \
         and the field of every mistake. The schema behind this page, for an editor's \
         completion: `schedkit catalog schema > catalog.schema.json`.\n",
    );
    for table in tables(&schema) {
        page.push_str(&format!("\n## `[{}]`\n\n", table.path));
        if let Some(about) = &table.description {
            page.push_str(&format!("{}\n\n", prose(about)));
        }
        if table.fields.is_empty() {
            page.push_str("Its fields are the tables below.\n");
            continue;
        }
        for (field, property) in &table.fields {
            let need = if table.required.contains(field) {
                "required".to_string()
            } else {
                match property.get("default").filter(|d| !is_empty(d)) {
                    Some(default) => format!("default `{}`", toml_value(default)),
                    None => "optional".to_string(),
                }
            };
            page.push_str(&format!(
                "- **`{field}`** ({}, {need}): {}\n",
                kind(&schema, property),
                prose(&description(&schema, property).unwrap_or_default())
            ));
            for (value, meaning) in variants(&schema, property) {
                page.push_str(&format!(
                    "  - `\"{value}\"`: {}\n",
                    prose(&meaning.unwrap_or_default())
                ));
            }
        }
    }
    page
}

/// One TOML table of the catalog: its path as written (`jobs.<name>.schedule`), its doc
/// comment, and its fields that are values (nested tables are tables of their own).
struct Table {
    path: String,
    description: Option<String>,
    required: Vec<String>,
    fields: Vec<(String, Value)>,
}

/// Every table, depth first from the root, in the order TOML readers meet them.
fn tables(schema: &Value) -> Vec<Table> {
    let mut out = Vec::new();
    walk(schema, schema, String::new(), &mut out);
    out
}

fn walk(schema: &Value, node: &Value, path: String, out: &mut Vec<Table>) {
    let definition = resolve(schema, node);
    let properties = definition
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut nested = Vec::new();
    let mut fields = Vec::new();
    for (name, property) in properties {
        let here = if path.is_empty() {
            name.clone()
        } else {
            format!("{path}.{name}")
        };
        if let Some(table) = struct_ref(schema, &property) {
            nested.push((here, table));
        } else if let Some(table) = property
            .get("additionalProperties")
            .and_then(|each| struct_ref(schema, each))
        {
            nested.push((format!("{here}.<name>"), table));
        } else {
            fields.push((name, property));
        }
    }
    if !path.is_empty() {
        out.push(Table {
            path,
            description: definition
                .get("description")
                .and_then(Value::as_str)
                .map(str::to_string),
            required: definition
                .get("required")
                .and_then(Value::as_array)
                .map(|names| {
                    names
                        .iter()
                        .filter_map(|n| n.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
            fields,
        });
    }
    for (here, table) in nested {
        walk(schema, &table, here, out);
    }
}

/// The definition a `$ref` names, or the node itself.
fn resolve<'a>(schema: &'a Value, node: &'a Value) -> &'a Value {
    match node.get("$ref").and_then(Value::as_str) {
        Some(reference) => reference
            .strip_prefix("#/$defs/")
            .and_then(|name| schema.get("$defs")?.get(name))
            .unwrap_or(node),
        None => node,
    }
}

/// The node's one non-null alternative (`Option<T>` is `T` or null).
fn unwrap_option(node: &Value) -> &Value {
    if let Some(options) = node.get("anyOf").and_then(Value::as_array) {
        let real: Vec<&Value> = options
            .iter()
            .filter(|o| o.get("type").and_then(Value::as_str) != Some("null"))
            .collect();
        if let [one] = real.as_slice() {
            return one;
        }
    }
    node
}

/// The table a field holds, when it holds a struct of the catalog (a `$ref` to a definition
/// with properties).
fn struct_ref(schema: &Value, node: &Value) -> Option<Value> {
    let inner = unwrap_option(node);
    inner.get("$ref")?;
    let definition = resolve(schema, inner);
    definition.get("properties").map(|_| inner.clone())
}

fn description(schema: &Value, node: &Value) -> Option<String> {
    node.get("description")
        .or_else(|| resolve(schema, unwrap_option(node)).get("description"))
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// The values of a field that is one of a few words, each with its doc comment.
fn variants(schema: &Value, node: &Value) -> Vec<(String, Option<String>)> {
    let definition = resolve(schema, unwrap_option(node));
    let Some(options) = definition.get("oneOf").and_then(Value::as_array) else {
        return Vec::new();
    };
    options
        .iter()
        .filter_map(|option| {
            let value = option
                .get("const")
                .or_else(|| option.get("enum")?.get(0))?
                .as_str()?
                .to_string();
            let meaning = option
                .get("description")
                .and_then(Value::as_str)
                .map(str::to_string);
            Some((value, meaning))
        })
        .collect()
}

/// A field's type as a TOML writer thinks of it.
fn kind(schema: &Value, node: &Value) -> String {
    let node = unwrap_option(node);
    let definition = resolve(schema, node);
    if !variants(schema, node).is_empty() {
        return "string".into();
    }
    if let Some(either) = definition.get("anyOf").and_then(Value::as_array) {
        return either
            .iter()
            .map(|alternative| kind(schema, alternative))
            .collect::<Vec<_>>()
            .join(" or ");
    }
    let types: Vec<&str> = match definition.get("type") {
        Some(Value::String(one)) => vec![one.as_str()],
        Some(Value::Array(many)) => many.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    match types.iter().find(|t| **t != "null") {
        Some(&"array") => match definition.get("items") {
            Some(items) => match kind(schema, items) {
                either if either.contains(" or ") => format!("array of ({either})"),
                one => format!("array of {}", plural(&one)),
            },
            None => "array".into(),
        },
        Some(&"object") => match definition.get("additionalProperties") {
            Some(Value::Object(each)) if !each.is_empty() => {
                format!(
                    "table of {}",
                    plural(&kind(schema, &Value::Object(each.clone())))
                )
            }
            _ => "table".into(),
        },
        Some(&"integer") if definition.get("minimum") == Some(&Value::from(0)) => {
            "non-negative integer".into()
        }
        Some(other) => other.to_string(),
        None => "any value".into(),
    }
}

fn plural(kind: &str) -> String {
    match kind {
        "string" => "strings".into(),
        "non-negative integer" => "non-negative integers".into(),
        "integer" => "integers".into(),
        "any value" => "any values".into(),
        other => other.to_string(),
    }
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// A default as `catalog.toml` writes it.
fn toml_value(value: &Value) -> String {
    match value {
        Value::String(s) => format!("\"{s}\""),
        Value::Object(map) => {
            let fields: Map<String, Value> = map.clone();
            let inner: Vec<String> = fields
                .iter()
                .map(|(k, v)| format!("{k} = {}", toml_value(v)))
                .collect();
            format!("{{ {} }}", inner.join(", "))
        }
        Value::Array(items) => format!(
            "[{}]",
            items.iter().map(toml_value).collect::<Vec<_>>().join(", ")
        ),
        other => other.to_string(),
    }
}

/// A doc comment as prose for the page: one line, and the constants it links to by name
/// replaced by their values (the page has no rustdoc to link to).
fn prose(doc: &str) -> String {
    let mut text = doc.split_whitespace().collect::<Vec<_>>().join(" ");
    for (name, value) in [
        ("OWN_ALARMS_MAX", OWN_ALARMS_MAX.to_string()),
        ("CHAINS_MAX", CHAINS_MAX.to_string()),
        ("SECRETS_MAX", SECRETS_MAX.to_string()),
        (
            "HOST_TIMEOUT_MAX_SECONDS",
            format!("{HOST_TIMEOUT_MAX_SECONDS} s"),
        ),
    ] {
        text = text.replace(&format!("[`{name}`]"), &value);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_field_and_variant_of_the_catalog_has_a_doc_comment() {
        assert_eq!(undocumented(), Vec::<String>::new());
    }

    #[test]
    fn the_reference_names_every_table_and_the_fields_a_catalog_uses() {
        let page = markdown();
        for table in [
            "[settings]",
            "[jobs.<name>]",
            "[jobs.<name>.schedule]",
            "[jobs.<name>.retry]",
            "[jobs.<name>.command]",
            "[jobs.<name>.concurrency]",
            "[chains.<name>]",
            "[chains.<name>.steps.<name>]",
            "[limits.<name>]",
        ] {
            assert!(
                page.contains(&format!("## `{table}`")),
                "{table} missing:\n{page}"
            );
        }
        assert!(page.contains("- **`owner`** (string, required)"), "{page}");
        assert!(page.contains("`\"buffer_one\"`"), "{page}");
        assert!(
            page.contains("default `60`"),
            "the lease's default:\n{page}"
        );
        assert!(!page.contains("[`"), "an intra-doc link left:\n{page}");
    }

    /// The book's page is this module's output; `SCHEDKIT_BLESS=1` writes it again.
    #[test]
    fn the_books_catalog_reference_is_generated_from_the_catalogs_types() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../docs/book/src/reference/catalog.md");
        let page = markdown();
        if std::env::var_os("SCHEDKIT_BLESS").is_some() {
            std::fs::write(&path, &page).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == page,
            "{} differs from the catalog's types: run `SCHEDKIT_BLESS=1 cargo test -p schedkit \\
             --features schema --lib catalog::reference` (or `schedkit catalog reference > {0}`)",
            path.display()
        );
    }

    /// The README's limits table (which the book includes) states the catalog's own bounds
    /// as the code has them.
    #[test]
    fn the_readmes_limits_are_the_catalogs() {
        let readme =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md")).unwrap();
        let grouped = |n: usize| crate::cost::grouped(n as u64);
        for row in [
            format!("| chains in a catalog | {} |", grouped(CHAINS_MAX)),
            format!(
                "| scheduled jobs and chains in a catalog | {} without a warning |",
                grouped(crate::catalog::model::SCHEDULED_MAX)
            ),
            format!(
                "| jobs with an alarm of their own | {} |",
                grouped(OWN_ALARMS_MAX)
            ),
            format!("| secrets a catalog lists | {} |", grouped(SECRETS_MAX)),
            format!(
                "| a host job's attempt | {} s",
                grouped(HOST_TIMEOUT_MAX_SECONDS as usize)
            ),
        ] {
            assert!(readme.contains(&row), "README.md's limits lack `{row}`");
        }
    }
}
