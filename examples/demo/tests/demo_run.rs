//! README command 1 runs whole: the demo binary against LocalStack, with worker processes.

#[test]
fn the_demo_fires_a_catalog_day_and_reports_every_outcome() {
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
        "partner-export   FAILED       1         3",
        "flaky-sync       DONE         4         8",
        "long-report      DONE         1         1",
        "duplicates skipped: 15",
        "invoice side effects: 12 keys, 0 applied other than exactly once",
        "== dead letters (6)",
        "attempts-exhausted  partner-export",
        "key-conflict",
        "unknown-job",
        "jobs queue now: 0 visible, 0 in flight, 0 delayed",
        "$ schedkit --stage",
        "failing jobs\nJOB             FAILED  LAST ERROR\npartner-export  1",
        "redrove 1 dead letter(s); 5 did not match and stay",
        "deleted 5 dead letter(s); 0 did not match and stay",
        "failing jobs   none",
        "every execution is DONE (18 records)",
    ] {
        assert!(text.contains(expected), "missing `{expected}` in:\n{text}");
    }
}
