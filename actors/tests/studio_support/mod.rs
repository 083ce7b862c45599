//! A small WebDriver client for the studio's browser tests: Chromium and ChromeDriver from the
//! system's packages (installed here when missing, once, the way the SDK test installs its venv),
//! driven over the W3C WebDriver protocol with plain HTTP.

#![allow(dead_code)]

use base64::Engine as _;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// Chromium and ChromeDriver are installed (from Debian's packages when missing and this is
/// root). `Err` says why not.
pub fn ensure_browser() -> Result<(), String> {
    // The tests of this binary run in parallel: one installs, the others wait for it (and
    // apt-get waits for any other holder of the dpkg lock instead of failing at once).
    static INSTALL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = INSTALL.lock().unwrap_or_else(|p| p.into_inner());
    if Path::new(CHROMIUM).exists() && Path::new(CHROMEDRIVER).exists() {
        return Ok(());
    }
    let root = Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false);
    if !root {
        return Err(format!("{CHROMIUM} or {CHROMEDRIVER} is missing and this user cannot apt-get install chromium chromium-driver"));
    }
    for args in [
        vec!["update", "-qq"],
        vec!["install", "-y", "-qq", "chromium", "chromium-driver"],
    ] {
        let ok = Command::new("apt-get")
            .args(["-o", "DPkg::Lock::Timeout=600"])
            .args(&args)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .stdout(Stdio::null())
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !ok {
            return Err(format!("apt-get {} failed", args.join(" ")));
        }
    }
    Ok(())
}

/// A free loopback port.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A running ChromeDriver with one headless Chromium session.
pub struct Browser {
    driver: Child,
    base: String,
    http: reqwest::Client,
    shots: PathBuf,
}

impl Drop for Browser {
    /// Ends the session first (ChromeDriver closes Chromium), then stops ChromeDriver: killing
    /// the driver alone would leave the browser running. Plain blocking HTTP, since `drop`
    /// cannot await.
    fn drop(&mut self) {
        use std::io::{Read, Write};
        if let Some(rest) = self.base.strip_prefix("http://") {
            if let Some((host, path)) = rest.split_once('/') {
                if let Ok(mut s) = std::net::TcpStream::connect(host) {
                    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
                    let _ = write!(
                        s,
                        "DELETE /{path} HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    );
                    let _ = s.read_to_end(&mut Vec::new());
                }
            }
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

impl Browser {
    /// Starts ChromeDriver and a session; screenshots go to `shots`.
    pub async fn start(shots: &Path) -> Browser {
        let port = free_port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let http = reqwest::Client::new();
        let url = format!("http://127.0.0.1:{port}");
        let deadline = Instant::now() + Duration::from_secs(20);
        while http.get(format!("{url}/status")).send().await.is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not answer");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": CHROMIUM, "args": [
                "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1440,1000", "--force-device-scale-factor=1"
            ]}
        }}});
        let res: Value = http
            .post(format!("{url}/session"))
            .json(&caps)
            .send()
            .await
            .expect("new session")
            .json()
            .await
            .expect("session JSON");
        let id = res["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {res}"))
            .to_string();
        std::fs::create_dir_all(shots).unwrap();
        Browser {
            driver,
            base: format!("{url}/session/{id}"),
            http,
            shots: shots.to_path_buf(),
        }
    }

    async fn call(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        match self.try_call(method, path, body).await {
            Ok(v) => v,
            Err(e) => panic!("webdriver {path}: {e}"),
        }
    }

    async fn try_call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> Result<Value, Value> {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let res: Value = req
            .send()
            .await
            .expect("webdriver answers")
            .json()
            .await
            .expect("webdriver JSON");
        if res["value"].get("error").is_some() {
            return Err(res["value"].clone());
        }
        Ok(res["value"].clone())
    }

    /// Opens a URL.
    pub async fn goto(&self, url: &str) {
        self.call(reqwest::Method::POST, "/url", Some(json!({ "url": url })))
            .await;
    }

    /// Runs a script in the page and returns its value.
    pub async fn eval(&self, script: &str, args: Value) -> Value {
        self.call(
            reqwest::Method::POST,
            "/execute/sync",
            Some(json!({"script": script, "args": args})),
        )
        .await
    }

    /// The text of the first element matching `css`, if any.
    pub async fn text(&self, css: &str) -> Option<String> {
        self.eval(
            "const e = document.querySelector(arguments[0]); return e ? e.textContent : null;",
            json!([css]),
        )
        .await
        .as_str()
        .map(String::from)
    }

    /// How many elements match `css`.
    pub async fn count(&self, css: &str) -> usize {
        self.eval(
            "return document.querySelectorAll(arguments[0]).length;",
            json!([css]),
        )
        .await
        .as_u64()
        .unwrap_or(0) as usize
    }

    /// Waits (at most `secs`) until `predicate` holds for the page; panics naming `what`.
    pub async fn wait_for(&self, what: &str, secs: u64, script: &str, args: Value) -> Value {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let v = self.eval(script, args.clone()).await;
            if !(v.is_null() || v == json!(false) || v == json!(0)) {
                return v;
            }
            if Instant::now() > deadline {
                let body = self.text("body").await.unwrap_or_default();
                let shot = self.screenshot("failure").await;
                panic!(
                    "timed out waiting for {what}; page text: {}; screenshot {}",
                    body.chars().take(2000).collect::<String>(),
                    shot.display()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until an element matching `css` exists.
    pub async fn wait_css(&self, css: &str, secs: u64) {
        self.wait_for(
            css,
            secs,
            "return document.querySelector(arguments[0]) !== null;",
            json!([css]),
        )
        .await;
    }

    async fn element(&self, css: &str) -> String {
        let v = self
            .call(
                reqwest::Method::POST,
                "/element",
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        v[ELEMENT].as_str().expect("an element id").to_string()
    }

    /// Clicks the element matching `css`, as a person would (finding it again if the page
    /// re-rendered it in between).
    pub async fn click(&self, css: &str) {
        for _ in 0..50 {
            let e = self.element(css).await;
            match self
                .try_call(
                    reqwest::Method::POST,
                    &format!("/element/{e}/click"),
                    Some(json!({})),
                )
                .await
            {
                Ok(_) => return,
                Err(err) if err["error"] == "stale element reference" => {
                    tokio::time::sleep(Duration::from_millis(100)).await
                }
                Err(err) => panic!("click {css}: {err}"),
            }
        }
        panic!("click {css}: the element kept going stale");
    }

    /// Types into the element matching `css` (after clearing it), finding it again if the page
    /// re-rendered it in between.
    pub async fn type_into(&self, css: &str, text: &str) {
        for _ in 0..50 {
            let e = self.element(css).await;
            let cleared = self
                .try_call(
                    reqwest::Method::POST,
                    &format!("/element/{e}/clear"),
                    Some(json!({})),
                )
                .await;
            let typed = match cleared {
                Ok(_) => {
                    self.try_call(
                        reqwest::Method::POST,
                        &format!("/element/{e}/value"),
                        Some(json!({ "text": text })),
                    )
                    .await
                }
                Err(err) => Err(err),
            };
            match typed {
                Ok(_) => return,
                Err(err) if err["error"] == "stale element reference" => {
                    tokio::time::sleep(Duration::from_millis(100)).await
                }
                Err(err) => panic!("type into {css}: {err}"),
            }
        }
        panic!("type into {css}: the element kept going stale");
    }

    /// Presses keys on the focused element (WebDriver key codes, e.g. "\u{E007}" for Enter).
    pub async fn keys(&self, css: &str, text: &str) {
        let e = self.element(css).await;
        self.call(
            reqwest::Method::POST,
            &format!("/element/{e}/value"),
            Some(json!({ "text": text })),
        )
        .await;
    }

    /// Writes a screenshot of the viewport as `NAME.png`; returns its path.
    pub async fn screenshot(&self, name: &str) -> PathBuf {
        // Passing notices would cover the view.
        self.eval(
            "const f = document.querySelector('#flash'); if (f) f.replaceChildren();",
            json!([]),
        )
        .await;
        let b64 = self.call(reqwest::Method::GET, "/screenshot", None).await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(b64.as_str().unwrap_or_default())
            .expect("a base64 PNG");
        let path = self.shots.join(format!("{name}.png"));
        std::fs::write(&path, png).unwrap();
        path
    }
}
