//! The command line as a contract. Every command the README and the book show names a
//! command of the tree and flags that command takes; and every command of the tree runs
//! through the `schedkit` binary against a deployed stage at least once, each action by its
//! `--yes` path, each action then in the stage's audit trail once begun and once ended.
//! The tree is clap's own (`Cli::command()`), so a command added later without a run here
//! fails the second test, and a page that documents a flag that is gone fails the first.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::process::Stdio;
use std::time::Duration;

use clap::CommandFactory;
use schedkit::Status;
use schedkit_console::cli::Cli;
use schedkit_testkit::{Stack, StackOptions, localstack, unique};

use super::chains::{chain_worker, run_until};
use super::operator::{Console, dead_letters};

/// A command of the tree one can run ("dlq redrive", "jobs", "jobs pause").
#[derive(Debug, Default)]
struct Leaf {
    /// The long flags (`--reason`) and short ones (`-n`) it takes, the global ones included.
    flags: BTreeSet<String>,
    /// Whether it asks before acting (`--yes`).
    confirms: bool,
}

/// Every command of the tree one can run, by its path. A command with subcommands runs on
/// its own too when they are optional (`jobs` lists, `jobs pause` acts).
fn leaves() -> BTreeMap<String, Leaf> {
    fn flags_of(command: &clap::Command) -> BTreeSet<String> {
        command
            .get_arguments()
            .flat_map(|a| {
                let long = a.get_long().map(|l| format!("--{l}"));
                let short = a.get_short().map(|s| format!("-{s}"));
                long.into_iter().chain(short)
            })
            .collect()
    }
    fn walk(
        command: &clap::Command,
        path: &str,
        inherited: &BTreeSet<String>,
        out: &mut BTreeMap<String, Leaf>,
    ) {
        let mut flags = inherited.clone();
        flags.extend(flags_of(command));
        let subcommands: Vec<_> = command
            .get_subcommands()
            .filter(|c| c.get_name() != "help")
            .collect();
        if subcommands.is_empty() || !command.is_subcommand_required_set() {
            out.insert(
                path.to_string(),
                Leaf {
                    confirms: flags.contains("--yes"),
                    flags: flags.clone(),
                },
            );
        }
        for sub in subcommands {
            let name = sub.get_name();
            let path = if path.is_empty() {
                name.to_string()
            } else {
                format!("{path} {name}")
            };
            walk(sub, &path, &flags, out);
        }
    }
    let root = Cli::command();
    let globals: BTreeSet<String> = root
        .get_arguments()
        .filter(|a| a.is_global_set())
        .flat_map(|a| a.get_long().map(|l| format!("--{l}")))
        .chain(["--help".to_string(), "-h".to_string()])
        .collect();
    let mut out = BTreeMap::new();
    for sub in root.get_subcommands().filter(|c| c.get_name() != "help") {
        walk(sub, sub.get_name(), &globals, &mut out);
    }
    out
}

/// The global flags that take a value (`--stage dev`), which come before a command's name.
fn global_flags_with_a_value() -> BTreeSet<String> {
    Cli::command()
        .get_arguments()
        .filter(|a| a.is_global_set() && a.get_action().takes_values())
        .flat_map(|a| a.get_long().map(|l| format!("--{l}")))
        .collect()
}

/// A command line shown in the documentation, as the command it names and the flags it uses.
#[derive(Debug)]
struct Documented {
    /// Where: file and line.
    at: String,
    /// The words after `schedkit` (and its global flags) that name subcommands.
    path: String,
    /// Every flag the line shows, optional ones (`[--page N]`) included.
    flags: BTreeSet<String>,
}

/// Every `schedkit …` line inside a code block of the README and the book. Quoted words
/// (a payload, a cron expression) are one argument and never read as flags; a comment
/// (`  # …`) ends the line.
fn documented() -> Vec<Documented> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let mut files = vec![std::path::PathBuf::from(root).join("README.md")];
    let book = std::path::PathBuf::from(root).join("docs/book/src");
    let mut pages: Vec<_> = std::fs::read_dir(&book)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    files.extend(pages);
    let quoted = regex::Regex::new(r#"'[^']*'|"[^"]*""#).unwrap();
    let comment = regex::Regex::new(r"\s+#\s.*$").unwrap();
    let is_flag = regex::Regex::new(r"^(--[a-z][a-z-]*|-[a-zA-Z])$").unwrap();
    let globals = global_flags_with_a_value();
    let tree = leaves();
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let mut in_code = false;
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("```") {
                in_code = !in_code;
                continue;
            }
            let line = line.trim().trim_start_matches("$ ");
            if !in_code || !line.starts_with("schedkit ") {
                continue;
            }
            let line = comment.replace(line, "");
            let line = quoted.replace_all(&line, "ARG");
            let mut words = line.split_whitespace().skip(1).peekable();
            let mut flags = BTreeSet::new();
            while let Some(w) = words.next_if(|w| w.starts_with("--")) {
                if globals.contains(w) {
                    words.next();
                }
                flags.insert(w.to_string());
            }
            let mut path = String::new();
            while let Some(w) = words.peek() {
                let longer = if path.is_empty() {
                    w.to_string()
                } else {
                    format!("{path} {w}")
                };
                if !tree
                    .keys()
                    .any(|k| *k == longer || k.starts_with(&format!("{longer} ")))
                {
                    break;
                }
                path = longer;
                words.next();
            }
            for w in words {
                let w = w.trim_matches(|c| matches!(c, '[' | ']' | '(' | ')' | '|'));
                let flag = w.split('=').next().unwrap();
                if is_flag.is_match(flag) {
                    flags.insert(flag.to_string());
                }
            }
            out.push(Documented {
                at: format!(
                    "{}:{}",
                    file.strip_prefix(root).unwrap_or(&file).display(),
                    n + 1
                ),
                path,
                flags,
            });
        }
    }
    out
}

#[test]
fn every_command_the_readme_and_the_book_show_names_a_command_and_flags_it_takes() {
    let tree = leaves();
    let shown = documented();
    assert!(
        shown.len() >= 40,
        "the README and the book show {} command lines: the reader found too few",
        shown.len()
    );
    let mut wrong = Vec::new();
    for d in &shown {
        let Some(leaf) = tree.get(&d.path) else {
            wrong.push(format!("{}: `schedkit {}` is no command", d.at, d.path));
            continue;
        };
        for flag in d.flags.difference(&leaf.flags) {
            wrong.push(format!("{}: `schedkit {}` takes no {flag}", d.at, d.path));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // What the documentation shows is run by the test below: every command of the tree.
    let shown: BTreeSet<&str> = shown.iter().map(|d| d.path.as_str()).collect();
    assert!(shown.len() >= 25, "{shown:?}");
}

/// The commands a test ran through the binary: each as the command of the tree clap
/// parsed it to, and whether it was confirmed with `--yes` and succeeded.
struct Ran<'a> {
    console: &'a Console,
    /// Per command: how many runs, how many of them confirmed by `--yes` and successful.
    runs: BTreeMap<String, (usize, usize)>,
}

impl<'a> Ran<'a> {
    fn new(console: &'a Console) -> Ran<'a> {
        Ran {
            console,
            runs: BTreeMap::new(),
        }
    }

    /// The command of the tree `args` run (as clap parses them, the stage included).
    fn path_of(args: &[&str]) -> String {
        let matches = Cli::command()
            .try_get_matches_from(["schedkit", "--stage", "s"].iter().chain(args))
            .unwrap_or_else(|e| panic!("schedkit {args:?} does not parse: {e}"));
        let mut path = Vec::new();
        let mut at = &matches;
        while let Some((name, sub)) = at.subcommand() {
            path.push(name.to_string());
            at = sub;
        }
        path.join(" ")
    }

    fn note(&mut self, args: &[&str], succeeded: bool) {
        let entry = self.runs.entry(Self::path_of(args)).or_default();
        entry.0 += 1;
        if succeeded && args.contains(&"--yes") {
            entry.1 += 1;
        }
    }

    /// Stdout of a run that must succeed.
    fn ok(&mut self, args: &[&str]) -> String {
        let out = self.console.run(args);
        assert!(
            out.status.success(),
            "schedkit {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        self.note(args, true);
        String::from_utf8(out.stdout).unwrap()
    }

    /// A command that runs until it is stopped (`engine`, `ui`): started, handed to
    /// `meanwhile` with its first line of stdout, then stopped by SIGINT as Ctrl-C would;
    /// it must end by itself and succeed.
    fn served(&mut self, args: &[&str], meanwhile: impl FnOnce(&str)) {
        let mut child = self
            .console
            .command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("schedkit starts");
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut first = String::new();
        if args[0] == "ui" {
            stdout.read_line(&mut first).unwrap();
        } else {
            // The engine says on stderr that it runs; give it a look or two.
            std::thread::sleep(Duration::from_secs(2));
        }
        meanwhile(first.trim());
        let interrupted = std::process::Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(interrupted.success());
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(status) = child.try_wait().unwrap() {
                break status;
            }
            if std::time::Instant::now() > deadline {
                let _ = child.kill();
                panic!("schedkit {args:?} did not stop within 20 s of SIGINT");
            }
            std::thread::sleep(Duration::from_millis(100));
        };
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        assert!(status.success(), "schedkit {args:?}: {status}: {err}");
        self.note(args, true);
    }
}

/// One plain HTTP GET on loopback: the status line.
fn get(url: &str) -> String {
    let rest = url.strip_prefix("http://").unwrap();
    let (host, path) = rest.split_once('/').unwrap_or((rest, ""));
    let mut s = std::net::TcpStream::connect(host).unwrap();
    write!(
        s,
        "GET /{path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    answer.lines().next().unwrap_or_default().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_command_of_the_tree_runs_through_the_binary_against_a_stage() {
    let sdk = localstack().await;
    let stack = Stack::create(&sdk, &unique("commands"), StackOptions::default())
        .await
        .unwrap();
    let (stop, polling) = chain_worker(&stack, &sdk, "worker-commands");
    let console = Console::operator(&stack).await;
    let mut ran = Ran::new(&console);
    let dir = std::env::temp_dir().join(unique("commands"));
    std::fs::create_dir_all(&dir).unwrap();
    let file = |name: &str| dir.join(name).display().to_string();

    // The catalog, the previews and the month's cost: nothing on the stage changes.
    assert!(ran.ok(&["catalog", "check"]).contains("partner-export"));
    assert!(
        ran.ok(&["catalog", "next", "-n", "3"])
            .contains("flaky-sync")
    );
    ran.ok(&["catalog", "reference"]);
    assert!(ran.ok(&["catalog", "schema"]).contains("\"$schema\""));
    std::fs::write(
        file("crontab.txt"),
        "0 3 * * * /opt/jobs/report.sh\n*/15 * * * * /opt/jobs/sync.sh\n",
    )
    .unwrap();
    ran.ok(&[
        "catalog",
        "import",
        &file("crontab.txt"),
        "--owner",
        "data-team",
        "--out",
        &file("catalog.toml"),
    ]);
    assert!(
        std::fs::read_to_string(file("catalog.toml"))
            .unwrap()
            .contains("data-team")
    );
    ran.ok(&["cost"]);
    let next = ran.ok(&[
        "schedules",
        "next",
        "cron(30 2 * * ? *)",
        "--tz",
        "America/New_York",
        "--from",
        "2027-03-13T00:00:00Z",
        "-n",
        "3",
    ]);
    assert!(next.lines().count() >= 3, "{next}");
    let template = file("template.yaml");
    std::fs::create_dir_all(file("worker")).unwrap();
    std::fs::copy(
        concat!(env!("CARGO_MANIFEST_DIR"), "/../infra/template.yaml"),
        &template,
    )
    .unwrap();
    ran.ok(&["iac", "render", "--template", &template]);
    ran.ok(&["iac", "render", "--template", &template, "--check"]);
    ran.ok(&[
        "iac",
        "init",
        "--template",
        &file("worker/template.yaml"),
        "--binary",
        "my-worker",
    ]);
    assert!(std::path::Path::new(&file("worker/template.yaml")).exists());

    // The stage's schedules, and a job paused and resumed.
    assert!(
        ran.ok(&["schedules", "sync", "--dry-run"])
            .contains("long-report")
    );
    ran.ok(&["schedules", "sync", "--yes"]);
    ran.ok(&["jobs", "pause", "long-report", "--reason", "contract"]);
    assert!(ran.ok(&["jobs"]).contains("PAUSED since "));
    ran.ok(&["jobs", "resume", "long-report"]);

    // Three month-end runs pause on the blocked partner account: one is rerun once the
    // account is fixed, one has its failed step skipped, one is cancelled.
    let chain = |n: u32| format!("month-end#contract-{n}");
    for n in 1..=3 {
        ran.ok(&["fire", "month-end", "--key", &chain(n)]);
    }
    for n in 1..=3 {
        let paused = run_until(&stack, &chain(n), |r| r.status != Status::Running).await;
        assert_eq!(paused.status, Status::Paused, "{paused:?}");
    }
    assert!(ran.ok(&["chains", "list"]).contains(&chain(1)));
    assert!(
        ran.ok(&["chains", "show", &chain(1)])
            .contains("orders-export")
    );
    stack.activate_partner_account().await.unwrap();
    ran.ok(&["chains", "rerun", &chain(1), "--yes"]);
    ran.ok(&[
        "chains",
        "skip",
        &chain(2),
        "orders-export",
        "--reason",
        "exported by hand",
        "--step-output",
        r#"{"rows": 0}"#,
        "--yes",
    ]);
    ran.ok(&[
        "chains",
        "cancel",
        &chain(3),
        "--reason",
        "not now",
        "--yes",
    ]);
    for (n, ended) in [(1, Status::Done), (2, Status::Done), (3, Status::Cancelled)] {
        let r = run_until(&stack, &chain(n), |r| r.status != Status::Running).await;
        assert_eq!(r.status, ended, "{r:?}");
    }

    // Runs that keep failing: one cancelled by key, one by its job.
    let failing = r#"{"fail_times": 50}"#;
    for key in ["contract-retry-1", "contract-retry-2"] {
        ran.ok(&["fire", "flaky-sync", "--payload", failing, "--key", key]);
        run_until(&stack, key, |r| r.attempt >= 1).await;
    }
    // (Shown while it retries or runs again: its status moves between the two.)
    assert!(
        ran.ok(&["executions", "show", "contract-retry-1"])
            .contains("flaky-sync")
    );
    ran.ok(&["executions", "list", "--job", "flaky-sync"]);
    ran.ok(&["executions", "list", "--missed"]);
    ran.ok(&[
        "executions",
        "cancel",
        "contract-retry-1",
        "--reason",
        "contract",
        "--yes",
    ]);
    // Every run of the job not yet decided (retry-2 retrying or running again by now; the
    // chains' DONE steps of the job are over and left as they are).
    ran.ok(&["executions", "cancel", "--job", "flaky-sync", "--yes"]);
    for key in ["contract-retry-1", "contract-retry-2"] {
        let r = stack.record(key).await.unwrap().unwrap();
        assert_eq!(r.status, Status::Cancelled, "{r:?}");
    }
    // A run for later, and one further ahead (a one-time schedule).
    ran.ok(&["fire", "long-report", "--in", "5m"]);

    // Dead letters: listed, one shown, one redriven by key, the rest purged.
    dead_letters(&stack, &[("partner-export", 2)]).await;
    assert!(ran.ok(&["dlq", "list"]).contains("partner-export-1"));
    let letters = stack.peek_dlq().await.unwrap();
    let id = &letters[0].message_id.as_deref().unwrap()[..8];
    ran.ok(&["dlq", "show", id]);
    ran.ok(&["dlq", "redrive", "--key", "partner-export-0", "--yes"]);
    ran.ok(&["dlq", "purge", "--yes"]);

    // The past re-run: a backfill, previewed then sent; the local firing engine over a span
    // of the past and in real time.
    let backfill = [
        "schedules",
        "backfill",
        "flaky-sync",
        "--from",
        "2026-11-01T00:00:00Z",
        "--to",
        "2026-11-01T12:00:00Z",
    ];
    ran.ok(&[&backfill[..], &["--dry-run"]].concat());
    ran.ok(&[&backfill[..], &["--yes"]].concat());
    let fired = ran.ok(&[
        "engine",
        "--from",
        "2026-11-02T00:00:00Z",
        "--to",
        "2026-11-02T06:00:00Z",
        "--seed",
        "1",
    ]);
    assert!(fired.contains("delivered"), "{fired}");
    ran.served(&["engine", "--tick", "1"], |_| {});

    // The web page answers, then stops on Ctrl-C.
    ran.served(&["ui", "--listen", "127.0.0.1:0"], |line| {
        let url = line
            .strip_prefix("schedkit ui: ")
            .unwrap_or_else(|| panic!("the first line names the URL: {line:?}"));
        let status = get(url);
        assert!(
            status.contains(" 200 ") || status.contains(" 303 "),
            "{status}"
        );
    });

    // The reads, once everything above happened.
    ran.ok(&["status"]);
    let _ = stop.send(());
    polling.await.unwrap();

    // Every action in the stage's trail: begun and ended (finished) once per run.
    let trail: Vec<serde_json::Value> =
        serde_json::from_str(&ran.ok(&["--output", "json", "audit"])).unwrap();
    // Per action: begun, ended finished, ended unfinished.
    let mut audited: BTreeMap<String, (usize, usize, usize)> = BTreeMap::new();
    for e in &trail {
        let counts = audited
            .entry(e["what"].as_str().unwrap().into())
            .or_default();
        match (e["phase"].as_str(), e["finished"].as_bool()) {
            (Some("begin"), _) => counts.0 += 1,
            (Some("end"), Some(true)) => counts.1 += 1,
            _ => counts.2 += 1,
        }
    }
    let acted: BTreeMap<String, usize> = ran
        .runs
        .iter()
        .filter(|(_, (_, confirmed))| *confirmed > 0)
        .map(|(path, (_, confirmed))| (path.clone(), *confirmed))
        .collect();
    for (path, times) in &acted {
        assert_eq!(
            audited.get(path),
            Some(&(*times, *times, 0)),
            "`{path}` ran {times} time(s) with --yes: its trail {audited:?}"
        );
    }
    for action in ["jobs pause", "jobs resume", "fire", "engine fast-forward"] {
        assert!(
            audited
                .get(action)
                .is_some_and(|(b, e, unfinished)| b == e && *b > 0 && *unfinished == 0),
            "{action}: {audited:?}"
        );
    }

    // Every command of the tree ran; every one that asks first ran confirmed.
    let tree = leaves();
    let not_run: Vec<&String> = tree.keys().filter(|k| !ran.runs.contains_key(*k)).collect();
    assert!(
        not_run.is_empty(),
        "never run through the binary: {not_run:?}"
    );
    let unconfirmed: Vec<&String> = tree
        .iter()
        .filter(|(k, leaf)| leaf.confirms && ran.runs[*k].1 == 0)
        .map(|(k, _)| k)
        .collect();
    assert!(
        unconfirmed.is_empty(),
        "never run with --yes to success: {unconfirmed:?}"
    );
    std::fs::remove_dir_all(&dir).ok();
}
