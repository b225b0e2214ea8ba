//! Where the example jobs keep their side effects: the stage's effects table.

/// Partition key of the effects table.
pub const EFFECT_KEY: &str = "effect_key";

/// The table the example jobs keep their side effects in (the template's EffectsTable,
/// `SCHEDKIT_EFFECTS_TABLE`).
#[derive(Clone)]
pub struct EffectsTable {
    ddb: aws_sdk_dynamodb::Client,
    table: Option<String>,
}

impl EffectsTable {
    pub fn new(ddb: aws_sdk_dynamodb::Client, table: Option<String>) -> Self {
        EffectsTable { ddb, table }
    }

    /// The client and the table name; a job without a table cannot run (permanently).
    pub fn get(&self) -> Result<(aws_sdk_dynamodb::Client, String), schedkit::JobError> {
        let table = self.table.clone().ok_or_else(|| {
            schedkit::JobError::permanent("no effects table configured (SCHEDKIT_EFFECTS_TABLE)")
        })?;
        Ok((self.ddb.clone(), table))
    }
}
