//! Idempotent append (SPEC §2, §4): a repeat of an `Idempotency-Key`
//! within the thread returns the original event and appends nothing, over
//! HTTP (header) and over the socket (`idempotencyKey` field).

use std::time::Duration;

use bubble_tests::threads::{
    append, create_thread, error_code, expect_event, run_started, subscribe,
};
use bubble_tests::{raw_post, raw_request, HttpResponse, Server, ALICE, TEST_CONFIG};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_repeat_returns_the_original() {
    let server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);
    create_thread(&alice, "thread-1").await;
    create_thread(&alice, "thread-2").await;
    let mut ws = server.ws(ALICE).await;
    subscribe(&mut ws, "thread-1", None).await;

    let path = "/v1/threads/thread-1/events";
    let (status, first) = alice
        .post_idempotent(path, &run_started("run-1"), "key-1")
        .await;
    assert_eq!(status, 201, "{first}");
    assert!(first.get("duplicate").is_none(), "{first}");
    assert!(
        first["event"].get("idempotencyKey").is_none(),
        "the key is not stored in the event"
    );
    expect_event(&mut ws, "thread-1", 1).await;

    // Same key, even with a different body: the original, nothing appended.
    let (status, repeat) = alice
        .post_idempotent(path, &run_started("run-other"), "key-1")
        .await;
    assert_eq!(status, 200, "{repeat}");
    assert_eq!(repeat, json!({"event": first["event"], "duplicate": true}));
    ws.expect_no_frame_within(Duration::from_millis(300)).await;

    // Keys are per thread.
    let (status, other) = alice
        .post_idempotent(
            "/v1/threads/thread-2/events",
            &run_started("run-1"),
            "key-1",
        )
        .await;
    assert_eq!(status, 201, "{other}");

    let next = append(&alice, "thread-1", &run_started("run-2")).await;
    assert_eq!(next["seq"], 2);

    for bad in ["", &"k".repeat(129), "tab\there"] {
        let res = alice
            .request(
                "POST",
                path,
                &[
                    ("content-type", "application/json"),
                    ("idempotency-key", bad),
                ],
                run_started("r").to_string().into_bytes(),
            )
            .await;
        assert_eq!(res.status, 400, "key {bad:?}: {}", res.text());
        error_code(&res.json(), "invalid_request");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socket_repeat_appends_nothing() {
    let server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);
    create_thread(&alice, "thread-1").await;
    let mut ws = server.ws(ALICE).await;
    subscribe(&mut ws, "thread-1", None).await;

    let frame = json!({"type": "thread.append", "threadId": "thread-1",
                       "event": {"type": "run_started", "runId": "r", "idempotencyKey": "ws-key"}});
    ws.send_json(&frame).await;
    ws.send_json(&frame).await;
    let event = expect_event(&mut ws, "thread-1", 1).await;
    assert!(event.get("idempotencyKey").is_none(), "{event}");

    // The HTTP header and the socket field share one key space.
    let (status, repeat) = alice
        .post_idempotent("/v1/threads/thread-1/events", &run_started("r"), "ws-key")
        .await;
    assert_eq!(status, 200, "{repeat}");
    assert_eq!(repeat["event"], event);
    append(&alice, "thread-1", &run_started("next")).await;
    expect_event(&mut ws, "thread-1", 2).await;
}

/// `POST path` as alice with `Idempotency-Key` written as these exact bytes.
async fn append_with_raw_key(server: &Server, path: &str, key: &[u8]) -> HttpResponse {
    let request = raw_post(
        path,
        ALICE,
        &[("Idempotency-Key", key)],
        run_started("r").to_string().as_bytes(),
    );
    let addr = server.addr();
    tokio::task::spawn_blocking(move || raw_request(addr, &request))
        .await
        .expect("raw request task")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_keys_that_are_not_ascii_are_refused() {
    let server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);
    create_thread(&alice, "thread-1").await;
    let path = "/v1/threads/thread-1/events";

    for key in [&b"caf\xc3\xa9"[..], b"caf\xe9", b"\xff", b"a\tb"] {
        let res = append_with_raw_key(&server, path, key).await;
        assert_eq!(res.status, 400, "key {key:?}: {}", res.text());
        error_code(&res.json(), "invalid_request");
    }
    // Other control bytes are refused by the HTTP parser itself.
    for key in [&b"a\x01b"[..], b"a\x7fb"] {
        let res = append_with_raw_key(&server, path, key).await;
        assert_eq!(res.status, 400, "key {key:?}: {}", res.text());
    }

    // Nothing was appended, and the server still appends.
    let res = append_with_raw_key(&server, path, b"key-1").await;
    assert_eq!(res.status, 201, "{}", res.text());
    assert_eq!(res.json()["event"]["seq"], 1);
    let next = append(&alice, "thread-1", &run_started("run-2")).await;
    assert_eq!(next["seq"], 2);
}
