//! Bad input on `/v1/ws` and the HTTP routes: each gets its exact code, and
//! the connection (and every other connection) keeps working.

mod common;

use bubble_core::http::Method;
use bubble_core::ConnId;
use common::{assert_error, by, event_seqs, message_part, opened, run_started, Harness, ADMIN};
use serde_json::{json, Value};

/// `thread-1` with one event; alice (member) and bob (member) subscribed
/// on their own connections.
fn setup() -> (Harness, ConnId, ConnId) {
    let mut h = Harness::new();
    h.create_thread(ADMIN, "thread-1");
    h.grant("thread-1", "alice", "member");
    h.grant("thread-1", "bob", "member");
    h.append_n("thread-1", 1);
    let alice = h.connect("alice");
    let bob = h.connect("bob");
    for conn in [alice, bob] {
        h.subscribe(conn, "thread-1", Some(1));
        h.frames(conn);
    }
    (h, alice, bob)
}

/// Both connections still work: alice's append reaches both subscribers.
#[track_caller]
fn still_working(h: &mut Harness, alice: ConnId, bob: ConnId) {
    let head = h.thread("thread-1")["headSeq"].as_u64().expect("headSeq");
    h.ws_append(alice, "thread-1", run_started("run-after"));
    assert_eq!(event_seqs(&h.frames(alice), "thread-1"), [head + 1]);
    assert_eq!(event_seqs(&h.frames(bob), "thread-1"), [head + 1]);
}

#[track_caller]
fn one_error(frames: Vec<Value>, thread: Option<&str>, code: &str) -> Value {
    assert_eq!(frames.len(), 1, "exactly one frame: {frames:?}");
    assert_error(&frames[0], thread, code);
    frames.into_iter().next().expect("one frame")
}

#[test]
fn malformed_json_is_unscoped_invalid_request() {
    let (mut h, alice, bob) = setup();
    for text in ["{", "not json", "{\"type\":\"thread.subscribe\",}", ""] {
        h.send_text(alice, text);
        one_error(h.frames(alice), None, "invalid_request");
        assert!(h.frames(bob).is_empty());
    }
    still_working(&mut h, alice, bob);
}

#[test]
fn non_object_frame_is_unscoped_invalid_request() {
    let (mut h, alice, bob) = setup();
    h.send_text(alice, "[]");
    let frame = one_error(h.frames(alice), None, "invalid_request");
    assert_eq!(frame["message"], "Frame body must be a JSON object.");
    still_working(&mut h, alice, bob);
}

#[test]
fn unknown_type_is_unscoped_invalid_request() {
    let (mut h, alice, bob) = setup();
    for frame in [
        json!({ "type": "thread.teleport", "threadId": "thread-1" }),
        json!({ "threadId": "thread-1" }),
        json!({ "type": 7 }),
        json!({ "type": "thread.event", "threadId": "thread-1", "event": {} }),
    ] {
        h.send(alice, frame.clone());
        let frames = h.frames(alice);
        assert_eq!(frames.len(), 1, "{frame}: {frames:?}");
        assert_eq!(frames[0]["type"], "error");
        assert_eq!(frames[0]["code"], "invalid_request", "{frame}");
    }
    h.send(alice, json!({ "type": "thread.teleport" }));
    one_error(h.frames(alice), None, "invalid_request");
    still_working(&mut h, alice, bob);
}

#[test]
fn binary_frame_rejected() {
    let (mut h, alice, bob) = setup();
    h.send_binary(
        alice,
        br#"{"type":"thread.subscribe","threadId":"thread-1"}"#,
    );
    one_error(h.frames(alice), None, "invalid_request");
    assert!(h.is_open(alice));
    still_working(&mut h, alice, bob);
}

#[test]
fn oversized_frame_closes_1009() {
    let mut config = common::config();
    config.limits.max_ws_frame_bytes = 1024;
    let mut h = Harness::with_config(config);
    h.create_thread(ADMIN, "thread-1");
    h.grant("thread-1", "alice", "member");
    h.grant("thread-1", "bob", "member");
    let alice = h.connect("alice");
    let bob = h.connect("bob");
    h.subscribe(bob, "thread-1", Some(1));
    h.frames(bob);
    let fits = by("alice", message_part("run-1", &"x".repeat(700)));
    h.ws_append(alice, "thread-1", fits);
    assert!(h.frames(alice).is_empty());
    assert_eq!(event_seqs(&h.frames(bob), "thread-1"), [1]);
    let huge = json!({ "type": "thread.append", "threadId": "thread-1",
        "event": message_part("run-1", &"x".repeat(2000)) });
    h.send(alice, huge);
    assert_eq!(h.close_code(alice), Some(1009));
    assert!(!h.is_open(alice));
    assert_eq!(
        h.thread("thread-1")["headSeq"],
        1,
        "nothing of the oversized frame was applied"
    );
    assert!(h.frames(bob).is_empty());
    h.append("bob", "thread-1", run_started("run-2"))
        .expect(201);
    assert_eq!(event_seqs(&h.frames(bob), "thread-1"), [2]);
}

#[test]
fn unauthorized_open_gets_error_then_1008() {
    let (mut h, alice, bob) = setup();
    for token in [None, Some("token-nobody"), Some("")] {
        let conn = h.connect_with_token(token);
        let frames = h.frames(conn);
        assert_eq!(frames.len(), 1, "one informational frame: {frames:?}");
        assert_error(&frames[0], None, "unauthorized");
        assert_eq!(h.close_code(conn), Some(1008));
        assert!(!h.is_open(conn));
    }
    still_working(&mut h, alice, bob);
}

#[test]
fn unauthorized_http_is_401() {
    let mut h = Harness::new();
    h.create_thread(ADMIN, "thread-1");
    for auth in [None, Some("Bearer token-nobody"), Some("Basic abc")] {
        let r = h.raw_request(Method::Get, auth, "/v1/threads/thread-1", b"");
        assert_eq!(
            (r.status, r.code()),
            (401, "unauthorized"),
            "{auth:?}: {}",
            r.body
        );
    }
}

#[test]
fn server_emitted_types_are_not_appendable() {
    let (mut h, alice, bob) = setup();
    let bodies = [
        json!({ "type": "participant_joined", "principalId": "alice", "role": "member" }),
        json!({ "type": "participant_left", "principalId": "alice" }),
        json!({ "type": "thread_title_updated", "byPrincipalId": "alice", "title": "x" }),
    ];
    for body in &bodies {
        h.ws_append(alice, "thread-1", body.clone());
        one_error(h.frames(alice), Some("thread-1"), "invalid_request");
        h.append("alice", "thread-1", body.clone())
            .expect_error(400, "invalid_request");
        h.append(ADMIN, "thread-1", body.clone())
            .expect_error(400, "invalid_request");
    }
    assert_eq!(h.thread("thread-1")["headSeq"], 1);
    assert!(h.frames(bob).is_empty());
    still_working(&mut h, alice, bob);
}

#[test]
fn invalid_event_bodies_are_invalid_request() {
    let (mut h, alice, bob) = setup();
    let bodies = [
        json!({ "type": "no_such_type", "runId": "r" }),
        json!({ "runId": "r" }),
        json!({ "type": "run_started" }),
        json!({ "type": "run_finished", "runId": "r", "status": "exploded" }),
        json!({ "type": "message_part", "runId": "r", "part": "not an object", "version": "ai-sdk-v6" }),
        json!({ "type": "message_part", "runId": "r", "part": { "delta": "no type" }, "version": "ai-sdk-v6" }),
        json!({ "type": "tool_call_approval", "runId": "r", "toolCallId": "c", "approved": "yes" }),
    ];
    for body in &bodies {
        h.ws_append(alice, "thread-1", body.clone());
        let frames = h.frames(alice);
        assert_eq!(frames.len(), 1, "{body}: {frames:?}");
        assert_error(&frames[0], Some("thread-1"), "invalid_request");
        let r = h.append("alice", "thread-1", body.clone());
        assert_eq!(
            (r.status, r.code()),
            (400, "invalid_request"),
            "{body}: {}",
            r.body
        );
    }
    assert_eq!(h.thread("thread-1")["headSeq"], 1);
    still_working(&mut h, alice, bob);
}

#[test]
fn principal_mismatch_is_forbidden() {
    let (mut h, alice, bob) = setup();
    h.ws_append(alice, "thread-1", by("bob", run_started("run-1")));
    one_error(h.frames(alice), Some("thread-1"), "forbidden");
    h.append("alice", "thread-1", by("bob", run_started("run-1")))
        .expect_error(403, "forbidden");
    // The admin cannot write as someone else either.
    h.append(ADMIN, "thread-1", by("bob", run_started("run-1")))
        .expect_error(403, "forbidden");
    assert_eq!(h.thread("thread-1")["headSeq"], 1);
    assert!(h.frames(bob).is_empty());
    // principalId equal to the caller, or omitted, is the caller.
    h.ws_append(alice, "thread-1", by("alice", run_started("run-2")));
    let frames = h.frames(bob);
    assert_eq!(frames[0]["event"]["principalId"], "alice");
    let event = h
        .append("bob", "thread-1", run_started("run-3"))
        .expect(201)
        .body;
    assert_eq!(event["event"]["principalId"], "bob");
    h.frames(alice);
    h.frames(bob);
    still_working(&mut h, alice, bob);
}

#[test]
fn oversized_event_is_payload_too_large() {
    let mut config = common::config();
    config.limits.max_event_bytes = 512;
    let mut h = Harness::with_config(config);
    h.create_thread(ADMIN, "thread-1");
    h.grant("thread-1", "alice", "member");
    let alice = h.connect("alice");
    h.subscribe(alice, "thread-1", Some(1));
    h.frames(alice);
    let big = message_part("run-1", &"x".repeat(600));
    h.append("alice", "thread-1", big.clone())
        .expect_error(413, "payload_too_large");
    h.ws_append(alice, "thread-1", big);
    one_error(h.frames(alice), Some("thread-1"), "payload_too_large");
    h.ws_append(alice, "thread-1", message_part("run-1", "small"));
    assert_eq!(event_seqs(&h.frames(alice), "thread-1"), [1]);
}

#[test]
fn bad_from_seq_is_invalid_request() {
    let (mut h, alice, bob) = setup();
    h.create_thread(ADMIN, "thread-2");
    h.grant("thread-2", "alice", "reader");
    for from in [json!(0), json!(-1), json!(1.5), json!("1"), json!(null)] {
        h.send(
            alice,
            json!({ "type": "thread.subscribe", "threadId": "thread-2", "fromSeq": from }),
        );
        let frames = h.frames(alice);
        assert!(!frames.is_empty(), "fromSeq {from}: no answer");
        assert_eq!(frames[0]["type"], "error", "fromSeq {from}: {frames:?}");
        assert_eq!(frames[0]["code"], "invalid_request", "fromSeq {from}");
        assert!(
            frames
                .iter()
                .all(|f| f["type"] != "thread.subscription_opened"),
            "{frames:?}"
        );
    }
    // None of them registered a subscription.
    h.subscribe(alice, "thread-2", Some(1));
    assert_eq!(h.frames(alice), [opened("thread-2", 0)]);
    still_working(&mut h, alice, bob);
}

#[test]
fn bad_thread_id_is_invalid_request() {
    let (mut h, alice, bob) = setup();
    for id in [
        json!("has space"),
        json!(""),
        json!("x".repeat(129)),
        json!(5),
    ] {
        h.send(alice, json!({ "type": "thread.subscribe", "threadId": id }));
        let frames = h.frames(alice);
        assert_eq!(frames[0]["type"], "error", "{id}: {frames:?}");
        assert_eq!(frames[0]["code"], "invalid_request", "{id}");
    }
    h.post("alice", "/v1/threads", json!({ "threadId": "has space" }))
        .expect_error(400, "invalid_request");
    still_working(&mut h, alice, bob);
}

#[test]
fn malformed_http_bodies_are_invalid_request() {
    let mut h = Harness::new();
    h.create_thread(ADMIN, "thread-1");
    let auth = Some("Bearer token-root");
    for (method, target, body) in [
        (Method::Post, "/v1/threads", &b"{"[..]),
        (Method::Post, "/v1/threads", b"[]"),
        (Method::Post, "/v1/threads/thread-1/events", b"not json"),
        (Method::Post, "/v1/threads/thread-1/events", b"[1]"),
        (Method::Patch, "/v1/threads/thread-1", b"{\"title\": 5}"),
        (
            Method::Put,
            "/v1/threads/thread-1/grants/bob",
            b"{\"role\": \"emperor\"}",
        ),
    ] {
        let r = h.raw_request(method, auth, target, body);
        assert_eq!(
            (r.status, r.code()),
            (400, "invalid_request"),
            "{method:?} {target} {}: {}",
            String::from_utf8_lossy(body),
            r.body
        );
    }
    assert_eq!(h.thread("thread-1")["headSeq"], 0);
}

#[test]
fn append_to_missing_thread_is_not_found() {
    let (mut h, alice, bob) = setup();
    h.ws_append(alice, "thread-missing", run_started("r"));
    one_error(h.frames(alice), Some("thread-missing"), "not_found");
    h.append("alice", "thread-missing", run_started("r"))
        .expect_error(404, "not_found");
    still_working(&mut h, alice, bob);
}
