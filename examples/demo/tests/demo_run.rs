//! README command 1 runs whole: the demo binary against LocalStack, with worker processes.

#[test]
fn the_demo_fires_a_catalog_day_pauses_and_reruns_month_end_and_reports_every_outcome() {
    let _alone = super::one_demo_at_a_time();
    let name = schedkit_testkit::unique("demo-test");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_demo"))
        .args([
            "--name",
            &name,
            "--log-dir",
            &std::env::temp_dir().join(&name).to_string_lossy(),
        ])
        .output()
        .expect("demo starts");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "demo failed:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for expected in [
        "+ create long-report: cron(0 3 * * ? *) (Europe/Berlin)",
        "with two engines at once: 6 firings delivered once each (6 seen as already fired by the other engine)",
        "record-invoice   DONE        12        12",
        "partner-export   FAILED       2         6",
        "month-end        PAUSED       1         1",
        "flaky-sync       DONE         5         9",
        "long-report      DONE         2         2",
        "duplicates skipped: 15",
        "invoice side effects: 12 keys, 0 applied other than exactly once",
        "== dead letters (7)",
        "attempts-exhausted  partner-export",
        "key-conflict",
        "unknown-job",
        "jobs queue now: 0 visible, 0 in flight, 0 delayed",
        "$ schedkit --stage",
        "failing jobs\nJOB             FAILED  LAST ERROR\npartner-export  2",
        "paused chain   month-end#2026-11 since ",
        "└─ summary        long-report     not started",
        "month-end#2026-11: run 2 started (execution ",
        "to run: orders-export, summary;",
        "redrove 2 dead letter(s); 5 did not match and stay",
        "month-end#2026-11  DONE  run 2  chain month-end",
        // DONE, in one attempt or two (its retry policy allows two): on a loaded machine
        // it has taken two (fresh-clone CI runs of 2026-12-06, when its lease was 2 s).
        "└─ summary        long-report     DONE  ",
        "the rerun ran orders-export and summary; usage-report and crm-sync answered from their records",
        "deleted 5 dead letter(s); 0 did not match and stay",
        "failing jobs   none",
        "every execution is DONE (23 records",
    ] {
        assert!(text.contains(expected), "missing `{expected}` in:\n{text}");
    }
}
