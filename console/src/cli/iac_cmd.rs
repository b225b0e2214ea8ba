//! `schedkit iac render`: write the catalog's parts of the template (or check them);
//! `schedkit iac init`: a copy of the template for a worker crate of your own.

use std::path::PathBuf;

use clap::Args;

use schedkit::iac;

use super::{globals::Globals, globals::load_catalog, usage::UsageError};

#[derive(Debug, Args)]
pub struct RenderArgs {
    /// The SAM template with the generated blocks.
    #[arg(long, default_value = "infra/template.yaml")]
    pub template: PathBuf,
    /// Change nothing; fail (exit 2) if the template disagrees with the catalog.
    #[arg(long)]
    pub check: bool,
}

pub async fn render(a: &RenderArgs, cli: &Globals) -> anyhow::Result<()> {
    let catalog = load_catalog(cli)?;
    let template = std::fs::read_to_string(&a.template)
        .map_err(|e| UsageError(format!("{}: {e}", a.template.display())))?;
    let rendered = iac::render(&catalog).map_err(|e| UsageError(e.to_string()))?;
    let wanted = iac::apply(&template, &rendered)
        .map_err(|e| UsageError(format!("{}: {e}", a.template.display())))?;
    // The template, then each chain's definition beside it; a definition of a chain the
    // catalog no longer has is stale.
    let dir = a.template.parent().unwrap_or(std::path::Path::new(""));
    let mut files = vec![(a.template.clone(), Some(wanted))];
    let chains = dir.join("chains");
    let expected: Vec<(PathBuf, String)> = iac::chain_files(&catalog)
        .into_iter()
        .map(|(path, text)| (dir.join(path), text))
        .collect();
    if let Ok(entries) = std::fs::read_dir(&chains) {
        for entry in entries.flatten() {
            let path = entry.path();
            let generated = path.to_string_lossy().ends_with(".asl.json");
            if generated && !expected.iter().any(|(p, _)| *p == path) {
                files.push((path, None));
            }
        }
    }
    files.extend(expected.into_iter().map(|(p, text)| (p, Some(text))));
    let mut changed = Vec::new();
    for (path, text) in &files {
        let current = std::fs::read_to_string(path).ok();
        if current.as_ref() != text.as_ref() {
            changed.push((path, text));
        }
    }
    if changed.is_empty() {
        let n = catalog.chains.len();
        println!(
            "{}: in sync with {} ({n} chain definition{})",
            a.template.display(),
            catalog.file,
            if n == 1 { "" } else { "s" }
        );
        return Ok(());
    }
    if a.check {
        let names: Vec<String> = changed
            .iter()
            .map(|(p, _)| p.display().to_string())
            .collect();
        return Err(UsageError(format!(
            "{} disagree with {}: run `schedkit iac render`",
            names.join(", "),
            catalog.file
        ))
        .into());
    }
    for (path, text) in changed {
        match text {
            Some(text) => {
                if let Some(parent) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(parent)?;
                }
                std::fs::write(path, text)?;
                println!("{}: regenerated from {}", path.display(), catalog.file);
            }
            None => {
                std::fs::remove_file(path)?;
                println!(
                    "{}: removed (no such chain in {})",
                    path.display(),
                    catalog.file
                );
            }
        }
    }
    Ok(())
}

/// schedkit's template, as this console was built with it.
const STOCK_TEMPLATE: &str = include_str!("../../../infra/template.yaml");
#[derive(Debug, Args)]
pub struct InitArgs {
    /// The template to write (it must not exist yet); the chains' definitions go in
    /// `chains/` beside it.
    #[arg(long)]
    pub template: PathBuf,
    /// The worker crate's folder, relative to the template (what `sam build` builds).
    #[arg(long, default_value = ".")]
    pub code_uri: String,
    /// The worker crate's binary.
    #[arg(long)]
    pub binary: String,
}

pub fn init(a: &InitArgs, cli: &Globals) -> anyhow::Result<()> {
    let catalog = load_catalog(cli)?;
    let dir = a.template.parent().unwrap_or(std::path::Path::new(""));
    let usage = |e: iac::IacError| UsageError(e.to_string());
    let copy = iac::init(STOCK_TEMPLATE, &a.code_uri, &a.binary).map_err(usage)?;
    let wanted = iac::apply(&copy, &iac::render(&catalog).map_err(usage)?).map_err(usage)?;
    let mut files = vec![(a.template.clone(), wanted)];
    files.extend(
        iac::chain_files(&catalog)
            .into_iter()
            .map(|(path, text)| (dir.join(path), text)),
    );
    for (path, _) in &files {
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
    for (path, text) in &files {
        if let Some(parent) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, text)?;
    }
    println!(
        "{}: written from schedkit's template for binary `{}` ({}), with {}'s alarms and {} chain definition(s) in {}",
        a.template.display(),
        a.binary,
        a.code_uri,
        catalog.file,
        catalog.chains.len(),
        dir.join("chains").display()
    );
    Ok(())
}
