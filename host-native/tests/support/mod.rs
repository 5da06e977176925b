//! Starts the real `bubble` binary and talks to it over HTTP and WebSocket.

#![allow(dead_code, unreachable_pub)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use serde_json::Value;

/// Hang protection for waits; never a speed assertion.
pub const HANG_TIMEOUT: Duration = Duration::from_secs(60);

/// A running `bubble serve` in a temp dir, killed when dropped.
pub struct Bubble {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    log: PathBuf,
}

/// A config with the dev tokens and the given extra TOML.
pub fn config(dir: &Path, extra: &str) -> PathBuf {
    let path = dir.join("bubble.toml");
    let text = format!(
        "admins = [\"root\"]\n\
         [[auth.tokens]]\ntoken = \"dev-alice\"\nprincipal = \"alice\"\n\
         [[auth.tokens]]\ntoken = \"dev-root\"\nprincipal = \"root\"\n\
         [[apps]]\nid = \"app-1\"\nkey = \"app-key\"\nsecret = \"app-secret\"\n{extra}"
    );
    std::fs::write(&path, text).expect("write config");
    path
}

impl Bubble {
    /// `bubble serve --listen 127.0.0.1:0 ARGS` with `dir` as working dir.
    pub fn start(dir: &Path, args: &[&str]) -> Bubble {
        let log = dir.join(format!("server-{}.log", std::process::id()));
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .expect("log");
        let mut child = Command::new(env!("CARGO_BIN_EXE_bubble"))
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .current_dir(dir)
            .env_remove("BUBBLE_CONFIG")
            .env_remove("BUBBLE_LISTEN")
            .env_remove("BUBBLE_STORE")
            .env_remove("BUBBLE_BROKER")
            .env_remove("BUBBLE_WS_PATH")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("spawn bubble");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx
            .recv_timeout(HANG_TIMEOUT)
            .expect("the server printed no listening line");
        let addr = line
            .trim()
            .strip_prefix("listening on http://")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_owned();
        Bubble { child, addr, log }
    }

    /// `http://ADDR` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// `ws://ADDR` + `path`.
    pub fn ws_url(&self, path: &str) -> String {
        format!("ws://{}{path}", self.addr)
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL and reap.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends SIGTERM.
    pub fn sigterm(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success());
    }

    /// Waits for the process to exit (hang-protected).
    pub fn wait(&mut self) -> ExitStatus {
        let deadline = std::time::Instant::now() + HANG_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the server did not exit"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The server's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for Bubble {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("--- server log ---\n{}", self.log());
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A pooled HTTP/1.1 client.
pub type Http = Client<HttpConnector, Full<Bytes>>;

/// A new client.
pub fn http() -> Http {
    Client::builder(hyper_util::rt::TokioExecutor::new()).build_http()
}

/// A response: status, body text, JSON (`Null` when the body is not JSON).
pub struct Reply {
    pub status: u16,
    pub text: String,
    pub json: Value,
}

/// Sends one request; transport errors are `Err`.
pub async fn request(
    client: &Http,
    method: &str,
    url: &str,
    token: Option<&str>,
    body: impl Into<Bytes>,
) -> Result<Reply, String> {
    let mut builder = hyper::Request::builder()
        .method(method)
        .uri(url)
        .header("content-type", "application/json");
    if let Some(token) = token {
        builder = builder.header("authorization", format!("Bearer {token}"));
    }
    let req = builder
        .body(Full::new(body.into()))
        .map_err(|e| e.to_string())?;
    let res = tokio::time::timeout(HANG_TIMEOUT, client.request(req))
        .await
        .map_err(|_| "timed out".to_owned())?
        .map_err(|e| e.to_string())?;
    let status = res.status().as_u16();
    let body = res
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    let text = String::from_utf8_lossy(&body).into_owned();
    let json = serde_json::from_str(&text).unwrap_or(Value::Null);
    Ok(Reply { status, text, json })
}
