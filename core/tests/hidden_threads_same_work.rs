//! A hidden thread costs what a missing one costs: for every threads route
//! and every `/v1/ws` frame type, a request by a principal who cannot read
//! the thread makes the engine ask for the same store reads, in the same
//! order, and answer the same bytes as the same request about a thread
//! that does not exist (the id aside). The same work is the same timing
//! class: what an outsider can time (the reads a host performs, the bytes
//! it writes) does not tell the two apart. Checked with a cold cache (a
//! fresh engine over the store, as after a restart or an eviction) and a
//! warm one (each thread asked about once before).
//!
//! One difference is inherent and pinned exactly: on a cold cache, a
//! hidden *subthread* costs one more read per ancestor (its access is
//! inherited, so the engine loads the parent to decide it), which a
//! missing id has none of. The answer bytes are still the same, and once
//! the ancestors are cached the work is too.

mod common;

use bubble_core::http::Method;
use bubble_core::store::MemoryStore;
use common::{config, Harness};
use serde_json::{json, Value};

/// alice's thread, hidden from zed, with an event, a grant, a participant,
/// a subthread and an idempotency key in use.
const HIDDEN: &str = "hidden-1";
/// No thread has this id (the same length, so bodies compare whole).
const MISSING: &str = "absent-1";
/// The outsider: a principal with no grant anywhere.
const OUTSIDER: &str = "zed";

fn setup() -> MemoryStore {
    let mut h = Harness::new();
    h.create_thread("alice", HIDDEN);
    h.grant(HIDDEN, "bob", "member");
    let appended = h.request(
        Method::Post,
        "alice",
        &format!("/v1/threads/{HIDDEN}/events"),
        Some(&json!({"type": "run_started", "runId": "r"})),
        Some("k-1"),
    );
    appended.expect(201);
    h.post(
        "alice",
        &format!("/v1/threads/{HIDDEN}/participants"),
        json!({"principalId": "bob"}),
    )
    .expect(201);
    h.create_subthread("alice", &format!("{HIDDEN}-sub"), HIDDEN);
    h.store.clone()
}

/// Every threads route on thread `{t}`, with good and bad inputs:
/// `(method, target, idempotency key, body)`.
fn requests() -> Vec<(Method, &'static str, Option<&'static str>, Option<Value>)> {
    let event = json!({"type": "run_started", "runId": "r"});
    vec![
        (Method::Get, "/v1/threads/{t}", None, None),
        (
            Method::Patch,
            "/v1/threads/{t}",
            None,
            Some(json!({"title": "mine"})),
        ),
        (
            Method::Patch,
            "/v1/threads/{t}",
            None,
            Some(json!({"title": 7})),
        ),
        (
            Method::Get,
            "/v1/threads/{t}/events?fromSeq=1&limit=10",
            None,
            None,
        ),
        (Method::Get, "/v1/threads/{t}/events?fromSeq=0", None, None),
        (Method::Get, "/v1/threads/{t}/events?limit=5000", None, None),
        (
            Method::Post,
            "/v1/threads/{t}/events",
            None,
            Some(event.clone()),
        ),
        (
            Method::Post,
            "/v1/threads/{t}/events",
            Some("k-1"),
            Some(event),
        ),
        (
            Method::Post,
            "/v1/threads/{t}/events",
            None,
            Some(json!({"type": "nope"})),
        ),
        (
            Method::Post,
            "/v1/threads/{t}/events",
            None,
            Some(json!([1])),
        ),
        (Method::Get, "/v1/threads/{t}/messages", None, None),
        (
            Method::Post,
            "/v1/threads/{t}/messages",
            None,
            Some(json!({})),
        ),
        (Method::Get, "/v1/threads/{t}/grants", None, None),
        (
            Method::Put,
            "/v1/threads/{t}/grants/zed",
            None,
            Some(json!({"role": "owner"})),
        ),
        (
            Method::Put,
            "/v1/threads/{t}/grants/zed",
            None,
            Some(json!({"role": "king"})),
        ),
        (Method::Delete, "/v1/threads/{t}/grants/alice", None, None),
        (
            Method::Post,
            "/v1/threads/{t}/participants",
            None,
            Some(json!({})),
        ),
        (
            Method::Post,
            "/v1/threads/{t}/participants",
            None,
            Some(json!({"principalId": "zed"})),
        ),
        (
            Method::Delete,
            "/v1/threads/{t}/participants/alice",
            None,
            None,
        ),
        (
            Method::Delete,
            "/v1/threads/{t}/participants/zed",
            None,
            None,
        ),
        (
            Method::Post,
            "/v1/threads",
            None,
            Some(json!({"threadId": "{t}-x", "parentThreadId": "{t}"})),
        ),
        (Method::Get, "/v1/threads?parentThreadId={t}", None, None),
        (Method::Get, "/v1/threads/{t}-sub", None, None),
        (Method::Get, "/v1/threads/{t}/nothing-here", None, None),
    ]
}

/// Every frame type on thread `{t}`, good and bad.
fn frames() -> Vec<Value> {
    let event = json!({"type": "run_started", "runId": "r"});
    vec![
        json!({"type": "thread.subscribe", "threadId": "{t}"}),
        json!({"type": "thread.subscribe", "threadId": "{t}", "fromSeq": 1}),
        json!({"type": "thread.subscribe", "threadId": "{t}", "fromSeq": 0}),
        json!({"type": "thread.unsubscribe", "threadId": "{t}"}),
        json!({"type": "thread.append", "threadId": "{t}", "event": event}),
        json!({"type": "thread.append", "threadId": "{t}",
               "event": {"type": "run_started", "runId": "r", "idempotencyKey": "k-1"}}),
        json!({"type": "thread.append", "threadId": "{t}", "event": {"type": "nope"}}),
        json!({"type": "thread.append", "threadId": "{t}", "event": 5}),
        json!({"type": "thread.subscribe", "threadId": "{t}-sub"}),
    ]
}

/// A request's work on `h`, with `thread` in place of `{t}`.
fn request_work(
    h: &mut Harness,
    (method, target, key, body): &(Method, &str, Option<&str>, Option<Value>),
    thread: &str,
) -> Vec<String> {
    let target = target.replace("{t}", thread);
    let body = body
        .as_ref()
        .map(|b| serde_json::from_str(&b.to_string().replace("{t}", thread)).expect("JSON"));
    h.take_work();
    h.send_request(*method, Some(OUTSIDER), &target, body.as_ref(), *key);
    h.take_work()
}

/// A frame's work on the outsider's socket `conn` of `h`.
fn frame_work(
    h: &mut Harness,
    conn: bubble_core::ConnId,
    frame: &Value,
    thread: &str,
) -> Vec<String> {
    h.take_work();
    h.send_text(conn, &frame.to_string().replace("{t}", thread));
    h.take_work()
}

/// A fresh engine over `store` (nothing cached), recording its work.
fn cold(store: &MemoryStore) -> Harness {
    let mut h = Harness::over(config(), store.clone(), bubble_core::Millis(common::T0));
    h.record_work();
    h
}

/// Whether a request or frame is about the hidden thread's subthread.
fn about_subthread(text: &str) -> bool {
    text.contains("{t}-sub")
}

/// The read of the hidden subthread's parent, as the missing id's work
/// would name it.
fn parent_read() -> String {
    format!("read Thread {{ thread_id: ThreadId({MISSING:?}) }}")
}

/// The two runs did the same work, the ids aside; with `ancestors`, the
/// hidden one also read its subthread's parent, once, and nothing else
/// more.
#[track_caller]
fn assert_same_work(what: &str, hidden: &[String], missing: &[String], ancestors: bool) {
    let mut hidden: Vec<String> = hidden.iter().map(|w| w.replace(HIDDEN, MISSING)).collect();
    if ancestors {
        let before = hidden.len();
        hidden.retain(|w| *w != parent_read());
        assert_eq!(before - hidden.len(), 1, "{what}: one read of the parent");
    }
    assert_eq!(
        hidden, missing,
        "{what}: the hidden thread's work (left) differs from the missing one's"
    );
}

/// An HTTP request is always answered.
#[track_caller]
fn assert_answered(what: &str, work: &[String]) {
    assert!(
        work.iter().any(|w| w.starts_with("respond")),
        "{what}: answered: {work:?}"
    );
}

#[test]
fn every_route_does_the_same_work_for_a_hidden_thread_as_for_a_missing_one() {
    let store = setup();
    for request in requests() {
        let what = format!("{:?} {}", request.0, request.1);
        let sub = about_subthread(request.1);
        let hidden = request_work(&mut cold(&store), &request, HIDDEN);
        let missing = request_work(&mut cold(&store), &request, MISSING);
        assert_answered(&what, &missing);
        assert_same_work(&format!("{what} (cold)"), &hidden, &missing, sub);

        let mut warm = cold(&store);
        request_work(&mut warm, &request, HIDDEN);
        request_work(&mut warm, &request, MISSING);
        let hidden = request_work(&mut warm, &request, HIDDEN);
        let missing = request_work(&mut warm, &request, MISSING);
        assert_same_work(&format!("{what} (warm)"), &hidden, &missing, false);
    }
}

#[test]
fn every_frame_does_the_same_work_for_a_hidden_thread_as_for_a_missing_one() {
    let store = setup();
    for frame in frames() {
        let sub = about_subthread(&frame.to_string());
        let mut h = cold(&store);
        let conn = h.connect(OUTSIDER);
        let hidden = frame_work(&mut h, conn, &frame, HIDDEN);
        let mut h = cold(&store);
        let conn = h.connect(OUTSIDER);
        let missing = frame_work(&mut h, conn, &frame, MISSING);
        assert_same_work(&format!("{frame} (cold)"), &hidden, &missing, sub);

        let mut warm = cold(&store);
        let conn = warm.connect(OUTSIDER);
        frame_work(&mut warm, conn, &frame, HIDDEN);
        frame_work(&mut warm, conn, &frame, MISSING);
        let hidden = frame_work(&mut warm, conn, &frame, HIDDEN);
        let missing = frame_work(&mut warm, conn, &frame, MISSING);
        assert_same_work(&format!("{frame} (warm)"), &hidden, &missing, false);
    }
}
