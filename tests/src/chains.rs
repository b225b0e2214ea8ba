//! A chain's generated state machine created on LocalStack by itself (no stack): the tests
//! of the definition and of the worker's side of chains run it against a queue of theirs.

use schedkit::catalog::Catalog;

/// Creates `chain`'s generated definition as a new state machine that puts its steps on
/// `queue_url`, named `<unique prefix>-<chain>` (so [`state_machine_prefix`] of its ARN is
/// what a worker's `SCHEDKIT_STATE_MACHINE_PREFIX` would be); its ARN.
pub async fn generated_state_machine(
    sfn: &aws_sdk_sfn::Client,
    catalog: &Catalog,
    chain: &str,
    queue_url: &str,
) -> anyhow::Result<String> {
    let name = format!("{}-{chain}", crate::unique("sm"));
    generated_state_machine_named(sfn, catalog, chain, queue_url, &name).await
}

/// [`generated_state_machine`] named `name` (`schedkit-<stage>.<chain>`, as the template
/// names it); its ARN.
pub async fn generated_state_machine_named(
    sfn: &aws_sdk_sfn::Client,
    catalog: &Catalog,
    chain: &str,
    queue_url: &str,
    name: &str,
) -> anyhow::Result<String> {
    let chain = catalog
        .chain(chain)
        .ok_or_else(|| anyhow::anyhow!("no chain `{chain}` in the catalog"))?;
    let definition = schedkit::iac::render_definition(catalog, chain)
        .replace("${Partition}", "aws")
        .replace("${JobsQueueUrl}", queue_url);
    let created = sfn
        .create_state_machine()
        .name(name)
        .definition(definition)
        .role_arn("arn:aws:iam::000000000000:role/chain")
        .send()
        .await?;
    Ok(created.state_machine_arn)
}

/// The ARN of a state machine of [`generated_state_machine`] without its chain's name.
pub fn state_machine_prefix<'a>(arn: &'a str, chain: &str) -> &'a str {
    arn.strip_suffix(chain).unwrap_or(arn)
}
