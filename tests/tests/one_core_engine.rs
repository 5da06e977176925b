//! The server held to one core, where the engine shares its thread with the
//! sockets and carries out an HTTP request within the connection's own
//! task (no hand-over to the engine task and back): concurrent publishes
//! and appends reach every subscriber once and in order, each append's
//! answer names its own gapless `seq`, bad requests get their exact codes
//! and change nothing, and an acknowledged append survives `kill -9`.

mod channels_common;

use std::collections::BTreeSet;

use bubble_tests::threads::{
    create_thread, error_code, expect_event, page_all, run_started, subscribe, thread_path,
};
use bubble_tests::{HttpClient, Server, Store, ALICE, TEST_CONFIG};
use channels_common::{
    backend, events_path, expect_published_ticks, publish, spawn_tick_publishers, subscribe_spread,
};
use serde_json::json;

const CHANNELS: usize = 4;
const SUBSCRIBERS: usize = 16;
const PUBLISHES: usize = 100;
const APPENDERS: usize = 4;
const APPENDS: usize = 50;

/// Asserts the server sized itself for one core.
fn on_one_core(server: &Server) {
    let logs = server.logs();
    assert!(
        logs.contains("engine=Local"),
        "the engine shares the sockets' thread:\n{logs}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_publishes_arrive_once_in_order() {
    let server = Server::start_on_one_core(TEST_CONFIG, Store::Memory);
    on_one_core(&server);
    let mut sockets = subscribe_spread(&server, SUBSCRIBERS, CHANNELS).await;
    let publishers = spawn_tick_publishers(&server, CHANNELS, PUBLISHES);
    // Refused publishes between them: their exact codes, and no frame.
    let client = backend(&server);
    let (status, response) = client.post(&events_path(), &json!({"name": "e"})).await;
    assert_eq!(
        (status, response["code"].as_str()),
        (400, Some("invalid_channels")),
        "{response}"
    );
    let response = client
        .request(
            "POST",
            &events_path(),
            &[("content-type", "application/json")],
            b"{\"channel\":".to_vec(),
        )
        .await;
    assert_eq!(response.status, 400, "{}", response.text());
    expect_published_ticks(publishers, &mut sockets, PUBLISHES).await;
    publish(
        &server,
        &json!({"channel": "news-0", "name": "after", "data": null}),
    )
    .await;
    let frame = sockets[0].1.ws.recv_json().await;
    assert_eq!(
        frame["data"],
        json!({"name": "after", "data": null}).to_string(),
        "{frame}"
    );
}

/// Appends `APPENDS` events over HTTP; returns the seqs the answers gave.
async fn append_all(client: HttpClient, appender: usize) -> Vec<u64> {
    let mut seqs = Vec::with_capacity(APPENDS);
    for n in 0..APPENDS {
        let event = run_started(&format!("run-{appender}-{n}"));
        let (status, body) = client
            .post(&thread_path("one-core", "/events"), &event)
            .await;
        assert_eq!(status, 201, "{body}");
        assert_eq!(body["event"]["runId"], format!("run-{appender}-{n}"));
        seqs.push(body["event"]["seq"].as_u64().expect("seq"));
    }
    seqs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_http_appends_on_sqlite_are_gapless_and_durable() {
    let mut server = Server::start_on_one_core(TEST_CONFIG, Store::Sqlite);
    on_one_core(&server);
    let alice = server.http(ALICE);
    create_thread(&alice, "one-core").await;
    let mut watchers = Vec::new();
    for _ in 0..4 {
        let mut ws = server.ws(ALICE).await;
        assert_eq!(subscribe(&mut ws, "one-core", None).await, 0);
        watchers.push(ws);
    }
    let appenders: Vec<_> = (0..APPENDERS)
        .map(|a| tokio::spawn(append_all(server.http(ALICE), a)))
        .collect();
    // A malformed append between them: refused, nothing written.
    let response = alice
        .request(
            "POST",
            &thread_path("one-core", "/events"),
            &[("content-type", "application/json")],
            b"{nope".to_vec(),
        )
        .await;
    assert_eq!(response.status, 400, "{}", response.text());
    error_code(&response.json(), "invalid_request");
    let mut answered = BTreeSet::new();
    for appender in appenders {
        let seqs = appender.await.expect("appender");
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
        answered.extend(seqs);
    }
    let total = (APPENDERS * APPENDS) as u64;
    assert_eq!(answered, (1..=total).collect::<BTreeSet<u64>>());
    for ws in &mut watchers {
        for seq in 1..=total {
            expect_event(ws, "one-core", seq).await;
        }
    }
    // The same idempotency key twice: one event.
    let event = run_started("once");
    let path = thread_path("one-core", "/events");
    let (status, first) = alice.post_idempotent(&path, &event, "key-1").await;
    assert_eq!(status, 201, "{first}");
    let (_, again) = alice.post_idempotent(&path, &event, "key-1").await;
    assert_eq!(again["event"]["seq"], first["event"]["seq"], "{again}");
    assert_eq!(first["event"]["seq"], total + 1, "{first}");
    // Everything acknowledged survives a crash.
    server.kill9();
    server.restart();
    let (events, _) = page_all(&server.http(ALICE), "one-core", 100).await;
    let seqs: Vec<u64> = events
        .iter()
        .map(|e| e["seq"].as_u64().expect("seq"))
        .collect();
    assert_eq!(seqs, (1..=total + 1).collect::<Vec<u64>>());
}
