//! A lane's own tables, made as the shared stage's are: each described once per test
//! process (key schema, attributes, indexes, billing, time to live, as the template
//! deployed them) and created again under the lane's name. A lane with its own tables can
//! hold any keys and list or scan what it wrote; a CloudFormation deploy per test costs
//! LocalStack about five seconds of CPU, three `CreateTable` calls a few milliseconds.

use aws_sdk_dynamodb::Client;
use aws_sdk_dynamodb::types::{
    BillingMode, GlobalSecondaryIndex, TableDescription, TimeToLiveSpecification,
};

/// How a table of the shared stage was made, to make another like it.
#[derive(Debug, Clone)]
pub struct TableShape {
    description: TableDescription,
    /// The attribute that expires items, if the table has time to live on.
    ttl_attribute: Option<String>,
}

impl TableShape {
    /// Reads the shape of the table `name`.
    pub async fn of(ddb: &Client, name: &str) -> anyhow::Result<TableShape> {
        let description = ddb
            .describe_table()
            .table_name(name)
            .send()
            .await?
            .table
            .ok_or_else(|| anyhow::anyhow!("DescribeTable {name} returned no table"))?;
        let ttl = ddb.describe_time_to_live().table_name(name).send().await?;
        let ttl_attribute = ttl
            .time_to_live_description
            .filter(|t| {
                t.time_to_live_status
                    .as_ref()
                    .is_some_and(|s| s.as_str() == "ENABLED" || s.as_str() == "ENABLING")
            })
            .and_then(|t| t.attribute_name);
        Ok(TableShape {
            description,
            ttl_attribute,
        })
    }

    /// Creates the table `name` with this shape (and its time to live). The template's
    /// tables are on demand; another billing mode is refused rather than guessed at.
    pub async fn create(&self, ddb: &Client, name: &str) -> anyhow::Result<()> {
        let d = &self.description;
        let billing = d
            .billing_mode_summary
            .as_ref()
            .and_then(|b| b.billing_mode.clone());
        anyhow::ensure!(
            billing == Some(BillingMode::PayPerRequest),
            "{name}: the shared table's billing mode is {billing:?}; lanes copy on-demand tables only"
        );
        let mut create = ddb
            .create_table()
            .table_name(name)
            .set_attribute_definitions(d.attribute_definitions.clone())
            .set_key_schema(d.key_schema.clone())
            .billing_mode(BillingMode::PayPerRequest);
        for index in d.global_secondary_indexes.clone().unwrap_or_default() {
            let gsi = GlobalSecondaryIndex::builder()
                .set_index_name(index.index_name)
                .set_key_schema(index.key_schema)
                .set_projection(index.projection)
                .build()?;
            create = create.global_secondary_indexes(gsi);
        }
        create.send().await?;
        if let Some(attribute) = &self.ttl_attribute {
            ddb.update_time_to_live()
                .table_name(name)
                .time_to_live_specification(
                    TimeToLiveSpecification::builder()
                        .enabled(true)
                        .attribute_name(attribute)
                        .build()?,
                )
                .send()
                .await?;
        }
        Ok(())
    }
}
