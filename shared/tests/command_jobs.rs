//! Jobs that run a command (`[jobs.<name>.command]`): no Rust implementation, the process's
//! environment names its run, its exit code is the outcome, its output's tail is kept, and
//! an attempt that ends first (its timeout) ends the process's whole group. Real processes
//! on real time, the memory store and queue.

use std::time::Duration;

use schedkit::catalog::Catalog;
use schedkit::dead_letter::attr;
use schedkit::testing::TestWorker;
use schedkit::{Envelope, Jobs, Status};
use serde_json::{Value, json};

const CATALOG: &str = r#"
[jobs.report]
owner = "data"
runs_on = "host"
[jobs.report.command]
run = 'echo "key=$SCHEDKIT_KEY attempt=$SCHEDKIT_ATTEMPT due=$SCHEDKIT_SCHEDULED_FOR payload=$SCHEDKIT_PAYLOAD region=$REGION"; cat; pwd'
env = { REGION = "eu-west-1" }
stdin = "from stdin\n"
working_dir = "/tmp"

[jobs.bad-input]
owner = "data"
retry = { max_attempts = 5 }
[jobs.bad-input.command]
run = "for i in $(seq 1 400); do echo \"row $i checked\"; done; echo 'no such customer: 42' >&2; exit 3"
permanent_exit_codes = [3]

[jobs.flaky]
owner = "data"
retry = { max_attempts = 1 }
[jobs.flaky.command]
run = "echo upstream down; exit 1"

[jobs.takes-payload]
owner = "data"
retry = { max_attempts = 3, first_delay_seconds = 0, base_delay_seconds = 0 }
[jobs.takes-payload.command]
run = "true"

[jobs.hangs]
owner = "data"
timeout_seconds = 1
retry = { max_attempts = 1 }
[jobs.hangs.command]
run = "sleep 300 & echo $! > \"$PIDFILE\"; wait"
grace_seconds = 0
"#;

fn worker(catalog: &str) -> TestWorker {
    let catalog = Catalog::parse(catalog, "catalog.toml").unwrap_or_else(|e| panic!("{e}"));
    // No implementation registered: command jobs need none.
    TestWorker::new(&catalog, Jobs::new()).expect("command jobs bind without code")
}

fn run(job: &str, key: &str) -> Envelope {
    Envelope::new(job, "2026-12-05T02:30:00Z".parse().unwrap())
        .with_key(key)
        .with_payload(json!({"region": "eu"}))
}

fn letter_error(worker: &TestWorker) -> String {
    let letters = worker.dead_letters();
    assert_eq!(letters.len(), 1, "{letters:?}");
    letters[0].attributes[attr::ERROR]
        .string
        .clone()
        .unwrap_or_default()
}

#[tokio::test]
async fn a_command_runs_with_its_run_in_its_environment_and_its_output_on_the_record() {
    let worker = worker(CATALOG);
    worker.send(&run("report", "report:1"));
    assert_eq!(worker.run_until_idle().await, ["succeeded"]);
    let record = worker.record("report:1").expect("a record");
    assert_eq!(record.status, Status::Done);
    let result: Value = serde_json::from_str(record.result.as_deref().unwrap()).unwrap();
    assert_eq!(result["exit_code"], 0);
    assert_eq!(
        result["output"],
        "key=report:1 attempt=1 due=2026-12-05T02:30:00Z payload={\"region\":\"eu\"} region=eu-west-1\nfrom stdin\n/tmp"
    );
}

#[tokio::test]
async fn a_permanent_exit_code_fails_at_once_with_the_code_and_the_outputs_tail_in_the_dead_letter()
{
    let worker = worker(CATALOG);
    worker.send(&run("bad-input", "bad:1"));
    assert_eq!(worker.run_until_idle().await, ["dead-lettered"]);
    let record = worker.record("bad:1").unwrap();
    assert_eq!(record.status, Status::Failed);
    assert_eq!(record.attempt, 1, "a permanent code is not retried");
    let error = letter_error(&worker);
    assert!(error.starts_with("exited with code 3; output: "), "{error}");
    // Both streams' last lines (the order between stdout and stderr is the OS's).
    assert!(error.contains("row 400 checked"), "{error}");
    assert!(error.contains("no such customer: 42"), "{error}");
    assert!(!error.contains("row 1 checked"), "only the tail: {error}");
    assert!(error.len() <= 1024, "{}", error.len());
    let last = record.last_error.unwrap_or_default();
    assert!(
        last.contains("no such customer: 42"),
        "the record keeps it too: {last}"
    );
}

#[tokio::test]
async fn any_other_code_is_a_retryable_failure() {
    let worker = worker(CATALOG);
    worker.send(&run("flaky", "flaky:1"));
    assert_eq!(worker.run_until_idle().await, ["dead-lettered"]);
    let error = letter_error(&worker);
    assert_eq!(error, "exited with code 1; output: upstream down");
}

#[tokio::test]
async fn an_attempt_past_its_timeout_ends_the_processes_it_started() {
    let dir = std::env::temp_dir().join(format!("schedkit-hangs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pidfile = dir.join("pid");
    let catalog = CATALOG.replace("$PIDFILE", pidfile.to_str().unwrap());
    let worker = worker(&catalog);
    worker.send(&run("hangs", "hangs:1"));
    assert_eq!(worker.run_until_idle().await, ["dead-lettered"]);
    assert!(
        letter_error(&worker).contains("timed out"),
        "{}",
        letter_error(&worker)
    );
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // The background `sleep 300` was in the attempt's process group: it is gone.
    let mut alive = true;
    for _ in 0..50 {
        // SAFETY: signal 0 only asks whether the process exists.
        alive = unsafe { libc::kill(pid, 0) } == 0 && !zombie(pid);
        if !alive {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(!alive, "the command's child {pid} outlived its attempt");
}

fn zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.split(") ")
                .nth(1)
                .is_some_and(|rest| rest.starts_with('Z'))
        })
        .unwrap_or(false)
}

#[test]
fn a_command_job_that_also_names_a_handler_is_refused() {
    let errors = Catalog::parse(
        "[jobs.x]\nowner = \"o\"\nhandler = \"h\"\n[jobs.x.command]\nrun = \"true\"\npermanent_exit_codes = [0]\n",
        "c.toml",
    )
    .unwrap_err()
    .to_string();
    assert!(
        errors.contains("a job runs either its command or a handler"),
        "{errors}"
    );
    assert!(errors.contains("0 is not an exit code"), "{errors}");
}

/// A host job longer than the function's timeout (scaled down: a 1 s function, a 3 s lease,
/// a 4 s command): it runs to DONE on its first attempt, its lease kept by heartbeats (without
/// them the lease would lapse at 3 s and the attempt be ended). The lease leaves two missed
/// beats of room: a 2 s lease lapsed once under four suites at once on two cores.
#[tokio::test]
async fn a_host_job_longer_than_the_function_timeout_runs_to_done_kept_by_heartbeats() {
    let worker = worker(
        r#"
[settings]
function_timeout_seconds = 1

[jobs.nightly-etl]
owner = "data"
runs_on = "host"
lease_seconds = 3
heartbeat_seconds = 1
timeout_seconds = 30
[jobs.nightly-etl.command]
run = "sleep 4; echo loaded"
"#,
    );
    let started = std::time::Instant::now();
    worker.send(&run("nightly-etl", "etl:1"));
    assert_eq!(worker.run_until_idle().await, ["succeeded"]);
    assert!(started.elapsed() >= Duration::from_secs(4));
    let record = worker.record("etl:1").unwrap();
    assert_eq!(record.status, Status::Done);
    assert_eq!(record.attempt, 1, "one attempt, never taken over");
    assert!(record.duration_ms.unwrap_or_default() >= 4000, "{record:?}");
}

/// A map of secret values, counting its fetches.
struct Vault(std::collections::BTreeMap<&'static str, &'static str>);

impl schedkit::secrets::Source for Vault {
    fn fetch<'a>(&'a self, source: &'a str) -> schedkit::secrets::Fetching<'a> {
        let value = self.0.get(source).map(|v| v.to_string());
        Box::pin(async move { value.ok_or_else(|| format!("{source}: not found")) })
    }
}

fn vault() -> std::sync::Arc<schedkit::secrets::SecretStore> {
    let values = [
        ("ssm:/team/db-url", "postgres://db.internal/app"),
        ("secretsmanager:prod/partner", "s3cr3t"),
        // As `put-parameter --value file://token` stores it: with the file's newline.
        ("ssm:/team/token", "tok-123456\n"),
        (
            "secretsmanager:prod/tls-key",
            "-----BEGIN KEY-----\nMIIEv-line-one\nQUJD-line-two\n-----END KEY-----",
        ),
        (
            "secretsmanager:prod/db",
            r#"{"username":"app","password":"hunter2-very-secret","port":5432}"#,
        ),
    ];
    std::sync::Arc::new(schedkit::secrets::SecretStore::new(
        Vault(values.into_iter().collect()),
        Duration::from_secs(300),
    ))
}

const WITH_SECRETS: &str = r#"
[jobs.export]
owner = "data"
secrets = { DB_URL = "ssm:/team/db-url", PARTNER_KEY = "secretsmanager:prod/partner" }
[jobs.export.command]
run = 'echo "${#DB_URL} ${#PARTNER_KEY}"'

[jobs.leaky]
owner = "data"
secrets = { DB_URL = "ssm:/team/db-url" }
[jobs.leaky.command]
run = 'echo "connecting to $DB_URL"; echo "psql: could not connect to $DB_URL" >&2; exit 2'
permanent_exit_codes = [2]

[jobs.leakier]
owner = "data"
secrets = { TOKEN = "ssm:/team/token", KEY = "secretsmanager:prod/tls-key", DB = "secretsmanager:prod/db" }
[jobs.leakier.command]
run = 'printf "token %s\n" "$TOKEN"; echo "$KEY"; echo "$DB" | sed "s/.*password\":\"\([^\"]*\)\".*/password is \1/"; exit 2'
permanent_exit_codes = [2]

[jobs.rusty]
owner = "data"
secrets = { DB_URL = "ssm:/team/db-url" }
retry = { max_attempts = 1 }

[jobs.missing]
owner = "data"
secrets = { GONE = "ssm:/team/gone" }
retry = { max_attempts = 1 }
[jobs.missing.command]
run = "true"
"#;

async fn rusty(ctx: schedkit::Ctx) -> Result<String, schedkit::JobError> {
    let url = ctx.secret("DB_URL").await?;
    ctx.secret("NOT_LISTED").await.map(|_| url)
}

#[tokio::test]
async fn a_job_reads_the_secrets_its_catalog_lists_and_no_other() {
    let catalog = Catalog::parse(WITH_SECRETS, "catalog.toml").unwrap();
    let worker =
        TestWorker::with_secrets(&catalog, Jobs::new().add("rusty", rusty), vault()).unwrap();
    for (job, key) in [("export", "e:1"), ("rusty", "r:1"), ("missing", "m:1")] {
        worker.send(&run(job, key));
    }
    worker.run_until_idle().await;
    // A command gets each in its environment under its name.
    let export = worker.record("e:1").unwrap();
    assert_eq!(export.status, Status::Done);
    assert!(
        export.result.unwrap().contains("26 6"),
        "the command saw both"
    );
    // A Rust job reads its own by name; another name is refused for good.
    let rusty = worker.record("r:1").unwrap();
    assert_eq!(rusty.status, Status::Failed);
    let error = rusty.last_error.unwrap();
    assert!(
        error.contains("`NOT_LISTED` is not among job rusty's secrets"),
        "{error}"
    );
    // A secret that cannot be read fails the run (retryably), naming it.
    let missing = worker.record("m:1").unwrap();
    assert_eq!(missing.status, Status::Failed);
    let error = missing.last_error.unwrap();
    assert!(
        error.contains("reading secret `GONE` (ssm:/team/gone)"),
        "{error}"
    );
}

/// A secret's value never reaches what the run keeps or says: a command that prints it (a
/// connection string in an error, most often) has it masked in its log lines, its
/// record's output and its failure, and so in the dead letter.
#[tokio::test]
async fn a_secret_a_command_prints_is_masked_in_its_output_its_failure_and_its_dead_letter() {
    let catalog = Catalog::parse(WITH_SECRETS, "catalog.toml").unwrap();
    let worker =
        TestWorker::with_secrets(&catalog, Jobs::new().add("rusty", rusty), vault()).unwrap();
    worker.send(&run("leaky", "l:1"));
    worker.run_until_idle().await;
    let record = worker.record("l:1").unwrap();
    assert_eq!(record.status, Status::Failed);
    let error = record.last_error.unwrap();
    assert!(!error.contains("postgres://db.internal/app"), "{error}");
    assert!(error.contains("could not connect to ***"), "{error}");
    let letter = letter_error(&worker);
    assert!(!letter.contains("db.internal"), "{letter}");
}

/// A payload too large for a process's environment (Linux takes 128 KiB a variable) can
/// never start: a permanent failure that says so, not five retries of the same refusal.
#[tokio::test]
async fn a_payload_too_large_for_the_environment_fails_at_once_saying_so() {
    let worker = worker(CATALOG);
    let big = "x".repeat(200 * 1024);
    worker.send(
        &Envelope::new("takes-payload", "2026-12-05T02:30:00Z".parse().unwrap())
            .with_key("big:1")
            .with_payload(json!({ "blob": big })),
    );
    worker.run_until_idle().await;
    let record = worker.record("big:1").unwrap();
    assert_eq!(record.status, Status::Failed);
    assert_eq!(record.attempt, 1, "not retried");
    let error = record.last_error.unwrap();
    assert!(error.contains("SCHEDKIT_PAYLOAD"), "{error}");
}

/// Masking holds for the values secrets really have: a parameter stored with its file's
/// newline, a key of many lines, and the fields of a JSON secret (its password printed
/// alone).
#[tokio::test]
async fn a_secret_with_a_newline_of_many_lines_or_in_json_is_masked_too() {
    let catalog = Catalog::parse(WITH_SECRETS, "catalog.toml").unwrap();
    let worker =
        TestWorker::with_secrets(&catalog, Jobs::new().add("rusty", rusty), vault()).unwrap();
    worker.send(&run("leakier", "lk:1"));
    worker.run_until_idle().await;
    let error = worker.record("lk:1").unwrap().last_error.unwrap();
    for leaked in [
        "tok-123456",
        "MIIEv-line-one",
        "QUJD-line-two",
        "hunter2-very-secret",
    ] {
        assert!(!error.contains(leaked), "{leaked} in {error}");
    }
    assert!(
        error.contains("token ***") && error.contains("password is ***"),
        "{error}"
    );
}

/// A command gets its run's environment, not the worker's: nothing of the worker's own
/// (on Lambda, its role's credentials, which may read every job's secrets) reaches it.
#[tokio::test]
async fn a_command_does_not_inherit_the_workers_environment() {
    // Cargo gives the test process (the worker here) this variable.
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());
    let catalog = Catalog::parse(
        "[jobs.env]\nowner = \"data\"\n[jobs.env.command]\nrun = 'echo \"[$CARGO_MANIFEST_DIR] $SCHEDKIT_JOB\"; command -v sh'\n",
        "catalog.toml",
    )
    .unwrap();
    let worker = TestWorker::new(&catalog, Jobs::new()).unwrap();
    worker.send(&run("env", "env:1"));
    worker.run_until_idle().await;
    let record = worker.record("env:1").unwrap();
    assert_eq!(record.status, Status::Done, "{record:?}");
    let output = record.result.unwrap();
    assert!(output.contains("[] env"), "{output}");
    assert!(output.contains("/sh"), "PATH is kept: {output}");
}

/// A retry never runs beside its previous attempt's process: an attempt past its timeout
/// whose process ignores SIGTERM lives on until SIGKILL, `grace_seconds` later, and the
/// retry waits that long and more (here the catalog asks no delay at all).
#[tokio::test]
async fn a_retry_waits_until_the_previous_attempts_process_is_gone() {
    let dir = std::env::temp_dir().join(format!("schedkit-overlap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pidfile = dir.join("pid");
    let _ = std::fs::remove_file(&pidfile);
    let catalog = format!(
        r#"
[jobs.stubborn]
owner = "data"
timeout_seconds = 1
retry = {{ max_attempts = 2, first_delay_seconds = 0, base_delay_seconds = 0 }}
[jobs.stubborn.command]
run = 'if [ -f {pid} ] && kill -0 "$(cat {pid})" 2>/dev/null; then echo overlap; exit 9; fi; echo $$ > {pid}; if [ "$SCHEDKIT_ATTEMPT" = 1 ]; then trap "" TERM; sleep 5; fi'
permanent_exit_codes = [9]
grace_seconds = 2
"#,
        pid = pidfile.display()
    );
    let worker = worker(&catalog);
    worker.send(&run("stubborn", "s:1"));
    worker.run_until_idle().await;
    let record = worker.record("s:1").unwrap();
    assert_eq!(record.status, Status::Done, "{record:?}");
    assert_eq!(record.attempt, 2);
}
