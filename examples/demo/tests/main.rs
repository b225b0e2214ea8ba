//! README command 1, as a newcomer runs it, as one test binary. Each module proves one path:

/// The demo against the LocalStack `make test` started: every outcome reported, every
/// execution DONE after the operator's redrive.
mod demo_run;
/// The demo from a checkout without `localstack/.cache`, against a LocalStack that another
/// checkout's launcher started on another port (the Docker user's and the second checkout's
/// path), and one that cannot run schedkit's Lambdas refused in one line with the fix.
mod foreign_localstack;

/// Held by each test that runs the whole demo: two demos at once (two LocalStacks, four
/// workers, two chains) starve a 2-core machine until a 500 ms heartbeat goes unanswered
/// and the report job fails for good, which is the worker doing its job, not the demo's.
static ONE_DEMO_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The demo lock, also after a test that held it failed.
fn one_demo_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_DEMO_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
