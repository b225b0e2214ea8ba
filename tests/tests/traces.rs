//! One trace from the trigger to the last step: the shipped month-end chain fired through
//! the console and run by a worker process on a deployed stage, both exporting their spans
//! to the test kit's OTLP receiver. The partner export fails while the account is blocked:
//! retried (each attempt a span), then dead-lettered (a span), and the chain pauses.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use schedkit::Status;
use schedkit::telemetry::trace_ids::{run_span_id, trace_id_in};
use schedkit_testkit::otlp::{Receiver, Span};
use schedkit_testkit::{Stack, StackOptions, localstack, processes, unique};

fn with_service(receiver: &Receiver, service: &str) -> Vec<(String, String)> {
    let mut env = receiver.env();
    env.push(("OTEL_SERVICE_NAME".into(), service.into()));
    env
}

/// The spans of `trace` once the chain run's own span (its root) has come and no span has
/// come for two seconds after it: each process's exporter sends its spans in batches of
/// its own, so the root may come before a step's spans still waiting in another batch.
async fn trace_of(receiver: &Receiver, trace: &str) -> Vec<Span> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let mut seen: Option<(usize, tokio::time::Instant)> = None;
    loop {
        let spans: Vec<Span> = receiver
            .spans()
            .into_iter()
            .filter(|s| s.trace_id == trace)
            .collect();
        if spans.iter().any(|s| s.name == "chain month-end") {
            let now = tokio::time::Instant::now();
            match seen {
                Some((n, since)) if n == spans.len() => {
                    if now - since >= Duration::from_secs(2) {
                        return spans;
                    }
                }
                _ => seen = Some((spans.len(), now)),
            }
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no root span yet, or spans still coming: {spans:#?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chain_runs_in_one_trace_from_its_trigger_to_its_last_step_with_retries_and_the_dead_letter()
 {
    let sdk = localstack().await;
    let receiver = Receiver::start().await;
    let stack = Stack::create(&sdk, &unique("traces"), StackOptions::default())
        .await
        .unwrap();
    let catalog = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../infra/catalog.toml");
    let _worker = processes::worker_with(
        &stack,
        &catalog,
        "traces",
        "worker",
        &with_service(&receiver, "schedkit-worker"),
    );
    let key = "month-end#traced";
    processes::console_json_with(
        &stack,
        &catalog,
        &["--stage", &stack.name, "fire", "month-end", "--key", key],
        &with_service(&receiver, "schedkit-console"),
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while stack.record(key).await.unwrap().map(|r| r.status) != Some(Status::Paused) {
        assert!(tokio::time::Instant::now() < deadline, "{key} never paused");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    let trace = hex::encode(trace_id_in(&stack.name, key));
    let spans = trace_of(&receiver, &trace).await;
    // The console shows the same trace id.
    let shown = processes::console_json(
        &stack,
        &catalog,
        &["--stage", &stack.name, "chains", "show", key],
    );
    assert_eq!(shown["trace_id"], trace, "{shown:#}");
    let by_id: BTreeMap<&str, &Span> = spans.iter().map(|s| (s.span_id.as_str(), s)).collect();
    let named = |name: &str| -> Vec<&Span> { spans.iter().filter(|s| s.name == name).collect() };
    let parent_of = |s: &Span| by_id.get(s.parent_span_id.as_str()).copied();
    let hex = |id: [u8; 8]| id.iter().map(|b| format!("{b:02x}")).collect::<String>();

    // One root: the chain run's own span, with the id its key gives it.
    let roots: Vec<&Span> = spans
        .iter()
        .filter(|s| s.parent_span_id.is_empty())
        .collect();
    assert_eq!(roots.len(), 1, "{spans:#?}");
    let root = roots[0];
    assert_eq!(
        (root.name.as_str(), root.span_id.as_str()),
        ("chain month-end", hex(run_span_id(key)).as_str())
    );
    assert_eq!(root.attributes["schedkit.outcome"], "chain paused");
    // Every other span's parent is in the trace.
    for s in &spans {
        assert!(
            s.parent_span_id.is_empty() || by_id.contains_key(s.parent_span_id.as_str()),
            "{} has a parent outside the trace: {s:#?}",
            s.name
        );
    }
    // The trigger: the console's `fire`, under the run; the chain's start under it.
    let fire = named("fire month-end");
    assert_eq!(fire.len(), 1, "{spans:#?}");
    assert_eq!(fire[0].service, "schedkit-console");
    assert_eq!(
        parent_of(fire[0]).map(|p| p.name.as_str()),
        Some("chain month-end")
    );
    let start = named("chain start month-end");
    assert_eq!(start.len(), 1);
    assert_eq!(start[0].parent_span_id, fire[0].span_id);
    assert_eq!(parent_of(named("chain paused month-end")[0]), Some(root));

    // Each step: its run's span under the chain's; its deliveries under its run's span;
    // the claim, the job and the write under each attempt.
    let step = |name: &str| format!("{key}#{name}");
    for (name, job, attempts) in [
        ("usage-report", "long-report", 1),
        ("crm-sync", "flaky-sync", 1),
        ("orders-export", "partner-export", 3),
    ] {
        let runs: Vec<&Span> = spans
            .iter()
            .filter(|s| s.name == format!("run {job}"))
            .collect();
        assert_eq!(runs.len(), 1, "{name}: {spans:#?}");
        assert_eq!(runs[0].span_id, hex(run_span_id(&step(name))));
        assert_eq!(parent_of(runs[0]), Some(root), "{name}");
        let mut tries: Vec<&Span> = spans
            .iter()
            .filter(|s| {
                s.name.starts_with("attempt ")
                    && s.attributes.get("schedkit.key") == Some(&step(name))
            })
            .collect();
        tries.sort_by_key(|s| s.name.clone());
        let names: Vec<&str> = tries.iter().map(|s| s.name.as_str()).collect();
        let wanted: Vec<String> = (1..=attempts).map(|n| format!("attempt {n}")).collect();
        assert_eq!(names, wanted, "{name}: the retries are spans");
        let children = |of: &Span| -> Vec<&str> {
            spans
                .iter()
                .filter(|c| c.parent_span_id == of.span_id)
                .map(|c| c.name.as_str())
                .collect()
        };
        for t in &tries {
            // Each delivery: its span under the run's, the claim and (when it decided the
            // step) the task's answer in it, the attempt beside them.
            let delivery = parent_of(t).unwrap_or_else(|| panic!("{name}: {t:#?}"));
            assert_eq!(delivery.name, format!("deliver {job}"));
            assert_eq!(parent_of(delivery), Some(runs[0]), "{name}: {delivery:#?}");
            let around = children(delivery);
            assert!(around.contains(&"claim"), "{name} {}: {around:?}", t.name);
            let answers = around.iter().filter(|c| **c == "chain answer").count();
            let last = t.name == format!("attempt {attempts}");
            assert_eq!(answers, usize::from(last), "{name} {}: {around:?}", t.name);
            // In the attempt: the job, then its outcome written.
            let inside = children(t);
            assert!(
                inside.contains(&format!("job {job}").as_str()),
                "{name}: {inside:?}"
            );
            assert!(
                inside.contains(&"finish") || inside.contains(&"commit"),
                "{name} {}: {inside:?}",
                t.name
            );
        }
        let last = tries.last().unwrap();
        let outcome = &last.attributes["schedkit.outcome"];
        let letters: Vec<&Span> = spans
            .iter()
            .filter(|s| s.name == "dead letter" && s.parent_span_id == last.span_id)
            .collect();
        if name == "orders-export" {
            assert_eq!(outcome, "dead-lettered", "{last:#?}");
            assert_eq!(letters.len(), 1, "the dead letter is a span");
            assert_eq!(
                letters[0].attributes["schedkit.reason"],
                "attempts-exhausted"
            );
        } else {
            assert_eq!(outcome, "succeeded", "{last:#?}");
            assert!(letters.is_empty());
        }
    }
    // The paused chain's last stage never ran: no span of it.
    assert!(
        named("run long-report").len() == 1,
        "summary (long-report) never ran"
    );
}
