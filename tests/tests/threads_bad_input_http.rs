//! Bad input over HTTP: each request gets its exact status and code,
//! changes nothing, and the server keeps serving this and other clients.

use bubble_tests::threads::{create_thread, error_code, expect_event, grant, subscribe};
use bubble_tests::{HttpClient, Server, ALICE, BOB, TEST_CONFIG};
use serde_json::{json, Value};

const JSON: (&str, &str) = ("content-type", "application/json");

/// (case, method, path, body, expected status, expected code)
type Case = (
    &'static str,
    &'static str,
    String,
    Vec<u8>,
    u16,
    &'static str,
);

fn cases() -> Vec<Case> {
    let body = |v: Value| v.to_string().into_bytes();
    let raw = |s: &str| s.as_bytes().to_vec();
    let events = "/v1/threads/thread-1/events".to_owned();
    let part = json!({"type": "text-delta", "id": "x", "delta": "hi"});
    vec![
        (
            "malformed JSON (create)",
            "POST",
            "/v1/threads".into(),
            raw("{\"threadId\":"),
            400,
            "invalid_request",
        ),
        (
            "malformed JSON (append)",
            "POST",
            events.clone(),
            raw("{nope"),
            400,
            "invalid_request",
        ),
        (
            "malformed JSON (rename)",
            "PATCH",
            "/v1/threads/thread-1".into(),
            raw("title=x"),
            400,
            "invalid_request",
        ),
        (
            "title with U+0000 (rename)",
            "PATCH",
            "/v1/threads/thread-1".into(),
            body(json!({"title": "a\u{0}b"})),
            400,
            "invalid_request",
        ),
        (
            "malformed JSON (grant)",
            "PUT",
            "/v1/threads/thread-1/grants/carol".into(),
            raw("["),
            400,
            "invalid_request",
        ),
        (
            "array body",
            "POST",
            events.clone(),
            raw("[]"),
            400,
            "invalid_request",
        ),
        (
            "bad threadId in body",
            "POST",
            "/v1/threads".into(),
            body(json!({"threadId": "no spaces"})),
            400,
            "invalid_request",
        ),
        (
            "threadId too long",
            "POST",
            "/v1/threads".into(),
            body(json!({"threadId": "x".repeat(129)})),
            400,
            "invalid_request",
        ),
        (
            "threadId a dot segment",
            "POST",
            "/v1/threads".into(),
            body(json!({"threadId": ".."})),
            400,
            "invalid_request",
        ),
        (
            "threadId the other dot segment",
            "POST",
            "/v1/threads".into(),
            body(json!({"threadId": "."})),
            400,
            "invalid_request",
        ),
        (
            "threadId not a string",
            "POST",
            "/v1/threads".into(),
            body(json!({"threadId": 5})),
            400,
            "invalid_request",
        ),
        (
            "unknown create field",
            "POST",
            "/v1/threads".into(),
            body(json!({"threadId": "ok", "colour": "red"})),
            400,
            "invalid_request",
        ),
        (
            "bad threadId in path",
            "GET",
            "/v1/threads/bad%20id".into(),
            Vec::new(),
            400,
            "invalid_request",
        ),
        (
            "bad threadId in path (append)",
            "POST",
            "/v1/threads/bad!id/events".into(),
            body(json!({"type": "run_started", "runId": "r"})),
            400,
            "invalid_request",
        ),
        (
            "grant without role",
            "PUT",
            "/v1/threads/thread-1/grants/carol".into(),
            body(json!({})),
            400,
            "invalid_request",
        ),
        (
            "grant with unknown role",
            "PUT",
            "/v1/threads/thread-1/grants/carol".into(),
            body(json!({"role": "king"})),
            400,
            "invalid_request",
        ),
        (
            "grant role not a string",
            "PUT",
            "/v1/threads/thread-1/grants/carol".into(),
            body(json!({"role": 1})),
            400,
            "invalid_request",
        ),
        (
            "event without type",
            "POST",
            events.clone(),
            body(json!({"runId": "r"})),
            400,
            "invalid_request",
        ),
        (
            "unknown event type",
            "POST",
            events.clone(),
            body(json!({"type": "nope", "runId": "r"})),
            400,
            "invalid_request",
        ),
        (
            "missing runId",
            "POST",
            events.clone(),
            body(json!({"type": "run_started"})),
            400,
            "invalid_request",
        ),
        (
            "runId not a string",
            "POST",
            events.clone(),
            body(json!({"type": "run_started", "runId": []})),
            400,
            "invalid_request",
        ),
        (
            "part not an object",
            "POST",
            events.clone(),
            body(json!({"type": "message_part", "runId": "r", "part": 1, "version": "ai-sdk-v6"})),
            400,
            "invalid_request",
        ),
        (
            "missing version",
            "POST",
            events.clone(),
            body(json!({"type": "message_part", "runId": "r", "part": part})),
            400,
            "invalid_request",
        ),
        (
            "missing approved",
            "POST",
            events.clone(),
            body(json!({"type": "tool_call_approval", "runId": "r", "toolCallId": "c"})),
            400,
            "invalid_request",
        ),
        (
            "bad status",
            "POST",
            events.clone(),
            body(json!({"type": "run_finished", "runId": "r", "status": "ok"})),
            400,
            "invalid_request",
        ),
        (
            "server-emitted participant_joined",
            "POST",
            events.clone(),
            body(json!({"type": "participant_joined", "principalId": "alice", "role": "owner"})),
            400,
            "invalid_request",
        ),
        (
            "server-emitted participant_left",
            "POST",
            events.clone(),
            body(json!({"type": "participant_left", "principalId": "alice"})),
            400,
            "invalid_request",
        ),
        (
            "server-emitted thread_title_updated",
            "POST",
            events.clone(),
            body(json!({"type": "thread_title_updated", "byPrincipalId": "alice", "title": "t"})),
            400,
            "invalid_request",
        ),
        (
            "principal mismatch",
            "POST",
            events.clone(),
            body(json!({"type": "run_started", "principalId": "bob", "runId": "r"})),
            403,
            "forbidden",
        ),
        (
            "event over 64 KiB",
            "POST",
            events.clone(),
            body(
                json!({"type": "message_part", "runId": "r", "version": "ai-sdk-v6", "part": {"type": "text-delta", "id": "x", "delta": "x".repeat(70 * 1024)}}),
            ),
            413,
            "payload_too_large",
        ),
        (
            "body over the read limit",
            "POST",
            events.clone(),
            body(
                json!({"type": "message_part", "runId": "r", "version": "ai-sdk-v6", "part": {"type": "text-delta", "id": "x", "delta": "y".repeat(4 << 20)}}),
            ),
            413,
            "payload_too_large",
        ),
        (
            "fromSeq zero",
            "GET",
            "/v1/threads/thread-1/events?fromSeq=0".into(),
            Vec::new(),
            400,
            "invalid_request",
        ),
        (
            "limit too large",
            "GET",
            "/v1/threads/thread-1/events?limit=1001".into(),
            Vec::new(),
            400,
            "invalid_request",
        ),
        (
            "unknown thread",
            "GET",
            "/v1/threads/nope".into(),
            Vec::new(),
            404,
            "not_found",
        ),
        (
            "append to unknown thread",
            "POST",
            "/v1/threads/nope/events".into(),
            body(json!({"type": "run_started", "runId": "r"})),
            404,
            "not_found",
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_request_gets_its_code_and_nothing_breaks() {
    let server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);
    create_thread(&alice, "thread-1").await;
    grant(&alice, "thread-1", "bob", "reader").await;
    let mut watcher = server.ws(BOB).await;
    subscribe(&mut watcher, "thread-1", None).await;

    let mut seq = 0;
    for (case, method, path, body, status, code) in cases() {
        let res = alice.request(method, &path, &[JSON], body).await;
        assert_eq!(res.status, status, "{case}: {}", res.text());
        assert_eq!(
            res.header("content-type").as_deref(),
            Some("application/json"),
            "{case}"
        );
        error_code(&res.json(), code);
        seq += 1;
        probe(&alice, &mut watcher, seq, case).await;
    }
    let (_, thread) = alice.get("/v1/threads/thread-1").await;
    assert_eq!(thread["headSeq"], seq, "only the probes were appended");
    assert!(thread.get("title").is_none());
    let (_, grants) = alice.get("/v1/threads/thread-1/grants").await;
    assert_eq!(grants["grants"].as_array().unwrap().len(), 2, "{grants}");
}

/// A probe append over HTTP that the watcher must receive.
async fn probe(alice: &HttpClient, watcher: &mut bubble_tests::WsClient, seq: u64, case: &str) {
    let (status, body) = alice
        .post(
            "/v1/threads/thread-1/events",
            &json!({"type": "run_started", "runId": format!("probe-{seq}")}),
        )
        .await;
    assert_eq!(status, 201, "after {case}: {body}");
    assert_eq!(
        body["event"]["seq"], seq,
        "after {case}: nothing else was appended"
    );
    expect_event(watcher, "thread-1", seq).await;
}

/// An event of exactly the limit is accepted; one byte more is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_size_limit_is_configurable() {
    let config = format!("{TEST_CONFIG}\n[limits]\nmax_event_bytes = 2048\n");
    let server = Server::start(&config);
    let alice = server.http(ALICE);
    create_thread(&alice, "thread-1").await;
    let small = json!({"type": "message_part", "runId": "r", "version": "ai-sdk-v6",
                       "part": {"type": "text-delta", "id": "x", "delta": "x".repeat(1000)}});
    let (status, body) = alice.post("/v1/threads/thread-1/events", &small).await;
    assert_eq!(status, 201, "{body}");
    let big = json!({"type": "message_part", "runId": "r", "version": "ai-sdk-v6",
                     "part": {"type": "text-delta", "id": "x", "delta": "x".repeat(3000)}});
    let (status, body) = alice.post("/v1/threads/thread-1/events", &big).await;
    assert_eq!(status, 413, "{body}");
    error_code(&body, "payload_too_large");

    // Over the socket, the same limit is a scoped payload_too_large error.
    let mut ws = server.ws(ALICE).await;
    ws.send_json(&json!({"type": "thread.append", "threadId": "thread-1", "event": big}))
        .await;
    let frame = ws.recv_json().await;
    bubble_tests::threads::error_frame(&frame, "payload_too_large", Some("thread-1"));
    subscribe(&mut ws, "thread-1", Some(2)).await;
}

/// Unknown routes and methods.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_routes_and_methods() {
    let server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);
    create_thread(&alice, "thread-1").await;
    let (status, body) = alice.get("/v1/threads/thread-1/nothing-here").await;
    assert_eq!(status, 404, "{body}");
    error_code(&body, "not_found");
    let (status, body) = alice.delete("/v1/threads/thread-1").await;
    assert_eq!(status, 405, "{body}");
    error_code(&body, "invalid_request");
}
