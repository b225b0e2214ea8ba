//! `schedkit iac render`: write the catalog's parts of the template (or check them);
//! `schedkit iac init`: a copy of the template for a worker crate of your own.

use std::path::PathBuf;

use clap::Args;

use schedkit::iac;

use super::{Cli, UsageError, load_catalog};

#[derive(Debug, Args)]
pub struct RenderArgs {
    /// The SAM template with the generated blocks.
    #[arg(long, default_value = "infra/template.yaml")]
    pub template: PathBuf,
    /// Change nothing; fail (exit 2) if the template disagrees with the catalog.
    #[arg(long)]
    pub check: bool,
}

pub async fn render(a: &RenderArgs, cli: &Cli) -> anyhow::Result<()> {
    let catalog = load_catalog(cli)?;
    let template = std::fs::read_to_string(&a.template)
        .map_err(|e| UsageError(format!("{}: {e}", a.template.display())))?;
    let rendered = iac::render(&catalog).map_err(|e| UsageError(e.to_string()))?;
    let wanted = iac::apply(&template, &rendered)
        .map_err(|e| UsageError(format!("{}: {e}", a.template.display())))?;
    match (wanted == template, a.check) {
        (true, _) => println!("{}: in sync with {}", a.template.display(), catalog.file),
        (false, true) => {
            return Err(UsageError(format!(
                "{} disagrees with {}: run `schedkit iac render`",
                a.template.display(),
                catalog.file
            ))
            .into());
        }
        (false, false) => {
            std::fs::write(&a.template, wanted)?;
            println!(
                "{}: regenerated from {}",
                a.template.display(),
                catalog.file
            );
        }
    }
    Ok(())
}

/// schedkit's template, as this console was built with it.
const STOCK_TEMPLATE: &str = include_str!("../../../infra/template.yaml");
/// The chain a team's template starts with: one that does nothing. schedkit's own chain runs
/// the example jobs, which a team's worker does not have (every run of it would be
/// dead-lettered as an unknown job).
const EMPTY_CHAIN: &str = r#"{
  "Comment": "No chain yet: replace this definition with your chain's steps.",
  "StartAt": "Done",
  "States": { "Done": { "Type": "Succeed" } }
}
"#;

#[derive(Debug, Args)]
pub struct InitArgs {
    /// The template to write (it must not exist yet); the chain goes next to it.
    #[arg(long)]
    pub template: PathBuf,
    /// The worker crate's folder, relative to the template (what `sam build` builds).
    #[arg(long, default_value = ".")]
    pub code_uri: String,
    /// The worker crate's binary.
    #[arg(long)]
    pub binary: String,
}

pub fn init(a: &InitArgs, cli: &Cli) -> anyhow::Result<()> {
    let catalog = load_catalog(cli)?;
    let chain = a.template.with_file_name("chain.asl.json");
    for path in [&a.template, &chain] {
        if path.exists() {
            return Err(UsageError(format!(
                "{} exists already: remove it, or keep the template in sync with `schedkit --catalog {} iac render --template {}`",
                path.display(),
                cli.catalog.display(),
                a.template.display()
            ))
            .into());
        }
    }
    let usage = |e: iac::IacError| UsageError(e.to_string());
    let copy = iac::init(STOCK_TEMPLATE, &a.code_uri, &a.binary).map_err(usage)?;
    let wanted = iac::apply(&copy, &iac::render(&catalog).map_err(usage)?).map_err(usage)?;
    if let Some(dir) = a.template.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(&a.template, wanted)?;
    std::fs::write(&chain, EMPTY_CHAIN)?;
    println!(
        "{}: written from schedkit's template for binary `{}` ({}), with {}'s schedules and alarms; {} beside it (a chain that does nothing yet)",
        a.template.display(),
        a.binary,
        a.code_uri,
        catalog.file,
        chain.display()
    );
    Ok(())
}
