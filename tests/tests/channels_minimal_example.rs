//! The seed's "Minimal browser example", run unchanged in Node with the `ws`
//! package providing `WebSocket` (tests/js/pubb-minimal), against the real
//! server: it connects, subscribes and prints a published event.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;

use bubble_tests::{Server, HANG_TIMEOUT, TEST_CONFIG};
use serde_json::json;

/// An app whose key is the example's placeholder, so only the URL changes.
const SEED_APP: &str = r#"
[[apps]]
id = "seed-app"
key = "YOUR_APP_KEY"
secret = "seed-secret"
"#;

fn example_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("js")
        .join("pubb-minimal")
}

/// Kills the Node process when the test ends, however it ends.
struct Node(Child);

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn example_js_keeps_the_seed_url() {
    let copy = std::fs::read_to_string(example_dir().join("example.js")).unwrap();
    assert!(copy.contains("new URL(\"wss://ws.pubb.io/socket\")"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minimal_browser_example_runs_in_node() {
    let dir = example_dir();
    assert!(
        dir.join("node_modules/ws").is_dir(),
        "the `ws` package is missing: run `npm ci --prefix tests/js/pubb-minimal`"
    );
    let server = Server::start(&format!("{TEST_CONFIG}\n{SEED_APP}"));
    let child = Command::new("node")
        .arg(dir.join("run.js"))
        .arg(server.ws_url("/socket"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run node (Node 20 must be installed)");
    let mut node = Node(child);
    let (tx, lines) = mpsc::channel::<String>();
    for stream in [
        node.0
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
        node.0
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn std::io::Read + Send>),
    ]
    .into_iter()
    .flatten()
    {
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
    }
    let mut seen = Vec::new();
    let mut wait_for = |prefix: &str| loop {
        let line = lines
            .recv_timeout(HANG_TIMEOUT)
            .unwrap_or_else(|_| panic!("node never printed {prefix:?}; output: {seen:#?}"));
        seen.push(line.clone());
        if line.starts_with(prefix) {
            return line;
        }
    };
    let connected = wait_for("Connected ");
    assert_eq!(connected.len(), "Connected ".len() + 32, "{connected}");
    wait_for("Ready to receive events");

    let (status, body) = server
        .http("seed-secret")
        .post(
            "/api/apps/seed-app/events",
            &json!({"channel": "notifications", "name": "order.created", "data": {"orderId": "1042"}}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let printed = wait_for("order.created");
    assert_eq!(printed, "order.created { orderId: '1042' }");
}
