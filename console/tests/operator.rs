//! The operator console against a deployed stage on LocalStack: snapshots of every
//! read command (table and JSON) on a seeded state; selective redrive, a redrive killed
//! half-way (nothing lost), redrive-all through a move task; one-line errors; the audit
//! trail.

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Output};
use std::time::Duration;

use aws_sdk_sqs::types::MessageAttributeValue;
use schedkit::dead_letter::attr;
use schedkit::iac::roles::Role;
use schedkit::{Envelope, Metrics};
use schedkit_testkit::roles::{User, user_of};
use schedkit_testkit::{Stack, StackOptions, endpoint};
use serde_json::json;

pub(crate) struct Console {
    stage: String,
    pub(crate) audit: std::path::PathBuf,
    /// Who signs the console's requests; LocalStack's test keys when None.
    user: Option<User>,
}

impl Console {
    /// The console of one of the stage's operators: signed as an IAM user holding only the
    /// stage's operator policy, which LocalStack enforces here, so every command a test runs
    /// through it shows too that the policy allows what the command needs.
    pub(crate) async fn operator(stack: &Stack) -> Console {
        Console::of(stack, Role::Operator).await
    }

    /// The console of another of the stage's operators, `name`: a second IAM user holding
    /// the same operator policy.
    pub(crate) async fn another_operator(stack: &Stack, name: &str) -> Console {
        let policy = schedkit_testkit::roles::policy_arn(&stack.name, Role::Operator);
        let user = User::holding(&format!("{}-{name}", stack.name), &[policy])
            .await
            .unwrap();
        Console::signed(stack, user)
    }

    /// The console of one of the stage's viewers (the viewer policy only).
    pub(crate) async fn viewer(stack: &Stack) -> Console {
        Console::of(stack, Role::Viewer).await
    }

    async fn of(stack: &Stack, role: Role) -> Console {
        Console::signed(stack, user_of(stack, role).await.unwrap())
    }

    /// The stage's console signed as `user` (an IAM user, or a role's session).
    pub(crate) fn signed(stack: &Stack, user: User) -> Console {
        Console {
            user: Some(user),
            ..Console::unchecked(&stack.name)
        }
    }

    /// With LocalStack's test keys, which may do anything: for a stage that is not
    /// deployed (it has no policies).
    pub(crate) fn unchecked(stage: &str) -> Console {
        Console {
            stage: stage.into(),
            audit: std::env::temp_dir().join(format!("{stage}-audit.jsonl")),
            user: None,
        }
    }

    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_schedkit"));
        c.current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
            .arg("--stage")
            .arg(&self.stage)
            .args(args)
            .env("AWS_ENDPOINT_URL", endpoint())
            .env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_REGION", "us-east-1")
            .env("SCHEDKIT_AUDIT_LOG", &self.audit)
            .env("NO_COLOR", "1")
            .env_remove("SCHEDKIT_CATALOG");
        if let Some(user) = &self.user {
            c.envs(user.env());
        }
        c
    }

    /// The IAM user it signs as.
    pub(crate) fn user(&self) -> &User {
        self.user.as_ref().expect("a console of a role")
    }

    /// `run` with each service's endpoint of its own, STS's being `sts`.
    pub(crate) fn run_with_sts_at(&self, args: &[&str], sts: &str) -> Output {
        let mut command = self.command(args);
        command.env_remove("AWS_ENDPOINT_URL");
        for service in ["DYNAMODB", "SQS", "SCHEDULER", "SFN", "CLOUDWATCH"] {
            command.env(format!("AWS_ENDPOINT_URL_{service}"), endpoint());
        }
        command.env("AWS_ENDPOINT_URL_STS", sts);
        command.output().expect("schedkit runs")
    }

    pub(crate) fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("schedkit runs")
    }

    /// Stdout of a successful run.
    pub(crate) fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "schedkit {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}

/// Replaces what changes from run to run (times, ids, the stage, durations).
pub(crate) fn stable(text: &str, stage: &str) -> String {
    let rules: [(&str, &str); 11] = [
        (stage, "<stage>"),
        (
            r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|\+00:00)",
            "<time>",
        ),
        (r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f-]*", "<uuid>"),
        // A trace id: the stage's (a test's stage has a name of its own) and the key's.
        (r"\b[0-9a-f]{32}\b", "<trace id>"),
        (r"\b[0-9a-f]{8}\b", "<id>"),
        (r"\d+ ms", "<n> ms"),
        (r#""duration_ms": \d+"#, r#""duration_ms": <n>"#),
        (
            r#""(lease_expires_at|expires_at|age_seconds)": \d+"#,
            r#""$1": <n>"#,
        ),
        (r"\b\d+[smhd](\d\d[mh])?\b", "<age>"),
        (r"worker-[a-z0-9]+:<uuid>", "worker:<uuid>"),
        (r"\(attempt \d\)", "(attempt n)"),
    ];
    // The endpoint's port differs between machines (LOCALSTACK_PORT).
    let mut out = text.replace(&endpoint(), "<endpoint>");
    for (pattern, replacement) in rules {
        out = replace(&out, pattern, replacement);
    }
    // Column widths follow the replaced text: collapse runs of spaces.
    out.lines()
        .map(|l| {
            l.split("  ")
                .filter(|c| !c.is_empty())
                .map(str::trim)
                .collect::<Vec<_>>()
                .join(" | ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn replace(text: &str, pattern: &str, replacement: &str) -> String {
    regex::Regex::new(pattern)
        .unwrap()
        .replace_all(text, replacement)
        .into_owned()
}

/// A stage with: two invoices DONE, a sync RETRYING, an export FAILED (in the DLQ), and a
/// poison message (in the DLQ). Processed step by step, so the state is the same each run.
async fn seeded(prefix: &str) -> (Stack, Console) {
    let stack = Stack::lane(prefix, StackOptions::default()).await;
    let worker = stack.processor(
        stack.example_registry(),
        "worker-seed",
        Metrics::capture().0,
    );
    let at = "2026-11-02T09:00:00Z".parse().unwrap();
    // One delivery at a time, deleted when acknowledged or not: a fixed sequence of states.
    let once = || async {
        let batch = stack.receive(1, Duration::from_secs(5)).await.unwrap();
        let reports = worker.process(batch.clone(), None).await;
        let all: Vec<_> = reports
            .iter()
            .map(|r| schedkit::MessageReport {
                outcome: schedkit::Outcome::Succeeded,
                ..r.clone()
            })
            .collect();
        schedkit::poller::delete_acknowledged(&stack.sqs, &stack.queue_url, &all).await;
        reports
    };
    for tenant in ["acme", "globex"] {
        let mut e = Envelope::new("record-invoice", at);
        e.payload = json!({"tenant": tenant, "billing_month": "2026-10", "amount_cents": 100})
            .as_object()
            .cloned();
        stack.send_envelope(&e).await.unwrap();
        once().await;
    }
    stack.send("{\"job\": 7}").await.unwrap();
    once().await;
    // Three attempts, resent by hand instead of waiting for the backoff.
    let export = Envelope::new("partner-export", at);
    for _ in 0..3 {
        stack.send_envelope(&export).await.unwrap();
        once().await;
    }
    let mut sync = Envelope::new("flaky-sync", at);
    sync.payload = json!({"fail_times": 9}).as_object().cloned();
    stack.send_envelope(&sync).await.unwrap();
    once().await;
    let console = Console::operator(&stack).await;
    (stack, console)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_read_command_as_table_and_json_on_a_seeded_stage() {
    let (stack, console) = seeded("snap").await;
    let snap = |name: &str, args: &[&str]| {
        let text = stable(&console.ok(args), &stack.name);
        insta::assert_snapshot!(name, text);
    };
    snap("status", &["status"]);
    snap("status_json", &["--output", "json", "status"]);
    snap("jobs", &["jobs"]);
    snap("jobs_json", &["--output", "json", "jobs"]);
    snap("executions_list", &["executions", "list"]);
    snap(
        "executions_list_failed",
        &["executions", "list", "--status", "failed"],
    );
    snap(
        "executions_list_json",
        &[
            "--output",
            "json",
            "executions",
            "list",
            "--job",
            "record-invoice",
        ],
    );
    snap(
        "executions_show",
        &["executions", "show", "partner-export#2026-11-02T09:00:00Z"],
    );
    snap(
        "executions_show_json",
        &[
            "--output",
            "json",
            "executions",
            "show",
            "invoice:2026-10:acme",
        ],
    );
    snap("dlq_list", &["dlq", "list"]);
    snap("dlq_list_json", &["--output", "json", "dlq", "list"]);
    let letters = stack.peek_dlq().await.unwrap();
    let export = letters
        .iter()
        .find(|m| {
            m.body
                .as_deref()
                .is_some_and(|b| b.contains("partner-export"))
        })
        .unwrap();
    let id = &export.message_id.as_deref().unwrap()[..8];
    snap("dlq_show", &["dlq", "show", id]);
    snap("dlq_show_json", &["--output", "json", "dlq", "show", id]);
    // Paging: one record per page, the token leads on.
    let first = console.ok(&[
        "executions",
        "list",
        "--job",
        "record-invoice",
        "--limit",
        "1",
    ]);
    let token = first
        .lines()
        .last()
        .unwrap()
        .trim_start_matches("(more: --page ")
        .trim_end_matches(')');
    let second = console.ok(&[
        "executions",
        "list",
        "--job",
        "record-invoice",
        "--limit",
        "1",
        "--page",
        token,
    ]);
    assert!(first.contains("invoice:2026-10:") && second.contains("invoice:2026-10:"));
    assert_ne!(
        first.lines().nth(1),
        second.lines().nth(1),
        "the second page is another record"
    );
}

/// Puts `n` dead letters per job straight on the DLQ, as the worker would; returns the
/// body of each (their ids).
pub(crate) async fn dead_letters(
    stack: &Stack,
    jobs: &[(&str, usize)],
) -> BTreeMap<String, String> {
    let text = |v: &str| {
        MessageAttributeValue::builder()
            .data_type("String")
            .string_value(v)
            .build()
            .unwrap()
    };
    let mut bodies = BTreeMap::new();
    for (job, n) in jobs {
        for i in 0..*n {
            let mut e = Envelope::new(*job, "2026-11-02T09:00:00Z".parse().unwrap());
            e.key = Some(format!("{job}-{i}"));
            let body = e.to_json();
            stack
                .sqs
                .send_message()
                .queue_url(&stack.dlq_url)
                .message_body(&body)
                .message_attributes(attr::REASON, text("attempts-exhausted"))
                .message_attributes(attr::JOB, text(job))
                .message_attributes(attr::KEY, text(&format!("{job}-{i}")))
                .send()
                .await
                .unwrap();
            bodies.insert(format!("{job}-{i}"), job.to_string());
        }
    }
    bodies
}

/// Every message on a queue (taken off it), as the `key` of its envelope.
async fn keys_on(stack: &Stack, url: &str) -> Vec<String> {
    let queue = Stack {
        queue_url: url.to_string(),
        ..stack.clone()
    };
    let mut keys = Vec::new();
    loop {
        let batch = queue.receive(10, Duration::from_secs(1)).await.unwrap();
        if batch.is_empty() {
            return keys;
        }
        for m in &batch {
            // Every message on the jobs queue here is a letter moved back: it keeps its
            // reason, which marks it as a redrive (the one kind of message that runs a
            // FAILED run again), whether a move task or a selective redrive moved it.
            if url == stack.queue_url {
                assert!(
                    m.message_attributes.contains_key(attr::REASON),
                    "a redriven letter lost its reason: {m:?}"
                );
            }
            keys.push(
                Envelope::parse(m.body.as_deref().unwrap())
                    .unwrap()
                    .key
                    .unwrap(),
            );
        }
        schedkit::poller::delete_acknowledged(
            &stack.sqs,
            url,
            &batch
                .iter()
                .map(|m| schedkit::MessageReport {
                    message_id: m.message_id.clone().unwrap_or_default(),
                    receipt_handle: m.receipt_handle.clone(),
                    job: None,
                    key: None,
                    outcome: schedkit::Outcome::Succeeded,
                })
                .collect::<Vec<_>>(),
        )
        .await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_selective_redrive_moves_exactly_one_jobs_dead_letters() {
    let stack = Stack::lane("redrive", StackOptions::default()).await;
    let all = dead_letters(&stack, &[("export", 40), ("report", 35), ("sync", 25)]).await;
    let console = Console::operator(&stack).await;
    let out = console.ok(&["dlq", "redrive", "--job", "report", "--yes"]);
    assert_eq!(
        out,
        "redrove 35 dead letter(s); 65 did not match and stay\n"
    );

    let moved: BTreeSet<String> = keys_on(&stack, &stack.queue_url)
        .await
        .into_iter()
        .collect();
    let stayed: BTreeSet<String> = keys_on(&stack, &stack.dlq_url).await.into_iter().collect();
    let expected: BTreeSet<String> = all
        .iter()
        .filter(|(_, j)| *j == "report")
        .map(|(k, _)| k.clone())
        .collect();
    assert_eq!(moved, expected);
    assert_eq!(stayed.len(), 65);
    assert!(stayed.iter().all(|k| !k.starts_with("report-")));

    // The audit trail says who redrove what, when.
    let audit = std::fs::read_to_string(&console.audit).unwrap();
    let line: serde_json::Value = serde_json::from_str(audit.lines().last().unwrap()).unwrap();
    assert_eq!(line["what"], "dlq redrive");
    assert!(
        line["who"].as_str().unwrap().starts_with("arn:aws:"),
        "{line}"
    );
    assert!(line["when"].is_string());
    assert_eq!(
        (&line["phase"], &line["finished"]),
        (&"end".into(), &true.into())
    );
    assert_eq!(line["result"]["done"], 35);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redrive_killed_half_way_loses_nothing() {
    let stack = Stack::lane("kill", StackOptions::default()).await;
    let all = dead_letters(&stack, &[("export", 60), ("report", 40)]).await;
    let console = Console::operator(&stack).await;
    let mut child = console
        .command(&["dlq", "redrive", "--reason", "attempts-exhausted", "--yes"])
        // Held messages come back 3 s after the kill instead of 60.
        .env("SCHEDKIT_DLQ_HOLD_SECONDS", "3")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Kill it once some, but not all, dead letters are back on the jobs queue.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (visible, _, _) = stack.counts(&stack.queue_url).await.unwrap();
        if visible > 0 {
            child.kill().unwrap();
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the redrive never started"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    child.wait().unwrap();
    tokio::time::sleep(Duration::from_secs(4)).await;

    let moved = keys_on(&stack, &stack.queue_url).await;
    let stayed = keys_on(&stack, &stack.dlq_url).await;
    assert!(
        !moved.is_empty() && !stayed.is_empty(),
        "killed half-way: {} moved, {} stayed",
        moved.len(),
        stayed.len()
    );
    let found: BTreeSet<&String> = moved.iter().chain(&stayed).collect();
    let missing: Vec<_> = all.keys().filter(|k| !found.contains(k)).collect();
    assert!(missing.is_empty(), "lost: {missing:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redrive_all_uses_a_move_task_and_reports_progress() {
    let stack = Stack::lane("move", StackOptions::default()).await;
    let all = dead_letters(&stack, &[("export", 20), ("report", 10)]).await;
    let console = Console::operator(&stack).await;
    let out = console.run(&["dlq", "redrive", "--yes"]);
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(out.status.success(), "{stderr}");
    assert_eq!(
        stdout,
        "moved 30 dead letter(s) back with a message move task (COMPLETED)\n"
    );
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with("moving dead letters: ")),
        "progress: {stderr}"
    );
    assert!(
        stderr.contains("moving dead letters: 30/30"),
        "progress: {stderr}"
    );
    let moved: BTreeSet<String> = keys_on(&stack, &stack.queue_url)
        .await
        .into_iter()
        .collect();
    assert_eq!(moved, all.keys().cloned().collect());
    assert_eq!(stack.counts(&stack.dlq_url).await.unwrap(), (0, 0, 0));

    // Actions answer scripts in JSON too.
    let out = console.run(&[
        "--output", "json", "dlq", "purge", "--job", "export", "--yes",
    ]);
    assert!(out.status.success());
    let result: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["deleted"], 0);
    assert_eq!(result["selection"], "dead letters with job export");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mistakes_get_one_line_and_a_non_zero_exit() {
    let stack = Stack::lane("errors", StackOptions::default()).await;
    // LocalStack's test keys: a table that is not the stage's is not found, where an
    // operator's policy would have AWS refuse it (the roles tests show that).
    let console = Console::unchecked(&stack.name);
    let nowhere = Console::unchecked("no-such-stage").run(&["status"]);
    assert_eq!(nowhere.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&nowhere.stderr),
        "schedkit: error: queue `schedkit-no-such-stage-jobs` does not exist: is stage `no-such-stage` deployed? Give --stage, or --queue-url/--dlq-url\n"
    );
    let nowhere = Console::unchecked("no-such-stage").run(&["executions", "list"]);
    assert_eq!(nowhere.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&nowhere.stderr),
        "schedkit: error: table `schedkit-no-such-stage-executions` does not exist: is stage `no-such-stage` deployed? Give --stage, or --table\n"
    );
    let cases: [(&[&str], i32, &str); 5] = [
        (
            &["--table", "no-such-table", "executions", "list"],
            2,
            "schedkit: error: table `no-such-table` does not exist: check --table",
        ),
        (
            &["--table", "no-such-table", "executions", "show", "k"],
            2,
            "schedkit: error: table `no-such-table` does not exist: check --table",
        ),
        (
            &["executions", "list", "--page", "not-a-token"],
            2,
            "schedkit: error: --page is not a token printed by a previous page",
        ),
        (
            &["dlq", "redrive", "--older-than", "5 fortnights", "--yes"],
            2,
            "schedkit: error: --older-than `5 fortnights`: ",
        ),
        (
            &["dlq", "purge", "--job", "export"],
            2,
            "schedkit: error: delete dead letters with job export from ",
        ),
    ];
    for (args, code, start) in cases {
        let out = console.run(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
        assert!(stderr.starts_with(start), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: one line: {stderr}");
    }
    // A bad value for a flag is clap's usage error (exit 2), with no trace either.
    let out = console.run(&["executions", "list", "--status", "SLEEPING"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("`SLEEPING` is not a status"));

    // No credentials at all: one line, exit 1.
    let out = console
        .command(&["status"])
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .env("AWS_CONFIG_FILE", "/nonexistent")
        .env("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
        .env("AWS_EC2_METADATA_DISABLED", "true")
        .output()
        .unwrap();
    one_line_error(
        &out,
        1,
        "schedkit: error: looking up queue schedkit-",
        "credentials",
    );

    // An audit trail that cannot be written stops an action before it happens.
    let out = console
        .command(&["fire", "long-report"])
        .env("SCHEDKIT_AUDIT_LOG", "/proc/no-such-dir/audit.jsonl")
        .output()
        .unwrap();
    one_line_error(
        &out,
        1,
        "schedkit: error: cannot write the audit trail /proc/no-such-dir/audit.jsonl",
        "SCHEDKIT_AUDIT_LOG",
    );
    assert_eq!(
        stack.counts(&stack.queue_url).await.unwrap(),
        (0, 0, 0),
        "nothing was fired"
    );

    // Nothing answers at the endpoint: the cause, on one line, without the SDK's Debug dump.
    let out = console
        .command(&["status"])
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
        .output()
        .unwrap();
    one_line_error(
        &out,
        1,
        "schedkit: error: looking up queue schedkit-",
        "Connection refused",
    );
}

/// The command failed with `code` and one line that starts with `start` and mentions
/// `mentions`: no backtrace, no Debug dump of an SDK error.
fn one_line_error(out: &std::process::Output, code: i32, start: &str, mentions: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{stderr}");
    assert!(
        stderr.starts_with(start) && stderr.contains(mentions),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(!stderr.contains("panicked") && !stderr.contains("backtrace"));
    assert!(!stderr.contains('{'), "no Debug dump: {stderr}");
}
