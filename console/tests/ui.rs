//! `schedkit ui` in a real browser: headless Chromium driven through its WebDriver
//! (`chromedriver`, both from the distribution's packages, installed by
//! `infra/install-tools.sh`), against a deployed LocalStack stage. The page is served by
//! the `schedkit` binary signed as an IAM user holding only the stage's operator policy.
//!
//! The demo's operator walk-through done by clicking: from the overview to the failing job
//! and the paused chain, the chain's picture, its rerun once the account is fixed, a
//! redrive of one job's letters after a confirmation naming their count, the poison
//! purged; every record DONE at the end, a screenshot of each page under
//! `target/ui-screenshots/`, and no error in the browser's log. Then the guards: a request
//! that changes state without the anti-forgery token is refused (nothing changes), and
//! listening on 0.0.0.0 without an access token is refused. And the overview's Limits
//! section, read in the browser while one run holds a fair limit and another waits for it.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use schedkit::{Envelope, Status};
use schedkit_testkit::{Stack, StackOptions, localstack, unique};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::operator::Console;

/// A process this test started, killed (by its own pid) when dropped.
struct Owned(Child);

impl Drop for Owned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A free loopback port (bound, then let go).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `chromedriver` on a port of its own, once it says it is ready. Missing is a failure
/// that says how to install it: the test never skips.
async fn chromedriver() -> (Owned, String) {
    let port = free_port();
    let child = Command::new("chromedriver")
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("chromedriver runs (infra/install-tools.sh installs chromium and chromium-driver)");
    let owned = Owned(child);
    let url = format!("http://127.0.0.1:{port}");
    // It listens once it is ready for sessions.
    for _ in 0..100 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return (owned, url);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("chromedriver did not listen on {url}");
}

/// A plain HTTP/1.1 exchange on loopback with the page's server (which closes the
/// connection as asked): status line, headers and body as text.
async fn http(port: u16, request: String) -> std::io::Result<String> {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    s.write_all(request.as_bytes()).await?;
    let mut out = String::new();
    s.read_to_string(&mut out).await?;
    Ok(out)
}

/// A form posted to the page as another program would (with the access token's cookie
/// when given): the status line.
async fn post_form(port: u16, cookie: Option<&str>, body: &str) -> String {
    let cookie = cookie
        .map(|c| format!("Cookie: {c}\r\n"))
        .unwrap_or_default();
    let answer = http(
        port,
        format!(
            "POST /act HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{cookie}Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
    )
    .await
    .unwrap();
    answer.lines().next().unwrap_or_default().to_string()
}

/// Headless Chromium with its console log kept.
async fn browser(driver: &str) -> Client {
    let caps = json!({
        "browserName": "chrome",
        "goog:chromeOptions": {
            "binary": "/usr/bin/chromium",
            "args": ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     "--window-size=1280,1000", "--no-proxy-server"],
        },
        "goog:loggingPrefs": {"browser": "ALL"},
    });
    let serde_json::Value::Object(caps) = caps else {
        unreachable!()
    };
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(driver)
        .await
        .expect("a Chromium session")
}

/// Chromium's console log (chromedriver's `se/log`; W3C WebDriver has no log command).
#[derive(Debug)]
struct BrowserLog;

impl fantoccini::wd::WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base: &url::Url,
        session: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base.join(&format!("session/{}/se/log", session.unwrap_or_default()))
    }

    fn method_and_body(&self, _: &url::Url) -> (http::Method, Option<String>) {
        (http::Method::POST, Some(r#"{"type":"browser"}"#.into()))
    }
}

/// Where the screenshots go: `target/ui-screenshots/` of this workspace (or of
/// CARGO_TARGET_DIR).
fn screenshots() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../target")));
    let dir = target.join("ui-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

struct Walk {
    client: Client,
    base: String,
    shots: PathBuf,
    taken: Vec<String>,
}

impl Walk {
    async fn shot(&mut self, name: &str) {
        let png = self.client.screenshot().await.unwrap();
        std::fs::write(self.shots.join(format!("{name}.png")), png).unwrap();
        self.taken.push(name.into());
    }

    async fn go(&self, path: &str) {
        self.client
            .goto(&format!("{}{path}", self.base))
            .await
            .unwrap();
    }

    async fn click(&self, css: &str) {
        self.client
            .find(Locator::Css(css))
            .await
            .unwrap_or_else(|e| panic!("{css}: {e}"))
            .click()
            .await
            .unwrap();
    }

    /// Tabs from the top of the page to the control whose text is `text` (as a keyboard
    /// user would: every control on the way must take the focus in turn), then presses
    /// Enter on it.
    async fn tab_to_and_enter(&self, text: &str) {
        // WebDriver's key codes: Tab and Enter.
        const TAB: &str = "\u{e004}";
        const ENTER: &str = "\u{e007}";
        let mut passed = Vec::new();
        for _ in 0..60 {
            let focused = self.client.active_element().await.unwrap();
            let label = focused.text().await.unwrap_or_default();
            if label.trim() == text {
                focused.send_keys(ENTER).await.unwrap();
                return;
            }
            passed.push(label);
            focused.send_keys(TAB).await.unwrap();
        }
        panic!("Tab never reached `{text}`; it went through {passed:?}");
    }

    /// Clicks the link whose text is `text`, once the page has one: a filter's form
    /// submits a new page, and the old one (whose links count every letter) can still be
    /// the one shown when the click returns.
    async fn click_link(&self, text: &str) {
        self.client
            .wait()
            .at_most(Duration::from_secs(30))
            .for_element(Locator::LinkText(text))
            .await
            .unwrap_or_else(|e| panic!("a link `{text}`: {e}"))
            .click()
            .await
            .unwrap();
    }

    /// The text of the element `css` selects, once the page has one (an action's page
    /// comes after its work: a redrive's takes a second or two).
    async fn text(&self, css: &str) -> String {
        let found = self
            .client
            .wait()
            .at_most(Duration::from_secs(30))
            .for_element(Locator::Css(css))
            .await;
        match found {
            Ok(e) => e.text().await.unwrap(),
            Err(e) => {
                let page = self
                    .client
                    .find(Locator::Css("body"))
                    .await
                    .unwrap()
                    .text()
                    .await
                    .unwrap();
                let png = self.client.screenshot().await.unwrap();
                std::fs::write(self.shots.join("failed.png"), png).unwrap();
                panic!("{css}: {e}; the page (target/ui-screenshots/failed.png) says:\n{page}")
            }
        }
    }

    async fn title(&self) -> String {
        self.text("h1").await
    }
}

/// The UI served by the `schedkit` binary as `console`'s user; the URL it printed (with
/// its access token).
fn serve(console: &Console, extra: &[&str]) -> (Owned, String) {
    let mut args = vec!["ui", "--listen", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    serve_command(console.command(&args))
}

/// Starts `command` (a `schedkit ui`), and reads the URL it prints.
fn serve_command(mut command: Command) -> (Owned, String) {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("schedkit ui starts");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = line
        .trim()
        .strip_prefix("schedkit ui: ")
        .unwrap_or_else(|| panic!("the first line names the URL: {line:?}"))
        .trim_end_matches('/')
        .to_string();
    (Owned(child), url)
}

/// Waits (up to two minutes) until `check` holds of the stage's dead letters.
async fn letters_until(
    sdk: &schedkit::aws::SdkConfig,
    stack: &Stack,
    check: impl Fn(&[schedkit::ops::dlq::HeldLetter]) -> bool,
) -> Vec<schedkit::ops::dlq::HeldLetter> {
    for _ in 0..120 {
        let letters = schedkit::ops::dlq::peek(sdk, &stack.dlq_url).await.unwrap();
        if check(&letters) {
            return letters;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    panic!("the dead letters never got there");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_operators_walk_through_by_clicking_in_chromium() {
    let sdk = localstack().await;
    let stack = Stack::create(&sdk, &unique("ui"), StackOptions::default())
        .await
        .unwrap();
    let (stop, _polling) = super::chains::chain_worker(&stack, &sdk, "worker-ui");
    let console = Console::operator(&stack).await;

    // What the demo's operator finds: the month-end chain paused after the partner export
    // failed for good (the account is blocked), that export's own nightly run in the DLQ,
    // and a poison message.
    let chain = "month-end#2026-11";
    console.ok(&["fire", "month-end", "--key", chain]);
    let export = Envelope::new("partner-export", "2026-11-02T09:00:00Z".parse().unwrap());
    stack.send_envelope(&export).await.unwrap();
    stack.send("{\"job\": 7}").await.unwrap();
    for _ in 0..120 {
        if stack
            .record(chain)
            .await
            .unwrap()
            .is_some_and(|r| r.status == Status::Paused)
        {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    // Two letters of the export (the chain's step and the nightly run), and the poison.
    let letters = letters_until(&sdk, &stack, |l| {
        l.iter()
            .filter(|d| d.job.as_deref() == Some("partner-export"))
            .count()
            == 2
            && l.iter().any(|d| d.reason.as_deref() == Some("poison"))
    })
    .await;
    let exports = letters
        .iter()
        .filter(|d| d.job.as_deref() == Some("partner-export"))
        .count();

    let (_server, url) = serve(&console, &[]);
    let (base, token) = url
        .split_once("/?token=")
        .expect("the URL carries its token");
    let port: u16 = base.rsplit(':').next().unwrap().parse().unwrap();
    let cookie = format!("schedkit_ui_token_{port}={token}");
    let (_driver, driver_url) = chromedriver().await;
    let mut walk = Walk {
        client: browser(&driver_url).await,
        base: base.to_string(),
        shots: screenshots(),
        taken: Vec::new(),
    };
    // The page needs its token: without it, refused; the printed URL lets the browser in
    // (a cookie, and a redirect to the page without the token in the address bar).
    walk.go("/").await;
    assert_eq!(walk.title().await, "Refused");
    // The browser logged that refusal (reading the log empties it): only that.
    let refusals = walk.client.issue_cmd(BrowserLog).await.unwrap();
    assert!(
        refusals
            .as_array()
            .into_iter()
            .flatten()
            .all(|e| e["message"]
                .as_str()
                .is_some_and(|m| m.contains("401 (Unauthorized)"))),
        "{refusals}"
    );
    walk.client.goto(&url).await.unwrap();
    assert_eq!(
        walk.client.current_url().await.unwrap().as_str(),
        format!("{base}/")
    );

    // The overview names the failing job and the paused chain.
    walk.go("/").await;
    assert_eq!(walk.title().await, "Overview");
    let failing = walk.text("#failing").await;
    assert!(failing.contains("partner-export"), "{failing}");
    let paused = walk.text("#paused").await;
    assert!(
        paused.contains(chain) && paused.contains("orders-export"),
        "{paused}"
    );
    walk.shot("overview").await;

    // The failing job's page: its runs on a time line.
    walk.click("#failing tr.failing td a").await;
    assert_eq!(walk.title().await, "Job partner-export");
    walk.client
        .find(Locator::Css("figure.timeline svg rect.bar.st-failed"))
        .await
        .expect("a failed run on the time line");
    walk.shot("job").await;

    // The paused chain's picture, reached with the keyboard alone (Tab to its link, then
    // Enter): its stages, the export FAILED, the summary not started.
    walk.go("/").await;
    walk.tab_to_and_enter(chain).await;
    assert_eq!(walk.title().await, format!("Chain run {chain}"));
    let export_box = walk.text("a.step[data-step='orders-export']").await;
    assert!(export_box.contains("FAILED"), "{export_box}");
    let summary_box = walk.text("a.step[data-step='summary']").await;
    assert!(summary_box.contains("NOT STARTED"), "{summary_box}");
    walk.shot("chain-paused").await;

    // The fix (the partner re-activates the account), then the rerun, confirmed.
    stack.activate_partner_account().await.unwrap();
    walk.click_link("Rerun from the failed step").await;
    let says = walk.text(".says").await;
    assert!(
        says.contains("orders-export")
            && says.contains("summary")
            && !says.contains("usage-report,"),
        "{says}"
    );
    walk.shot("confirm-rerun").await;
    walk.click("#confirm").await;
    let done = walk.text(".done").await;
    assert!(done.contains("run 2 started"), "{done}");

    // The export's letters: a confirmation that names their count, then the redrive.
    walk.go("/dlq").await;
    walk.shot("dead-letters").await;
    walk.client
        .find(Locator::Css("select[name=job]"))
        .await
        .unwrap()
        .select_by_value("partner-export")
        .await
        .unwrap();
    walk.click("form.filters button").await;
    walk.click_link(&format!("Redrive these {exports}")).await;
    let says = walk.text(".says").await;
    let count = if exports == 1 {
        "1 dead letter".to_string()
    } else {
        format!("{exports} dead letters")
    };
    assert!(
        says.starts_with(&format!("Redrive {count} (job partner-export)")),
        "{says}"
    );
    walk.shot("confirm-redrive").await;
    walk.click("#confirm").await;
    let done = walk.text(".done").await;
    assert!(
        done.contains(&format!("redrove {exports} dead letter(s)")),
        "{done}"
    );

    // The poison, purged through the page; before the operator confirms, the same purge
    // posted by another program: without the access token's cookie, or without (or with
    // another) anti-forgery token, refused, and the poison still there.
    walk.go("/dlq?reason=poison").await;
    walk.click_link("Purge these 1").await;
    let says = walk.text(".says").await;
    assert!(
        says.starts_with("Delete 1 dead letter (reason poison)"),
        "{says}"
    );
    let source = walk.client.source().await.unwrap();
    let field = |name: &str| {
        let re = regex::Regex::new(&format!(r#"name="{name}" value="([^"]*)""#)).unwrap();
        re.captures(&source)
            .unwrap_or_else(|| panic!("no {name} in the form"))[1]
            .to_string()
    };
    let (csrf, once) = (field("csrf"), field("once"));
    let poison = letters
        .iter()
        .find(|d| d.reason.as_deref() == Some("poison"))
        .unwrap();
    let form = format!(
        "action=purge&reason=poison&message_id={}&once={once}",
        poison.message_id
    );
    let with_csrf = format!("{form}&csrf={csrf}");
    assert!(
        post_form(port, None, &with_csrf).await.contains(" 401 "),
        "no cookie"
    );
    assert!(
        post_form(port, Some(&cookie), &form)
            .await
            .contains(" 403 "),
        "no anti-forgery token"
    );
    let other = format!("{form}&csrf=0123456789abcdef");
    assert!(
        post_form(port, Some(&cookie), &other)
            .await
            .contains(" 403 "),
        "another token"
    );
    let after = schedkit::ops::dlq::peek(&sdk, &stack.dlq_url)
        .await
        .unwrap();
    assert!(
        after.iter().any(|d| d.message_id == poison.message_id),
        "a forged request purged the poison"
    );
    walk.click("#confirm").await;
    assert!(
        walk.text(".done")
            .await
            .contains("deleted 1 dead letter(s)")
    );
    // The same confirmation sent again (a reload, a replay): refused, nothing done twice.
    assert!(
        post_form(port, Some(&cookie), &with_csrf)
            .await
            .contains(" 409 "),
        "a replay"
    );
    walk.client.refresh().await.unwrap();
    assert!(
        walk.text(".done")
            .await
            .contains("deleted 1 dead letter(s)"),
        "the result page reloads as it was"
    );

    // Every record DONE.
    let mut open = Vec::new();
    for _ in 0..120 {
        let records = stack.records().await.unwrap();
        open = records
            .into_iter()
            .filter(|r| r.status != Status::Done)
            .map(|r| (r.execution_key, r.status))
            .collect();
        if open.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    assert!(open.is_empty(), "not every record is DONE: {open:?}");
    let _ = stop.send(());

    // The other pages, as they are now.
    walk.go(&format!("/chain?key={}", chain.replace('#', "%23")))
        .await;
    assert!(
        walk.text("a.step[data-step='summary']")
            .await
            .contains("DONE")
    );
    walk.shot("chain-done").await;
    for (path, name, title) in [
        ("/", "overview-after", "Overview"),
        ("/jobs", "jobs", "Jobs"),
        ("/executions", "executions", "Executions"),
        ("/chains", "chains", "Chains"),
        ("/audit", "audit", "Audit trail"),
    ] {
        walk.go(path).await;
        assert_eq!(walk.title().await, title);
        walk.shot(name).await;
    }
    let audit = walk.text("table.audit").await;
    assert!(
        audit.contains("chains rerun")
            && audit.contains("dlq redrive")
            && audit.contains("dlq purge"),
        "{audit}"
    );
    walk.go(&format!(
        "/run?key={}",
        "month-end%232026-11%23orders-export"
    ))
    .await;
    assert!(walk.text("dl.facts").await.contains("Trace id"));
    walk.shot("run").await;

    // Nothing went wrong in the browser.
    let log = walk.client.issue_cmd(BrowserLog).await.unwrap();
    let errors: Vec<_> = log
        .as_array()
        .into_iter()
        .flatten()
        .filter(|e| e["level"] == "SEVERE")
        .collect();
    assert!(errors.is_empty(), "the browser logged errors: {errors:?}");
    for name in &walk.taken {
        assert!(
            walk.shots
                .join(format!("{name}.png"))
                .metadata()
                .unwrap()
                .len()
                > 1000,
            "{name}"
        );
    }
    walk.client.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listening_beyond_loopback_needs_a_token() {
    let console = Console::unchecked("nowhere");
    let refused = console.run(&["ui", "--listen", "0.0.0.0:0"]);
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("not loopback) needs an access token"),
        "{stderr}"
    );
}

/// What the dead-letters page reads: at most its cap, every letter left in the queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bounded_look_at_the_dlq_reads_at_most_its_cap_and_consumes_nothing() {
    let stack = Stack::lane("ui-peek", StackOptions::default()).await;
    for i in 0..12 {
        let mut e = Envelope::new("record-invoice", "2026-11-02T09:00:00Z".parse().unwrap());
        e.key = Some(format!("letter-{i}"));
        stack
            .sqs
            .send_message()
            .queue_url(&stack.dlq_url)
            .message_body(e.to_json())
            .send()
            .await
            .unwrap();
    }
    let sdk = localstack().await;
    let (some, stopped) = schedkit::ops::dlq::peek_at_most(&sdk, &stack.dlq_url, 5)
        .await
        .unwrap();
    assert_eq!((some.len(), stopped), (5, true));
    // Nothing consumed, nothing left held: a whole look right after finds all twelve.
    let (all, stopped) = schedkit::ops::dlq::peek_at_most(&sdk, &stack.dlq_url, 100)
        .await
        .unwrap();
    assert_eq!((all.len(), stopped), (12, false));
}

const LIMITED: &str = r#"
[limits.partner]
concurrency = 1
fair = "{tenant}"

[jobs.long-report]
owner = "data"
payload = { seconds = 1, tenant = "a" }
lease_seconds = 30
limits = ["partner"]
"#;

/// The overview shows who waits for what and why, in Chromium: a worker's run of tenant
/// `a` holds the limit of one shared fairly by tenant, a run of tenant `b` waits in its
/// line; the Limits section names the limit, what it allows, the permit in use, the
/// waiting run as the next, and each tenant's share (held, waiting).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_overview_shows_who_waits_for_a_limit_and_why_in_chromium() {
    let stack = Stack::lane("ui-limits", StackOptions::default()).await;
    let catalog = std::env::temp_dir().join(format!("{}-limits.toml", stack.name));
    std::fs::write(&catalog, LIMITED).unwrap();
    let mut worker = schedkit_testkit::processes::worker(&stack, &catalog, "ui", "holder");
    let run = |key: &str, tenant: &str, seconds: u64| {
        let mut e = Envelope::new("long-report", "2026-12-01T09:00:00Z".parse().unwrap());
        e.key = Some(key.into());
        e.payload = json!({"seconds": seconds, "tenant": tenant})
            .as_object()
            .cloned();
        e.to_json()
    };
    stack.send(&run("holding", "a", 30)).await.unwrap();
    let running = |key: &'static str| {
        let stack = &stack;
        async move {
            for _ in 0..60 {
                let record = stack.record(key).await.unwrap();
                if record.is_some_and(|r| r.status == Status::Running) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            panic!("`{key}` never ran");
        }
    };
    running("holding").await;
    stack.send(&run("waiting", "b", 1)).await.unwrap();
    let audit = std::env::temp_dir().join(format!("{}-audit.jsonl", stack.name));
    let status = || {
        let mut c = Command::new(env!("CARGO_BIN_EXE_schedkit"));
        c.current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
            .envs(stack.worker_env())
            .env("SCHEDKIT_CATALOG", &catalog)
            .env("SCHEDKIT_AUDIT_LOG", &audit)
            .env("NO_COLOR", "1");
        c
    };
    // `waiting` joins the line (its share holds none of the limit).
    let mut last = String::new();
    for _ in 0..40 {
        let out = status()
            .args(["status", "--output", "json"])
            .output()
            .unwrap();
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        if json["limits"][0]["line"]["waiting"] == 1 {
            last.clear();
            break;
        }
        last = format!("{json:#} {}", String::from_utf8_lossy(&out.stderr));
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(last.is_empty(), "`waiting` never joined the line: {last}");
    let mut ui = status();
    ui.args(["ui", "--listen", "127.0.0.1:0"]);
    let (_server, url) = serve_command(ui);
    let (_driver, driver_url) = chromedriver().await;
    let mut walk = Walk {
        client: browser(&driver_url).await,
        base: url.split_once("/?token=").unwrap().0.to_string(),
        shots: screenshots(),
        taken: Vec::new(),
    };
    walk.client.goto(&url).await.unwrap();
    walk.go("/").await;
    assert_eq!(walk.title().await, "Overview");
    let limits = walk.text("#limits").await;
    for says in [
        "partner",
        "1 at once",
        "next: waiting of b",
        "a: 1 held",
        "b: 0 held, 1 waiting",
        "long-report",
    ] {
        assert!(limits.contains(says), "{says:?} not in {limits:?}");
    }
    walk.shot("limits").await;
    worker.kill().await.ok();
}
