//! A caller who cannot read a thread cannot learn that it exists: for every
//! threads route and every `/v1/ws` frame type, what eve (no grant) gets
//! for alice's thread is byte for byte what she gets for a thread that does
//! not exist (the id aside), bad inputs included. That both take the same
//! work (the same store reads, the same bytes) is pinned deterministically
//! in `core/tests/hidden_threads_same_work.rs`; here the medians of the two
//! are measured and printed, and held only to a generous bound (each
//! within three times the other plus 5 ms): the machine is shared, and a
//! tight bound would measure its noise, while a leak that costs a store
//! round trip per request or more still shows.

use std::time::{Duration, Instant};

use bubble_tests::threads::{create_thread, grant, run_started};
use bubble_tests::{config_with_eve, Server, WsClient, ALICE, EVE};
use serde_json::{json, Value};

/// alice's thread, hidden from eve, with events, a grant, a participant,
/// a subthread and an idempotency key in use.
const HIDDEN: &str = "hidden-1";
/// No thread has this id (the same length, so bodies compare whole).
const MISSING: &str = "absent-1";

async fn setup(server: &Server) {
    let alice = server.http(ALICE);
    create_thread(&alice, HIDDEN).await;
    grant(&alice, HIDDEN, "bob", "member").await;
    let path = format!("/v1/threads/{HIDDEN}/events");
    let (status, body) = alice.post_idempotent(&path, &run_started("r"), "k-1").await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = alice
        .post(
            &format!("/v1/threads/{HIDDEN}/participants"),
            &json!({"principalId": "bob"}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = alice
        .post(
            "/v1/threads",
            &json!({"threadId": format!("{HIDDEN}-sub"), "parentThreadId": HIDDEN}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
}

/// Every threads route on thread `{t}`, with good and bad inputs:
/// `(method, path, idempotency key, body)`.
fn requests() -> Vec<(&'static str, &'static str, Option<&'static str>, Value)> {
    let none = Value::Null;
    vec![
        ("GET", "/v1/threads/{t}", None, none.clone()),
        ("PATCH", "/v1/threads/{t}", None, json!({"title": "mine"})),
        ("PATCH", "/v1/threads/{t}", None, json!({"title": 7})),
        (
            "GET",
            "/v1/threads/{t}/events?fromSeq=1&limit=10",
            None,
            none.clone(),
        ),
        (
            "GET",
            "/v1/threads/{t}/events?fromSeq=0",
            None,
            none.clone(),
        ),
        (
            "GET",
            "/v1/threads/{t}/events?limit=5000",
            None,
            none.clone(),
        ),
        ("GET", "/v1/threads/{t}/messages", None, none.clone()),
        ("POST", "/v1/threads/{t}/messages", None, json!({})),
        ("POST", "/v1/threads/{t}/events", None, run_started("r")),
        (
            "POST",
            "/v1/threads/{t}/events",
            Some("k-1"),
            run_started("r"),
        ),
        (
            "POST",
            "/v1/threads/{t}/events",
            None,
            json!({"type": "nope"}),
        ),
        ("POST", "/v1/threads/{t}/events", None, json!([1])),
        ("GET", "/v1/threads/{t}/grants", None, none.clone()),
        (
            "PUT",
            "/v1/threads/{t}/grants/eve",
            None,
            json!({"role": "owner"}),
        ),
        (
            "PUT",
            "/v1/threads/{t}/grants/eve",
            None,
            json!({"role": "king"}),
        ),
        ("DELETE", "/v1/threads/{t}/grants/alice", None, none.clone()),
        ("POST", "/v1/threads/{t}/participants", None, json!({})),
        (
            "POST",
            "/v1/threads/{t}/participants",
            None,
            json!({"principalId": "eve"}),
        ),
        (
            "DELETE",
            "/v1/threads/{t}/participants/alice",
            None,
            none.clone(),
        ),
        (
            "DELETE",
            "/v1/threads/{t}/participants/eve",
            None,
            none.clone(),
        ),
        (
            "POST",
            "/v1/threads",
            None,
            json!({"threadId": "{t}-x", "parentThreadId": "{t}"}),
        ),
        ("GET", "/v1/threads?parentThreadId={t}", None, none.clone()),
        ("GET", "/v1/threads/{t}-sub", None, none.clone()),
        ("GET", "/v1/threads/{t}/nothing-here", None, none),
    ]
}

/// Status, headers that could differ, and body of one request as eve.
async fn answer(
    server: &Server,
    method: &str,
    path: &str,
    key: Option<&str>,
    body: &Value,
    thread: &str,
) -> String {
    let path = path.replace("{t}", thread);
    let mut headers = vec![("content-type", "application/json")];
    if let Some(key) = key {
        headers.push(("idempotency-key", key));
    }
    let bytes = if body.is_null() {
        Vec::new()
    } else {
        body.to_string().replace("{t}", thread).into_bytes()
    };
    let res = server
        .http(EVE)
        .request(method, &path, &headers, bytes)
        .await;
    format!(
        "{} {:?} {:?} {}",
        res.status,
        res.header("content-type"),
        res.header("content-length"),
        res.text()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_http_route_answers_a_hidden_thread_as_a_missing_one() {
    let server = Server::start(&config_with_eve());
    setup(&server).await;
    for (method, path, key, body) in requests() {
        let hidden = answer(&server, method, path, key, &body, HIDDEN).await;
        let missing = answer(&server, method, path, key, &body, MISSING).await;
        assert_eq!(
            hidden.replace(HIDDEN, MISSING),
            missing,
            "{method} {path} {body}: a hidden thread shows"
        );
        // Only the listing succeeds, listing nothing of alice's.
        assert!(
            !hidden.starts_with('2') || !hidden.contains(HIDDEN),
            "{method} {path}: {hidden}"
        );
    }
    // Nothing eve tried changed alice's thread.
    let (status, thread) = server
        .http(ALICE)
        .get(&format!("/v1/threads/{HIDDEN}"))
        .await;
    assert_eq!(status, 200);
    assert_eq!(thread["headSeq"], 2, "one event and bob's join: {thread}");
}

/// Every frame type on thread `{t}`, good and bad.
fn frames() -> Vec<Value> {
    vec![
        json!({"type": "thread.subscribe", "threadId": "{t}"}),
        json!({"type": "thread.subscribe", "threadId": "{t}", "fromSeq": 1}),
        json!({"type": "thread.subscribe", "threadId": "{t}", "fromSeq": 0}),
        json!({"type": "thread.unsubscribe", "threadId": "{t}"}),
        json!({"type": "thread.append", "threadId": "{t}", "event": run_started("r")}),
        json!({"type": "thread.append", "threadId": "{t}",
               "event": {"type": "run_started", "runId": "r", "idempotencyKey": "k-1"}}),
        json!({"type": "thread.append", "threadId": "{t}", "event": {"type": "nope"}}),
        json!({"type": "thread.append", "threadId": "{t}", "event": 5}),
        json!({"type": "thread.subscribe", "threadId": "{t}-sub"}),
    ]
}

/// A frame of an unknown type: its answer (an unscoped error) marks the
/// end of the answers to the frame sent before it, as a socket answers
/// its frames in order.
const PROBE: &str = r#"{"type":"probe.end"}"#;

/// What eve's socket answers `frame`: every frame before the probe's answer.
async fn frame_answer(ws: &mut WsClient, frame: &Value, thread: &str, probe: &Value) -> String {
    let text = frame.to_string().replace("{t}", thread);
    ws.send_text(&text).await;
    ws.send_text(PROBE).await;
    let mut seen = Vec::new();
    loop {
        let got = ws.recv_json().await;
        if &got == probe {
            return seen.join("\n");
        }
        seen.push(got.to_string());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_ws_frame_answers_a_hidden_thread_as_a_missing_one() {
    let server = Server::start(&config_with_eve());
    setup(&server).await;
    let mut ws = server.ws(EVE).await;
    ws.send_text(PROBE).await;
    let probe = ws.recv_json().await;
    assert_eq!(probe["type"], "error", "{probe}");
    for frame in frames() {
        let hidden = frame_answer(&mut ws, &frame, HIDDEN, &probe).await;
        let missing = frame_answer(&mut ws, &frame, MISSING, &probe).await;
        assert_eq!(
            hidden.replace(HIDDEN, MISSING),
            missing,
            "{frame}: a hidden thread shows"
        );
        assert!(!hidden.contains("thread.event"), "{frame}: {hidden}");
        assert!(!hidden.contains("subscription_opened"), "{frame}: {hidden}");
    }
    let (status, thread) = server
        .http(ALICE)
        .get(&format!("/v1/threads/{HIDDEN}"))
        .await;
    assert_eq!(status, 200);
    assert_eq!(thread["headSeq"], 2, "{thread}");
}

/// The median of `samples`.
fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hidden_and_missing_threads_answer_in_the_same_time_class() {
    let server = Server::start(&config_with_eve());
    setup(&server).await;
    let eve = server.http(EVE);
    let mut hidden = Vec::new();
    let mut missing = Vec::new();
    // Interleaved, so that the machine's noise falls on both alike.
    for _ in 0..300 {
        for (thread, samples) in [(HIDDEN, &mut hidden), (MISSING, &mut missing)] {
            let started = Instant::now();
            let (status, _) = eve.get(&format!("/v1/threads/{thread}/events")).await;
            samples.push(started.elapsed());
            assert_eq!(status, 404);
        }
    }
    let (hidden, missing) = (median(hidden), median(missing));
    eprintln!(
        "hidden-thread timing: median GET …/events as eve, 300 each: hidden {:.3} ms, missing {:.3} ms",
        hidden.as_secs_f64() * 1000.0,
        missing.as_secs_f64() * 1000.0
    );
    let slack = Duration::from_millis(5);
    assert!(hidden <= missing * 3 + slack, "{hidden:?} vs {missing:?}");
    assert!(missing <= hidden * 3 + slack, "{hidden:?} vs {missing:?}");
}
