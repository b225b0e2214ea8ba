//! The parts of `infra/template.yaml` that the job catalog decides: worker settings, the
//! stage's alarms over every job ([`stage_alarms`]), the worker's permission to pause, the
//! chains' state machines, the dashboard ([`dashboard`]), and the viewer and operator
//! policies ([`roles`]). None grows with the number of jobs: a thousand jobs make the same
//! stack as four (a chain is a state machine and an alarm; a job that asks for an alarm of
//! its own, one more). The schedules are not
//! among them: the stack owns the stage's schedule group and tags it with its wiring, and
//! schedule sync owns the schedules in it (see [`crate::trigger::sync`] for why). `schedkit iac render` rewrites them between the
//! template's `BEGIN GENERATED` / `END GENERATED` markers; `--check` (run by the tests)
//! fails when the template and the catalog disagree. A team's own worker crate gets its own
//! copy of the template with [`init`], which points the worker function at its crate.
//!
//! YAML is written by hand: every value is a plain scalar or a JSON-quoted string (JSON
//! strings are valid YAML double-quoted scalars), so no YAML library is needed.

mod chain_definition;
mod chain_resources;
mod dashboard;
mod resources;
pub mod roles;
mod secrets_policy;
pub mod stage_alarms;

use std::fmt::Write;

pub use chain_definition::{
    chain_files, definition, definition_file, render_definition, step_timeouts,
};

pub use resources::logical_id;

use crate::catalog::Catalog;
use resources::q;

/// Why the template cannot be rendered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IacError {
    /// The template's generated blocks are not marked as expected.
    #[error("{0}")]
    Markers(&'static str),
    /// The stock template no longer has the line [`init`] rewrites.
    #[error("the template has no `{0}` line to point at the worker crate")]
    NoLine(&'static str),
    /// A crate folder or binary name that would not stay one plain YAML value.
    #[error("`{0}` is not a plain path or name (letters, digits, `.`, `_`, `-`, `/` only)")]
    NotPlain(String),
}

/// The first line of a generated block; the block ends at [`END`].
pub(crate) const BEGIN: &str =
    "# BEGIN GENERATED FROM the job catalog by `schedkit iac render`: do not edit by hand";
/// The last line of a generated block.
pub const END: &str = "# END GENERATED";

/// The generated blocks, in template order: mappings, then resources.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// The `Catalog` mapping: worker timeout, queue retention and visibility, the group.
    pub mappings: String,
    /// The stage's alarms, the pause permission, the chains' state machines, the viewer and
    /// operator policies and the dashboard: the same resources whatever the number of jobs
    /// (chains aside: a state machine and an alarm each; and the jobs' own alarms).
    pub resources: String,
}

/// Receives a message may take beyond its attempts before SQS's redrive policy moves it:
/// the first few looks of a delivery whose run is in progress elsewhere (hidden, not sent
/// again), and deliveries to a worker that died before it decided.
const RECEIVES_BEYOND_ATTEMPTS: u32 = 10;

/// The redrive safety net must outlast every attempt of every job. Waiting beyond a few
/// looks does not count: a delivery that waits longer (in progress elsewhere, or for its
/// job's overlap slot) is sent again with its wait as the new copy's delay, and the copy in
/// hand deleted, so its receive count stops growing (`schedkit::batch`'s requeue).
fn max_receive_count(catalog: &Catalog) -> u32 {
    catalog
        .jobs
        .values()
        .map(|j| j.policy.retry.max_attempts + RECEIVES_BEYOND_ATTEMPTS)
        .max()
        .unwrap_or(RECEIVES_BEYOND_ATTEMPTS)
        .clamp(10, 1000)
}

/// Renders the catalog's blocks.
pub fn render(catalog: &Catalog) -> Result<Rendered, IacError> {
    let s = &catalog.settings;
    let mut mappings = String::new();
    writeln!(mappings, "  Catalog:\n    Worker:").unwrap();
    for (k, v) in [
        ("TimeoutSeconds", s.function_timeout_seconds.to_string()),
        (
            "QueueVisibilitySeconds",
            (6 * s.function_timeout_seconds).to_string(),
        ),
        (
            "QueueRetentionSeconds",
            (s.queue_retention_days * 86_400).to_string(),
        ),
        (
            "DeadLetterRetentionSeconds",
            (s.dlq_retention_days * 86_400).to_string(),
        ),
        ("MaxReceiveCount", max_receive_count(catalog).to_string()),
        ("ScheduleGroup", q(&s.schedule_group)),
    ] {
        writeln!(mappings, "      {k}: {v}").unwrap();
    }

    let mut r = String::new();
    stage_alarms::write(&mut r, catalog);
    // Only for a catalog with a job that pauses: the grant reaches every schedule of the
    // stage, which a worker whose jobs never pause has no reason to hold.
    if catalog
        .jobs
        .values()
        .any(|j| j.policy.pause_after_failures.is_some())
    {
        pause_policy(&mut r);
    }
    secrets_policy::write(&mut r, catalog);
    chain_resources::write(&mut r, catalog);
    roles::write(&mut r, catalog);
    dashboard::write(&mut r);
    Ok(Rendered {
        mappings,
        resources: r,
    })
}

/// The worker's permission to pause the schedules of the jobs that ask for it
/// (`pause_after_failures`): read and update a schedule of the stage's group, and hand the
/// schedule's own role back to the scheduler, as an update must. The group's every
/// schedule, not each pausing job's by name: a role's inline policies hold 10,240
/// characters, a thousand names would not fit; which jobs the worker pauses is the
/// catalog's, bound into the worker.
fn pause_policy(r: &mut String) {
    writeln!(r, "  WorkerPausePolicy:").unwrap();
    writeln!(r, "    Type: AWS::IAM::Policy").unwrap();
    writeln!(r, "    Properties:").unwrap();
    writeln!(r, "      PolicyName: pause-after-failures").unwrap();
    writeln!(r, "      Roles: [!Ref WorkerRole]").unwrap();
    writeln!(r, "      PolicyDocument:").unwrap();
    writeln!(r, "        Version: \"2012-10-17\"").unwrap();
    writeln!(r, "        Statement:").unwrap();
    writeln!(r, "          - Sid: PauseSchedules").unwrap();
    writeln!(r, "            Effect: Allow").unwrap();
    writeln!(
        r,
        "            Action: [scheduler:GetSchedule, scheduler:UpdateSchedule]"
    )
    .unwrap();
    writeln!(r, "            Resource: !Sub \"arn:${{AWS::Partition}}:scheduler:${{AWS::Region}}:${{AWS::AccountId}}:schedule/${{ScheduleGroup}}/*\"").unwrap();
    writeln!(r, "          - Sid: KeepTheSchedulesRole").unwrap();
    writeln!(r, "            Effect: Allow").unwrap();
    writeln!(r, "            Action: iam:PassRole").unwrap();
    writeln!(r, "            Resource: !GetAtt SchedulerRole.Arn").unwrap();
    writeln!(r, "            Condition:").unwrap();
    writeln!(
        r,
        "              StringEquals: {{ iam:PassedToService: scheduler.amazonaws.com }}\n"
    )
    .unwrap();
}

/// A team's copy of the stock template, whose worker function is built from its own crate:
/// `code_uri` is the crate's folder relative to the new template (what `sam build` builds),
/// `binary` the crate's binary. Render the catalog's blocks into it with [`apply`] after.
pub fn init(stock: &str, code_uri: &str, binary: &str) -> Result<String, IacError> {
    for value in [code_uri, binary] {
        let plain = |c: char| c.is_ascii_alphanumeric() || "._-/".contains(c);
        if value.is_empty() || !value.chars().all(plain) {
            return Err(IacError::NotPlain(value.to_string()));
        }
    }
    let mut out = String::with_capacity(stock.len());
    let (mut code, mut bin) = (false, false);
    for line in stock.split_inclusive('\n') {
        let indent = &line[..line.len() - line.trim_start().len()];
        if !code && line.trim_start().starts_with("CodeUri: ") {
            code = true;
            writeln!(out, "{indent}CodeUri: {code_uri}").unwrap();
        } else if !bin && line.trim_start().starts_with("Binary: ") {
            bin = true;
            writeln!(out, "{indent}Binary: {binary}").unwrap();
        } else {
            out.push_str(line);
        }
    }
    match (code, bin) {
        (false, _) => Err(IacError::NoLine("CodeUri:")),
        (_, false) => Err(IacError::NoLine("Binary:")),
        _ => Ok(out),
    }
}

/// The template with its generated blocks replaced by `rendered`.
pub fn apply(template: &str, rendered: &Rendered) -> Result<String, IacError> {
    let mut out = String::new();
    let mut rest = template;
    for block in [&rendered.mappings, &rendered.resources] {
        let begin = rest.find(BEGIN).ok_or(IacError::Markers(
            "the template lacks a `BEGIN GENERATED` marker (two are needed: Mappings, Resources)",
        ))?;
        let line_end = begin
            + rest[begin..]
                .find('\n')
                .ok_or(IacError::Markers("unterminated marker"))?
            + 1;
        let end = line_end
            + rest[line_end..].find(END).ok_or(IacError::Markers(
                "a `BEGIN GENERATED` marker has no `END GENERATED`",
            ))?;
        // Keep the END marker's indentation: back up to the start of its line.
        let end_line_start = rest[..end].rfind('\n').map(|i| i + 1).unwrap_or(end);
        out.push_str(&rest[..line_end]);
        out.push_str(block);
        rest = &rest[end_line_start..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logical_ids_are_alphanumeric_camel_case() {
        assert_eq!(logical_id("long-report"), "LongReport");
        assert_eq!(logical_id("a_b.c-d"), "ABCD");
    }

    #[test]
    fn the_shipped_template_matches_the_shipped_catalog() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
        let catalog =
            Catalog::load(std::path::Path::new(&format!("{root}/infra/catalog.toml"))).unwrap();
        let template = std::fs::read_to_string(format!("{root}/infra/template.yaml")).unwrap();
        let wanted = apply(&template, &render(&catalog).unwrap()).unwrap();
        assert!(
            wanted == template,
            "infra/template.yaml disagrees with infra/catalog.toml: run `schedkit iac render`"
        );
        // Each chain's definition beside it, and no other.
        let dir = std::path::Path::new(root).join("infra");
        for chain in catalog.chains.values() {
            let path = dir.join(definition_file(&chain.name));
            let current = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(
                current == render_definition(&catalog, chain),
                "{} disagrees with infra/catalog.toml: run `schedkit iac render`",
                path.display()
            );
        }
        if let Ok(entries) = std::fs::read_dir(dir.join("chains")) {
            for entry in entries.flatten() {
                let name = entry.file_name().to_string_lossy().into_owned();
                let chain = name.strip_suffix(".asl.json").unwrap_or(&name);
                assert!(
                    catalog.chain(chain).is_some(),
                    "infra/chains/{name} is no chain of infra/catalog.toml: run `schedkit iac render`"
                );
            }
        }
    }

    #[test]
    fn every_schedkit_metric_an_alarm_or_the_dashboard_reads_is_the_stages_own() {
        let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
        let catalog =
            Catalog::load(std::path::Path::new(&format!("{root}/infra/catalog.toml"))).unwrap();
        let resources = render(&catalog).unwrap().resources;
        // Queries: each names the stage; plain alarms: the stage's dimension.
        for line in resources.lines().filter(|l| l.contains("SELECT ")) {
            assert!(line.contains("WHERE Stage = '${Stage}'"), "{line}");
        }
        let dimensions: Vec<&str> = resources
            .lines()
            .filter(|l| l.trim_start().starts_with("Dimensions:"))
            .filter(|l| !l.contains("Name: StateMachineArn, Value: !Ref Chain"))
            .collect();
        assert!(!dimensions.is_empty());
        for line in dimensions {
            assert!(
                line.contains("[{ Name: Stage, Value: !Ref Stage }"),
                "{line}"
            );
        }
    }

    /// Renders a catalog of `jobs` jobs (scheduled, pausing, limited: every kind of job
    /// the stage alarms cover) and `chains` chains.
    fn grown(jobs: usize, chains: usize) -> Catalog {
        let mut text = String::from("[limits.partner-api]\nconcurrency = 3\n");
        for i in 0..jobs {
            writeln!(
                text,
                "[jobs.job-{i:04}]\nowner = \"team-{}\"\nhandler = \"sync\"\nlimits = [\"partner-api\"]\npause_after_failures = 3\n[jobs.job-{i:04}.schedule]\nexpression = \"cron({} * * * ? *)\"\n",
                i % 7,
                i % 60
            )
            .unwrap();
        }
        for c in 0..chains {
            writeln!(
                text,
                "[chains.chain-{c:03}]\nowner = \"x\"\nstages = [\"a\", [\"b\", \"c\"]]\n[chains.chain-{c:03}.steps.a]\njob = \"step\"\n[chains.chain-{c:03}.steps.b]\njob = \"step\"\n[chains.chain-{c:03}.steps.c]\njob = \"step\"\n[chains.chain-{c:03}.schedule]\nexpression = \"cron(0 {} * * ? *)\"\n",
                c % 24
            )
            .unwrap();
        }
        if chains > 0 {
            text.push_str("[jobs.step]\nowner = \"x\"\n");
        }
        Catalog::parse(&text, "grown.toml").unwrap()
    }

    fn resource_count(resources: &str) -> usize {
        resources
            .lines()
            .filter(|l| l.starts_with("  ") && !l.starts_with("   ") && l.ends_with(':'))
            .count()
    }

    #[test]
    fn the_stacks_resources_and_bytes_do_not_grow_with_the_jobs() {
        let sizes: Vec<(usize, usize)> = [4, 10, 100, 1000]
            .into_iter()
            .map(|n| {
                let r = render(&grown(n, 0)).unwrap();
                (resource_count(&r.resources), r.resources.len())
            })
            .collect();
        for (count, bytes) in &sizes {
            assert_eq!(*count, sizes[0].0, "{sizes:?}");
            assert_eq!(*bytes, sizes[0].1, "{sizes:?}");
        }
        // A chain is its state machine and its executions alarm; the chains-paused alarm
        // and the worker's chain policy come with the first.
        let one = resource_count(&render(&grown(10, 1)).unwrap().resources);
        let hundred = render(&grown(10, 100)).unwrap().resources;
        assert_eq!(one, sizes[0].0 + 2 + 2);
        assert_eq!(resource_count(&hundred), one + 99 * 2);
        assert!(resource_count(&hundred) < 500 - 40);
    }

    #[test]
    fn the_worker_may_pause_the_schedules_of_its_stages_group_and_nothing_else() {
        let none = Catalog::parse("[jobs.a]\nowner = \"x\"\n", "c.toml").unwrap();
        let none = render(&none).unwrap().resources;
        assert!(
            !none.contains("WorkerPausePolicy"),
            "no job pauses: no grant"
        );
        let catalog = Catalog::parse(
            "[jobs.a]\nowner = \"x\"\npause_after_failures = 3\n[jobs.a.schedule]\nexpression = \"rate(1 hour)\"\n",
            "c.toml",
        )
        .unwrap();
        let one = render(&catalog).unwrap().resources;
        let policy: String = one[one.find("  WorkerPausePolicy:").unwrap()..]
            .lines()
            .enumerate()
            .take_while(|(i, l)| *i == 0 || l.is_empty() || l.starts_with("    "))
            .map(|(_, l)| format!("{l}\n"))
            .collect();
        assert!(policy.contains(
            "Resource: !Sub \"arn:${AWS::Partition}:scheduler:${AWS::Region}:${AWS::AccountId}:schedule/${ScheduleGroup}/*\""
        ), "{policy}");
        assert!(policy.contains("Action: [scheduler:GetSchedule, scheduler:UpdateSchedule]"));
        assert!(policy.contains("iam:PassedToService: scheduler.amazonaws.com"));
    }

    #[test]
    fn init_points_the_worker_at_another_crate_and_keeps_the_rest() {
        let stock = "A: 1\n    Metadata:\n      BuildProperties:\n        Binary: worker\n    Properties:\n      CodeUri: ../functions/worker\n      Handler: bootstrap\n";
        let copy = init(stock, ".", "my-jobs").unwrap();
        assert_eq!(
            copy,
            "A: 1\n    Metadata:\n      BuildProperties:\n        Binary: my-jobs\n    Properties:\n      CodeUri: .\n      Handler: bootstrap\n"
        );
        assert_eq!(
            init("A: 1\n", ".", "x").unwrap_err().to_string(),
            "the template has no `CodeUri:` line to point at the worker crate"
        );
        assert_eq!(
            init(stock, "my jobs: #1", "x").unwrap_err(),
            IacError::NotPlain("my jobs: #1".into())
        );
    }

    #[test]
    fn apply_is_idempotent_and_keeps_the_rest() {
        let template = format!("a\n  {BEGIN}\n  old\n  {END}\nb\n  {BEGIN}\n  {END}\nc\n");
        let r = Rendered {
            mappings: "  M\n".into(),
            resources: "  R\n".into(),
        };
        let once = apply(&template, &r).unwrap();
        assert_eq!(
            once,
            format!("a\n  {BEGIN}\n  M\n  {END}\nb\n  {BEGIN}\n  R\n  {END}\nc\n")
        );
        assert_eq!(apply(&once, &r).unwrap(), once);
    }
}
