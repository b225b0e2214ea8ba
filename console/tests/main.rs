//! The `schedkit` binary as a user runs it, as one test binary. Each module proves one area:

/// Previews, catalog checks, sync dry runs and `fire`: exact output, exit codes, one-line
/// errors.
mod cli;
/// Against a deployed stage on LocalStack: every read command (table and JSON) on a seeded
/// state; selective redrive, a redrive killed half-way, redrive-all; the audit trail.
mod operator;
