//! HTTP route details of SPEC §4 not covered by the seed examples.

mod common;

use bubble_core::http::Method;
use common::{event_seqs, run_started, Harness, ADMIN};
use serde_json::json;

fn with_thread() -> Harness {
    let mut h = Harness::new();
    h.create_thread(ADMIN, "thread-1");
    h
}

#[test]
fn append_answers_201_with_the_event() {
    let mut h = with_thread();
    let r = h
        .append(ADMIN, "thread-1", run_started("run-1"))
        .expect(201);
    assert_eq!(r.body["event"]["seq"], 1);
    assert_eq!(r.body["event"]["threadId"], "thread-1");
    assert_eq!(r.body["event"]["principalId"], ADMIN);
    assert_ne!(r.body["duplicate"], true);
}

#[test]
fn default_page_is_100_events() {
    let mut h = with_thread();
    h.append_n("thread-1", 150);
    let page = h.get(ADMIN, "/v1/threads/thread-1/events").expect(200).body;
    let events = page["events"].as_array().expect("events");
    assert_eq!(events.len(), 100);
    assert_eq!(events[99]["seq"], 100);
    assert_eq!(page["nextSeq"], 101);
    let page = h
        .get(ADMIN, "/v1/threads/thread-1/events?fromSeq=101")
        .expect(200)
        .body;
    assert_eq!(page["events"].as_array().map(Vec::len), Some(50));
    assert_eq!(page["nextSeq"], serde_json::Value::Null);
}

#[test]
fn idempotency_key_must_be_1_to_128_printable_ascii() {
    let mut h = with_thread();
    let body = run_started("run-1");
    let target = "/v1/threads/thread-1/events";
    let long = "k".repeat(129);
    for key in ["", long.as_str(), "tab\tkey", "caf\u{e9}", "new\nline"] {
        let r = h.request(Method::Post, ADMIN, target, Some(&body), Some(key));
        assert_eq!(
            (r.status, r.code()),
            (400, "invalid_request"),
            "key {key:?}: {}",
            r.body
        );
    }
    let max = "k".repeat(128);
    for key in [max.as_str(), "a", "key with spaces ~!@#"] {
        h.request(Method::Post, ADMIN, target, Some(&body), Some(key))
            .expect(201);
    }
    assert_eq!(h.thread("thread-1")["headSeq"], 3);
}

#[test]
fn idempotency_keys_are_shared_by_http_and_websocket() {
    let mut h = with_thread();
    h.grant("thread-1", "alice", "member");
    let conn = h.connect("alice");
    h.subscribe(conn, "thread-1", Some(1));
    let body = run_started("run-1");
    let first = h
        .request(
            Method::Post,
            "alice",
            "/v1/threads/thread-1/events",
            Some(&body),
            Some("k-1"),
        )
        .expect(201);
    let mut event = body.clone();
    event["idempotencyKey"] = json!("k-1");
    h.ws_append(conn, "thread-1", event);
    let frames = h.frames(conn);
    assert_eq!(event_seqs(&frames, "thread-1"), [1], "{frames:?}");
    assert_eq!(h.thread("thread-1")["headSeq"], 1);
    let again = h
        .request(
            Method::Post,
            "alice",
            "/v1/threads/thread-1/events",
            Some(&body),
            Some("k-1"),
        )
        .expect(200);
    assert_eq!(again.body["event"], first.body["event"]);
}

#[test]
fn unknown_routes_and_methods() {
    let mut h = with_thread();
    let r = h.raw_request(
        Method::Other,
        Some("Bearer token-root"),
        "/v1/threads/thread-1",
        b"",
    );
    assert_eq!(r.status, 405, "{}", r.body);
    let r = h.raw_request(
        Method::Delete,
        Some("Bearer token-root"),
        "/v1/threads/thread-1/events",
        b"",
    );
    assert_eq!(r.status, 405, "{}", r.body);
    let r = h.get(ADMIN, "/v1/threads/thread-1/nothing-here");
    assert_eq!(r.status, 404, "{}", r.body);
}

#[test]
fn invalid_thread_id_in_path_is_invalid_request() {
    let mut h = with_thread();
    let long = format!("/v1/threads/{}", "x".repeat(129));
    h.get(ADMIN, &long).expect_error(400, "invalid_request");
    h.get(ADMIN, "/v1/threads/bad%20id")
        .expect_error(400, "invalid_request");
}

#[test]
fn error_body_shape() {
    let mut h = with_thread();
    let r = h
        .get("alice", "/v1/threads/thread-1")
        .expect_error(404, "not_found");
    let error = r.body["error"].as_object().expect("error object");
    assert_eq!(r.body.as_object().map(|o| o.len()), Some(1), "{}", r.body);
    assert_eq!(error.len(), 2, "{}", r.body);
    assert!(error["message"].is_string());
}
