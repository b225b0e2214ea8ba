//! The `schedkit` binary as a user runs it, as one test binary. Each module proves one area:

/// The audit trail of actions that fail half-way: a begin and an end line, the end saying
/// what was done.
mod audit;
/// Chain runs through the console on a deployed stage: `chains list/show` (table and
/// JSON) on a paused run, `status` naming it, `chains rerun` (confirmation, audit) from the
/// failed step to DONE, and a rerun of an aborted execution.
mod chains;
/// Previews, catalog checks, sync dry runs and `fire`: exact output, exit codes, one-line
/// errors.
mod cli;
/// The command line as a contract: every command the README and the book show exists with
/// the flags shown, and every command of the tree runs through the binary on a stage (each
/// action by its `--yes` path, then in the audit trail once).
mod commands;
/// `catalog import` of a 30-line crontab: the catalog's next firings equal cron's,
/// computed independently, and so do the firings `cost` counts in a month; the lines no
/// `cron()` says exactly are named.
mod import;
/// Against a deployed stage on LocalStack: every read command (table and JSON) on a seeded
/// state; selective redrive, a redrive killed half-way, redrive-all; the audit trail.
mod operator;
/// Pausing a job by hand and by the worker after its `pause_after_failures`: the schedule
/// DISABLED, `status` says who and why, a sync keeps it, `jobs resume` enables it; audited.
mod pause;
/// The viewer and operator policies on a LocalStack that enforces them: a viewer reads and
/// is refused every action (the refusal names the permission and the policy); an operator
/// acts; each used exactly its policy's actions.
mod roles;
/// `schedkit ui` in headless Chromium on a deployed stage: the operator's walk-through by
/// clicking (a screenshot of each page under target/ui-screenshots/), no browser errors, a
/// forged request refused, and no listening beyond loopback without a token.
mod ui;
