//! `schedkit iac render`: write the catalog's parts of the template (or check them).

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
