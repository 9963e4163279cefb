//! The operator's page in a real headless Chromium (Debian's `chromium`),
//! driven over the W3C WebDriver protocol by Debian's `chromedriver`:
//! sign in, read what the queued R4 CVD task decides (capability, caller,
//! rules, the gate's reasons, the effective envelope as a table), approve
//! it with a reason through the confirmation step, find who approved it and
//! why, open its result and artifacts, sign out. The page runs under its
//! Content-Security-Policy throughout. `scripts/test` installs both
//! packages; without them this test fails and says so.

use super::{ALPHA, OPERATOR, Server, example, lab, with_id};
use hcp_tests::REPO_ROOT;
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
        // A 1280x900 viewport (the window's frame is not part of it).
        driver.call(
            "POST",
            "/window/rect",
            Some(json!({"width": 1280, "height": 900})),
        );
        let inner = driver
            .script("return window.innerHeight")
            .as_i64()
            .unwrap_or(900);
        driver.call(
            "POST",
            "/window/rect",
            Some(json!({"width": 1280, "height": 900 + (900 - inner).max(0)})),
        );
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

    /// Waits until the text of `css` satisfies `ok`; returns it.
    /// The text of the first element `css` matches, found and read in one
    /// script (the page re-renders its lists as tasks move: an element
    /// found in one call may be gone by the next).
    fn text_of(&self, css: &str) -> Option<String> {
        self.call(
            "POST",
            "/execute/sync",
            Some(json!({
                "script": "const e = document.querySelector(arguments[0]); return e ? e.textContent : null",
                "args": [css],
            })),
        )
        .as_str()
        .map(str::to_owned)
    }

    fn wait_text(&self, css: &str, timeout: Duration, ok: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(text) = self.text_of(css) {
                if ok(&text) {
                    return text;
                }
                assert!(Instant::now() < deadline, "{css} still reads {text:?}");
            } else {
                assert!(
                    Instant::now() < deadline,
                    "no {css} after {timeout:?}; page text:\n{}",
                    self.script("return document.body.innerText")
                );
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Waits until `css` matches nothing.
    fn wait_gone(&self, css: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while self.find(css).is_some() {
            assert!(Instant::now() < deadline, "{css} is still there");
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Whether the element is displayed (not under a hidden ancestor).
    fn displayed(&self, css: &str) -> bool {
        self.call(
            "POST",
            "/execute/sync",
            Some(json!({
                "script": "const e = document.querySelector(arguments[0]); return !!e && e.getClientRects().length > 0",
                "args": [css],
            })),
        ) == json!(true)
    }

    /// With `HCP_SCREENSHOTS=<dir>` set (relative to the repository),
    /// saves what the window shows as `<dir>/<name>.png` (how the
    /// screenshots in `docs/` are made: `HCP_SCREENSHOTS=docs`), after
    /// scrolling `css` to the top of the window.
    fn screenshot(&self, name: &str, css: &str) {
        let Some(dir) = std::env::var_os("HCP_SCREENSHOTS") else {
            return;
        };
        self.call(
            "POST",
            "/execute/sync",
            Some(json!({
                "script": "document.querySelector(arguments[0]).scrollIntoView({block: 'start'})",
                "args": [css],
            })),
        );
        std::thread::sleep(Duration::from_millis(300));
        let png = self.call("GET", "/screenshot", None);
        let png = base64::Engine::decode(
            &base64::engine::general_purpose::STANDARD,
            png.as_str().expect("a base64 PNG"),
        )
        .expect("base64");
        // Relative to the repository (tests run in the package's directory).
        let dir = Path::new(REPO_ROOT).join(dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        let path = dir.join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
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

/// Seed 001's CVD task above 800 °C: `cvd-above-800c` raises it to R4 at
/// any hour.
fn cvd_at_r4() -> Value {
    let mut m = with_id(example("cvd-material-synthesis"), "msg-cvd-r4");
    m["payload"]["inputs"]["temperature_range"] =
        json!({"min": 700, "max": 900, "unit": "celsius"});
    m
}

/// `2026-11-25 12:34:56Z`: the page's one timestamp format.
fn is_page_time(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 20
        && s.ends_with('Z')
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 => *c == b' ',
            13 | 16 => *c == b':',
            19 => *c == b'Z',
            _ => c.is_ascii_digit(),
        })
}

#[test]
fn an_operator_approves_a_queued_cvd_task_in_the_browser() {
    let data = lab();
    let server = Server::start(data.path());

    // The page comes with a policy that runs only its own script and style.
    let page = server.agent.get(server.url("/")).call().expect("GET /");
    let csp = page
        .headers()
        .get("content-security-policy")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    assert!(
        csp.starts_with("default-src 'none'; script-src 'sha256-") && !csp.contains("unsafe"),
        "{csp}"
    );

    // One CVD task whose intent tries to inject markup, and seed 001's CVD
    // task at R4 (the newest: first in the queue).
    let mut hostile = with_id(example("cvd-material-synthesis"), "msg-cvd-hostile");
    hostile["payload"]["intent"] = json!(
        "<img src=x onerror=\"window.__pwned=1\"><script>window.__pwned=2</script>grow graphene \
         on run-\u{202e}gpj.exe"
    );
    let (status, _, hostile_task) = server.post("/v1/tasks", ALPHA, &hostile);
    assert_eq!(status, 202);
    let hostile_task = hostile_task.expect("task id");
    let (status, pending, task) = server.post("/v1/tasks", ALPHA, &cvd_at_r4());
    assert_eq!(status, 202, "{pending}");
    let task = task.expect("task id");

    let browser = Driver::start();
    browser.goto(&server.url("/"));

    // A caller's credential does not open the console.
    let credential = browser.wait_for("#credential", Duration::from_secs(20));
    let card = browser.text(&browser.wait_for("#login", Duration::from_secs(5)));
    assert!(
        card.contains("bearer token") && card.contains("keeps only its SHA-256"),
        "{card}"
    );
    browser.type_into(&credential, "demo-token-harness-alpha-001-not-a-secret");
    browser.click(&browser.wait_for("#sign-in", Duration::from_secs(5)));
    browser.wait_text("#error", Duration::from_secs(20), |t| {
        t.contains("is not an operator")
    });

    browser.type_into(&credential, OPERATOR);
    browser.click(&browser.wait_for("#sign-in", Duration::from_secs(5)));
    let card = format!("#approvals article[data-task='{task}']");
    browser.wait_for(&card, Duration::from_secs(30));
    assert!(
        browser
            .text(&browser.wait_for("#who", Duration::from_secs(5)))
            .contains("operator-lab-01")
    );

    // What the approval decides: capability and version, caller, intent,
    // inputs, the risk with the rule that fired and the gate's reasons.
    let part = |css: &str| {
        browser.text(&browser.wait_for(&format!("{card} {css}"), Duration::from_secs(5)))
    };
    assert_eq!(part(".capability"), "cvd-material-synthesis@1.0.0");
    assert_eq!(part(".caller"), "harness-alpha-001");
    assert_eq!(part(".title .risk"), "R4");
    assert!(part(".intent").starts_with("Synthesize monolayer MoS2"));
    let inputs = part("table.inputs");
    assert!(inputs.contains("temperature_range.max900"), "{inputs}");
    let rules = part("ul.rules");
    assert!(
        rules.contains("cvd-above-800c") && rules.contains("→ R4"),
        "{rules}"
    );
    let reasons = part("ul.reasons");
    for expected in [
        "caller harness-alpha-001 (supervised_session) authenticated",
        "human approval required",
    ] {
        assert!(reasons.contains(expected), "no {expected:?} in {reasons}");
    }
    let equipment = part(".equipment");
    for expected in [
        "high_temperature_furnace",
        "gas_supply",
        "cvd-rig",
        "toxic_gas",
    ] {
        assert!(
            equipment.contains(expected),
            "no {expected:?} in {equipment}"
        );
    }

    // The effective envelope as a table: policies/envelopes.json tightens
    // temperature and pressure, adds a prohibited action and a procedure.
    let cells = |parameter: &str| -> Vec<String> {
        let v = browser.call(
            "POST",
            "/execute/sync",
            Some(json!({
                "script": "return [...document.querySelectorAll(arguments[0] + ' table.envelope tr[data-parameter=\"' + arguments[1] + '\"] td')].map(c => c.textContent)",
                "args": [card, parameter],
            })),
        );
        serde_json::from_value(v).expect("cells")
    };
    assert_eq!(
        cells("temperature"),
        [
            "temperature",
            "–",
            "950",
            "celsius",
            "hard",
            "max 1000 celsius (hard), tightened by policy"
        ]
    );
    assert_eq!(
        cells("pressure"),
        [
            "pressure",
            "–",
            "3",
            "atm",
            "hard",
            "max 5 atm (hard), tightened by policy"
        ]
    );
    assert_eq!(
        cells("gas_flow_rate"),
        ["gas_flow_rate", "–", "200", "sccm", "hard", "same"]
    );
    let prohibited = part("ul.prohibited");
    assert!(
        prohibited.contains("simultaneous_gas_mixing_without_purge")
            && prohibited.contains("open_chamber_above_200c (operator's policy)"),
        "{prohibited}"
    );
    let procedures = part("table.procedures");
    assert!(
        procedures.contains("over_temperature→ immediate_shutdown")
            && procedures.contains("power_loss→ close_all_valves_and_alert"),
        "{procedures}"
    );
    // One timestamp format: requested and expiry times.
    for css in [".requested", ".expires"] {
        assert!(is_page_time(&part(css)), "{css}: {}", part(css));
    }

    browser.screenshot("operator-approval", "body");

    // Everything is shown as text: the hostile intent appears literally and
    // nothing of it ran.
    let hostile_card = browser.wait_for(
        &format!("#approvals article[data-task='{hostile_task}'] .intent"),
        Duration::from_secs(10),
    );
    assert!(
        browser.text(&hostile_card).contains("<img src=x onerror="),
        "{}",
        browser.text(&hostile_card)
    );
    // A mark that reorders text is shown, not obeyed ("run-exe.jpg").
    assert!(
        browser
            .text(&hostile_card)
            .ends_with("on run-\\u{202e}gpj.exe"),
        "{:?}",
        browser.text(&hostile_card)
    );
    assert_eq!(
        browser.script(
            "return [window.__pwned === undefined, document.querySelectorAll('img').length]"
        ),
        json!([true, 0])
    );

    // Approve without a reason: nothing is sent.
    let approve = format!("{card} button.approve");
    browser.click(&browser.wait_for(&approve, Duration::from_secs(5)));
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !browser.displayed("#confirm"),
        "confirmation without a reason"
    );
    let (_, job) = server.get(&format!("/v1/tasks/{task}"), Some(ALPHA));
    assert_eq!(job["status"], "pending_approval", "{job}");

    // With a reason, an R4 task asks for confirmation, stating the risk and
    // the equipment; cancelling sends nothing.
    let reason = browser.wait_for(&format!("{card} input.reason"), Duration::from_secs(5));
    browser.type_into(&reason, "recipe within the lab's SOP");
    browser.click(&browser.wait_for(&approve, Duration::from_secs(5)));
    let dialog = browser.wait_text("dialog#confirm[open]", Duration::from_secs(5), |t| {
        !t.is_empty()
    });
    browser.screenshot("operator-confirm", &card);
    for expected in [
        "Approve a task at R4?",
        "drive physical equipment",
        "high_temperature_furnace, gas_supply, vacuum_system",
        "cvd-rig",
        "temperature max 950 celsius",
        "harness-alpha-001",
        "recipe within the lab's SOP",
    ] {
        assert!(dialog.contains(expected), "no {expected:?} in {dialog}");
    }
    browser.click(&browser.wait_for("#confirm-cancel", Duration::from_secs(5)));
    browser.wait_gone("dialog#confirm[open]", Duration::from_secs(5));
    std::thread::sleep(Duration::from_millis(500));
    let (_, job) = server.get(&format!("/v1/tasks/{task}"), Some(ALPHA));
    assert_eq!(job["status"], "pending_approval", "cancelled, yet {job}");

    // Approve, confirm.
    browser.click(&browser.wait_for(&approve, Duration::from_secs(5)));
    browser.wait_for("dialog#confirm[open]", Duration::from_secs(5));
    browser.click(&browser.wait_for("#confirm-approve", Duration::from_secs(5)));

    // The decision stays visible: who approved, when and why.
    let decided = format!("#decided tr[data-task='{task}']");
    browser.wait_for(&decided, Duration::from_secs(30));
    let cell = |css: &str| {
        browser.wait_text(&format!("{decided} {css}"), Duration::from_secs(5), |_| {
            true
        })
    };
    assert_eq!(cell(".decision"), "approved");
    assert_eq!(cell(".by"), "operator-lab-01");
    assert_eq!(cell(".why"), "recipe within the lab's SOP");
    assert!(is_page_time(&cell(".when")), "{}", cell(".when"));
    browser.wait_gone(&card, Duration::from_secs(10));
    let (_, approval) = server.get(&format!("/v1/approvals/{task}"), Some(OPERATOR));
    assert_eq!(approval["operator_id"], "operator-lab-01", "{approval}");
    assert_eq!(
        approval["reason"], "recipe within the lab's SOP",
        "{approval}"
    );

    // It completes; its result and artifacts open from the task list.
    let row = format!("#tasks tr[data-task='{task}'][data-state='completed']");
    browser.wait_for(&row, Duration::from_secs(90));
    let result = server.wait_result(&task, ALPHA);
    assert_eq!(result["type"], "task_completed", "{result}");
    browser.wait_text(&format!("{decided} .state"), Duration::from_secs(10), |t| {
        t == "completed"
    });
    browser.click(&browser.wait_for(&format!("{row} button.result"), Duration::from_secs(5)));
    browser.wait_text("#detail-body .answer-type", Duration::from_secs(10), |t| {
        t == "task_completed"
    });
    let artifact = "#detail-body tr.artifact[data-name='growth_log.csv']";
    let listed = browser.text(&browser.wait_for(artifact, Duration::from_secs(5)));
    assert!(
        listed.contains("text/csv") && listed.contains("sha256:"),
        "{listed}"
    );
    browser.click(&browser.wait_for(&format!("{artifact} button.view"), Duration::from_secs(5)));
    browser.wait_text(
        "#detail-body pre.artifact-text",
        Duration::from_secs(10),
        |t| t.starts_with("time_s,temperature_c"),
    );
    browser.screenshot("operator-decided", "#decided-section");
    // The other one still waits.
    assert!(
        browser
            .find(&format!("#approvals article[data-task='{hostile_task}']"))
            .is_some()
    );

    // Receipts: the reason column only where it says more than the verdict,
    // every time in the page's format, and the whole log verifies.
    browser.wait_for("#receipt-list tr[data-seq]", Duration::from_secs(10));
    let columns = browser.script(
        "return [...document.querySelectorAll('#receipt-list tr[data-seq]')].map(r => [r.children[1].textContent, r.children[3].textContent, r.children[4].textContent])",
    );
    for row in columns.as_array().expect("rows") {
        let [when, verdict, reason] = [0, 1, 2].map(|i| row[i].as_str().unwrap_or(""));
        assert!(is_page_time(when), "{row}");
        assert!(reason != "ALLOW" && reason != verdict, "{row}");
    }
    browser.click(&browser.wait_for("#receipts-verify", Duration::from_secs(5)));
    let verdict = browser.wait_text("#receipts-verdict", Duration::from_secs(60), |v| {
        v.starts_with("intact:") || v.starts_with("BROKEN")
    });
    assert!(verdict.starts_with("intact:"), "receipts: {verdict:?}");
    // The task's own receipts, its approval among them.
    browser.click(&browser.wait_for(
        &format!("{decided} button.receipts"),
        Duration::from_secs(5),
    ));
    browser.wait_text("#receipts-title", Duration::from_secs(10), |t| {
        t == format!("Receipts of task {task}")
    });
    let listed = browser.wait_text("#receipt-list tbody", Duration::from_secs(10), |t| {
        t.contains("gate.approval")
    });
    assert!(listed.contains("gate.admission"), "{listed}");
    browser.click(&browser.wait_for("#receipts-all", Duration::from_secs(5)));
    browser.wait_text("#receipts-title", Duration::from_secs(10), |t| {
        t == "Recent receipts"
    });

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

    // Sign out: the page forgets the token, and a reload does not sign in.
    browser.click(&browser.wait_for("#sign-out", Duration::from_secs(5)));
    assert!(browser.displayed("#login") && !browser.displayed("#console"));
    assert_eq!(
        browser.script(
            "return [sessionStorage.getItem('hcp-credential'), document.getElementById('credential').value, document.querySelectorAll('#approvals article').length]"
        ),
        json!([null, "", 0])
    );
    browser.goto(&server.url("/"));
    browser.wait_for("#credential", Duration::from_secs(20));
    std::thread::sleep(Duration::from_millis(500));
    assert!(browser.displayed("#login") && !browser.displayed("#console"));
}
