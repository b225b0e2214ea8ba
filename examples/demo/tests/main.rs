//! README command 1, as a newcomer runs it, as one test binary. Each module proves one path:

/// The demo against the LocalStack `make test` started: every outcome reported, every
/// execution DONE after the operator's redrive.
mod demo_run;
/// The demo from a checkout without `localstack/.cache`, against a LocalStack that another
/// checkout's launcher started on another port (the Docker user's and the second checkout's
/// path), and one that cannot run schedkit's Lambdas refused in one line with the fix.
mod foreign_localstack;
