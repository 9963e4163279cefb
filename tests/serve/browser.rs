//! The operator's page in a real headless Chromium (Debian's `chromium`),
//! driven over the W3C WebDriver protocol by Debian's `chromedriver`:
//! sign in, see the queued CVD task with its risk, rules and envelope,
//! approve it with a reason, watch it complete. `scripts/test` installs both
//! packages; without them this test fails and says so.

use super::{ALPHA, OPERATOR, Server, example, lab, with_id};
use serde_json::{Value, json};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// The W3C name of an element reference in WebDriver answers.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

struct Driver {
    child: Child,
    base: String,
    session: String,
    agent: ureq::Agent,
    _profile: tempfile::TempDir,
}

impl Driver {
    fn start() -> Self {
        for (path, package) in [(CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")] {
            assert!(
                Path::new(path).exists(),
                "{path} is missing: `apt-get install chromium chromium-driver` (scripts/test does this) \
                 — the operator page's browser test needs Debian's {package}"
            );
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let child = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(60)))
            .build()
            .into();
        let base = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(mut r) = agent.get(format!("{base}/status")).call()
                && r.body_mut()
                    .read_json::<Value>()
                    .is_ok_and(|v| v["value"]["ready"] == true)
            {
                break;
            }
            assert!(Instant::now() < deadline, "chromedriver did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        let profile = tempfile::tempdir().expect("profile dir");
        let mut driver = Self {
            child,
            base,
            session: String::new(),
            agent,
            _profile: profile,
        };
        let args = [
            "--headless=new".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-quic".to_owned(),
            "--no-first-run".to_owned(),
            "--disable-background-networking".to_owned(),
            "--disable-component-update".to_owned(),
            "--disable-sync".to_owned(),
            "--disable-dev-shm-usage".to_owned(),
            format!("--user-data-dir={}", driver._profile.path().display()),
        ];
        let created = driver.call(
            "POST",
            "/session",
            Some(json!({"capabilities": {"alwaysMatch": {
                "browserName": "chrome",
                "goog:chromeOptions": {"binary": CHROMIUM, "args": args},
            }}})),
        );
        driver.session = created["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {created}"))
            .to_owned();
        driver
    }

    /// One WebDriver command; returns its `value`.
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let url = if path == "/session" {
            format!("{}{path}", self.base)
        } else {
            format!("{}/session/{}{path}", self.base, self.session)
        };
        let mut resp = match (method, body) {
            ("GET", _) => self.agent.get(url).call(),
            ("DELETE", _) => self.agent.delete(url).call(),
            (_, body) => self
                .agent
                .post(url)
                .send_json(body.unwrap_or_else(|| json!({}))),
        }
        .expect("webdriver");
        let status = resp.status().as_u16();
        let v: Value = resp.body_mut().read_json().expect("webdriver json");
        assert_eq!(status, 200, "{method} {path}: {v}");
        v["value"].clone()
    }

    fn goto(&self, url: &str) {
        self.call("POST", "/url", Some(json!({"url": url})));
    }

    fn find(&self, css: &str) -> Option<String> {
        let v = self.call(
            "POST",
            "/elements",
            Some(json!({"using": "css selector", "value": css})),
        );
        v.as_array()
            .and_then(|a| a.first())
            .and_then(|e| e[ELEMENT].as_str())
            .map(str::to_owned)
    }

    /// Waits for an element; returns its reference.
    fn wait_for(&self, css: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(e) = self.find(css) {
                return e;
            }
            assert!(
                Instant::now() < deadline,
                "no {css} after {timeout:?}; page text:\n{}",
                self.script("return document.body.innerText")
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn type_into(&self, element: &str, text: &str) {
        self.call("POST", &format!("/element/{element}/clear"), None);
        self.call(
            "POST",
            &format!("/element/{element}/value"),
            Some(json!({"text": text})),
        );
    }

    fn click(&self, element: &str) {
        self.call("POST", &format!("/element/{element}/click"), None);
    }

    /// The element's whole text (`textContent`: also what a scrolled box
    /// hides, which WebDriver's rendered text leaves out).
    fn text(&self, element: &str) -> String {
        self.call(
            "POST",
            "/execute/sync",
            Some(json!({
                "script": "return arguments[0].textContent",
                "args": [{ELEMENT: element}],
            })),
        )
        .as_str()
        .unwrap_or("")
        .to_owned()
    }

    fn script(&self, script: &str) -> Value {
        self.call(
            "POST",
            "/execute/sync",
            Some(json!({"script": script, "args": []})),
        )
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = self
                .agent
                .delete(format!("{}/session/{}", self.base, self.session))
                .call();
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn an_operator_approves_a_queued_cvd_task_in_the_browser() {
    let data = lab();
    let server = Server::start(data.path());

    // Seed 001's CVD task, and one whose intent tries to inject markup.
    let (status, pending, task) =
        server.post("/v1/tasks", ALPHA, &example("cvd-material-synthesis"));
    assert_eq!(status, 202, "{pending}");
    let task = task.expect("task id");
    let mut hostile = with_id(example("cvd-material-synthesis"), "msg-cvd-hostile");
    hostile["payload"]["intent"] = json!(
        "<img src=x onerror=\"window.__pwned=1\"><script>window.__pwned=2</script>grow graphene"
    );
    let (status, _, hostile_task) = server.post("/v1/tasks", ALPHA, &hostile);
    assert_eq!(status, 202);
    let hostile_task = hostile_task.expect("task id");

    let browser = Driver::start();
    browser.goto(&server.url("/"));

    // A caller's credential does not open the console.
    let credential = browser.wait_for("#credential", Duration::from_secs(20));
    browser.type_into(&credential, "demo-token-harness-alpha-001-not-a-secret");
    browser.click(&browser.wait_for("#sign-in", Duration::from_secs(5)));
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let error = browser.text(&browser.wait_for("#error", Duration::from_secs(5)));
        if error.contains("is not an operator") {
            break;
        }
        assert!(Instant::now() < deadline, "no refusal shown: {error:?}");
        std::thread::sleep(Duration::from_millis(100));
    }

    browser.type_into(&credential, OPERATOR);
    browser.click(&browser.wait_for("#sign-in", Duration::from_secs(5)));
    let row = browser.wait_for(
        &format!("#approvals tr[data-task='{task}']"),
        Duration::from_secs(30),
    );
    let shown = browser.text(&row);
    // R3 in attended hours, R4 at night and at weekends (policies/context.json).
    assert!(
        shown.contains("R3") || shown.contains("R4"),
        "no risk level in the queue row:\n{shown}"
    );
    for expected in [
        "Synthesize",
        "temperature_range",
        "\"hard_limit\": true",
        "prohibited_actions",
    ] {
        assert!(
            shown.contains(expected),
            "the queue row lacks {expected:?}:\n{shown}"
        );
    }
    assert!(
        browser
            .text(&browser.wait_for("#who", Duration::from_secs(5)))
            .contains("operator-lab-01")
    );

    // Everything is shown as text: the hostile intent appears literally and
    // nothing of it ran.
    let hostile_row = browser.wait_for(
        &format!("#approvals tr[data-task='{hostile_task}']"),
        Duration::from_secs(10),
    );
    assert!(
        browser.text(&hostile_row).contains("<img src=x onerror="),
        "{}",
        browser.text(&hostile_row)
    );
    assert_eq!(
        browser.script(
            "return [window.__pwned === undefined, document.querySelectorAll('img').length]"
        ),
        json!([true, 0])
    );

    // Approve without a reason: nothing is sent.
    let approve = browser.wait_for(
        &format!("#approvals tr[data-task='{task}'] button.approve"),
        Duration::from_secs(5),
    );
    browser.click(&approve);
    std::thread::sleep(Duration::from_millis(500));
    let (_, job) = server.get(&format!("/v1/tasks/{task}"), Some(ALPHA));
    assert_eq!(job["status"], "queued", "{job}");

    let reason = browser.wait_for(
        &format!("#approvals tr[data-task='{task}'] input.reason"),
        Duration::from_secs(5),
    );
    browser.type_into(&reason, "recipe within the lab's SOP");
    let approve = browser.wait_for(
        &format!("#approvals tr[data-task='{task}'] button.approve"),
        Duration::from_secs(5),
    );
    browser.click(&approve);

    // The page shows it complete.
    browser.wait_for(
        &format!("#tasks tr[data-task='{task}'][data-state='completed']"),
        Duration::from_secs(90),
    );
    let result = server.wait_result(&task, ALPHA);
    assert_eq!(result["type"], "task_completed", "{result}");
    let (_, approval) = server.get(&format!("/v1/approvals/{task}"), Some(OPERATOR));
    assert_eq!(approval["operator_id"], "operator-lab-01", "{approval}");
    assert_eq!(
        approval["reason"], "recipe within the lab's SOP",
        "{approval}"
    );
    // The other one still waits.
    assert!(
        browser
            .find(&format!("#approvals tr[data-task='{hostile_task}']"))
            .is_some()
    );

    // Receipts: the gate's decision is listed, and the whole log verifies.
    browser.wait_for("#receipt-list tr[data-seq]", Duration::from_secs(10));
    browser.click(&browser.wait_for("#receipts-verify", Duration::from_secs(5)));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let verdict = browser.text(&browser.wait_for("#receipts-verdict", Duration::from_secs(5)));
        if verdict.starts_with("intact:") {
            break;
        }
        assert!(
            !verdict.starts_with("BROKEN") && Instant::now() < deadline,
            "receipts: {verdict:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let listed = browser.text(&browser.wait_for("#receipt-list", Duration::from_secs(5)));
    assert!(
        listed.contains("gate."),
        "no gate receipt listed:\n{listed}"
    );

    // HID: the mode switch, and a proposal whose text looks like a secret,
    // shown with its warning and rejected with a reason.
    assert_eq!(
        browser.text(&browser.wait_for("#hid-mode", Duration::from_secs(5))),
        "OBSERVE"
    );
    browser.click(&browser.wait_for("button.mode[data-mode='SUGGEST']", Duration::from_secs(5)));
    let deadline = Instant::now() + Duration::from_secs(20);
    while server.get("/v1/hid", Some(OPERATOR)).1["mode"] != "SUGGEST" {
        assert!(Instant::now() < deadline, "the mode did not change");
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut secret = with_id(example("hid-assistant"), "msg-hid-browser");
    secret["payload"]["inputs"]["steps"] = json!([
        {"action_type": "TYPE_TEXT", "payload": {"text": "api_key=sk_live_0123456789abcdefghij"}, "rationale": "paste the vendor key into the instrument's licence dialog"}
    ]);
    let (status, accepted, hid_task) = server.post("/v1/tasks", ALPHA, &secret);
    assert_eq!(status, 200, "{accepted}");
    let hid_task = hid_task.expect("task id");
    let row = browser.wait_for("#proposals tr[data-proposal]", Duration::from_secs(30));
    let shown = browser.text(&row);
    assert!(shown.contains("credential warning"), "{shown}");
    assert!(shown.contains("licence dialog"), "{shown}");
    let reason = browser.wait_for(
        "#proposals tr[data-proposal] input.reason",
        Duration::from_secs(5),
    );
    browser.type_into(&reason, "secrets are entered by hand");
    browser.click(&browser.wait_for(
        "#proposals tr[data-proposal] button.reject",
        Duration::from_secs(5),
    ));
    let result = server.wait_result(&hid_task, ALPHA);
    assert_eq!(
        result["payload"]["outputs"]["steps"][0]["outcome"], "rejected",
        "{result}"
    );
    assert!(
        result["payload"]["outputs"]["steps"][0]["detail"]
            .as_str()
            .is_some_and(|d| d.contains("secrets are entered by hand")),
        "{result}"
    );
}
