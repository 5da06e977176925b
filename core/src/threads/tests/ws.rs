//! The `/v1/ws` state machine: replay, fence, revocation, limits.

use serde_json::{json, Value};

use super::{seqs, Host};
use crate::http::Method;
use crate::{ConnId, Input, WsFrame};

#[test]
fn paged_replay_racing_appends_has_no_gap_and_no_duplicate() {
    let mut host = Host::new(2);
    host.create("alice", "t", None);
    host.append("alice", 5);
    let conn = host.open(1, "alice");
    host.send(
        conn,
        json!({"type": "thread.subscribe", "threadId": "t", "fromSeq": 2}),
    );
    let first = host.take(conn);
    assert_eq!(
        first[0],
        json!({"type": "thread.subscription_opened", "threadId": "t", "throughSeq": 5})
    );
    assert_eq!(seqs(&first), [2, 3]);
    host.append("alice", 3);
    assert!(
        host.take(conn).is_empty(),
        "appends are not fanned out while catching up"
    );
    while !host.drains.is_empty() {
        host.drain();
    }
    assert_eq!(seqs(&host.take(conn)), [4, 5, 6, 7, 8]);
    host.append("alice", 1);
    assert_eq!(seqs(&host.take(conn)), [9]);
}

#[test]
fn live_frames_wait_for_durability() {
    let mut host = Host::new(256);
    host.create("alice", "t", None);
    let conn = host.open(1, "alice");
    host.send(conn, json!({"type": "thread.subscribe", "threadId": "t"}));
    assert_eq!(host.take(conn).len(), 1);
    host.hold = true;
    host.send(conn, json!({"type": "thread.append", "threadId": "t", "event": {"type": "run_started", "runId": "r", "idempotencyKey": "k"}}));
    assert!(host.take(conn).is_empty());
    host.persist_all();
    let frames = host.take(conn);
    assert_eq!(seqs(&frames), [1]);
    assert!(frames[0]["event"].get("idempotencyKey").is_none());
}

#[test]
fn revoked_grant_ends_the_subscription() {
    let mut host = Host::new(256);
    host.create("alice", "t", None);
    host.create("alice", "t.child", Some("t"));
    host.http(
        Method::Put,
        "alice",
        "/v1/threads/t/grants/bob",
        json!({"role": "reader"}),
    );
    let conn = host.open(1, "bob");
    host.send(
        conn,
        json!({"type": "thread.subscribe", "threadId": "t.child"}),
    );
    assert_eq!(host.take(conn)[0]["type"], "thread.subscription_opened");
    host.http(
        Method::Delete,
        "alice",
        "/v1/threads/t/grants/bob",
        Value::Null,
    );
    let frames = host.take(conn);
    assert_eq!(frames[0]["type"], "error");
    assert_eq!(frames[0]["code"], "not_found");
    assert_eq!(
        frames[1],
        json!({"type": "thread.subscription_closed", "threadId": "t.child", "reason": "not_found"})
    );
    host.append("alice", 1);
    assert!(host.take(conn).is_empty());
}

#[test]
fn refused_bearer_and_oversized_frames_close() {
    let mut host = Host::new(256);
    host.input(Input::OpenThreads {
        conn: ConnId(1),
        token: Some("nope"),
    });
    let frames = host.take(ConnId(1));
    assert_eq!(frames[0]["code"], "unauthorized");
    assert!(frames[0].get("threadId").is_none());
    assert_eq!(host.closes, [(ConnId(1), 1008)]);
    let conn = host.open(2, "alice");
    let big = "x".repeat(crate::Limits::default().max_ws_frame_bytes + 1);
    host.input(Input::Frame {
        conn,
        frame: WsFrame::Text(&big),
    });
    assert_eq!(host.closes[1], (conn, 1009));
}

#[test]
fn connection_limits_and_frame_errors() {
    let mut host = Host::new(256);
    for id in ["a", "b"] {
        host.create("alice", id, None);
    }
    let conn = host.open(1, "alice");
    host.send(conn, json!({"type": "thread.subscribe", "threadId": "a"}));
    host.send(
        conn,
        json!({"type": "thread.subscribe", "threadId": "a", "fromSeq": 3}),
    );
    let frames = host.take(conn);
    assert_eq!(frames[1]["code"], "conflict");
    assert_eq!(frames.len(), 2);
    host.send(conn, json!({"type": "thread.nope"}));
    host.send(conn, json!(["x"]));
    host.input(Input::Frame {
        conn,
        frame: WsFrame::Binary(b"x"),
    });
    let frames = host.take(conn);
    assert!(
        frames
            .iter()
            .all(|f| f["code"] == "invalid_request" && f.get("threadId").is_none()),
        "{frames:?}"
    );
    host.send(conn, json!({"type": "thread.unsubscribe", "threadId": "a"}));
    host.append_as("alice", "a");
    assert!(host.take(conn).is_empty());
    assert_eq!(host.engine.metrics().thread_subscriptions, 0);
    assert_eq!(host.engine.metrics().thread_connections, 1);
}

#[test]
fn subscription_and_frame_rate_limits() {
    let limits = crate::Limits {
        max_subscriptions: 1,
        frame_rate: 3,
        frame_rate_window_ms: 1_000,
        ..crate::Limits::default()
    };
    let mut host = Host::with(limits);
    for id in ["a", "b"] {
        host.create("alice", id, None);
    }
    let conn = host.open(1, "alice");
    host.send(conn, json!({"type": "thread.subscribe", "threadId": "a"}));
    host.send(conn, json!({"type": "thread.subscribe", "threadId": "b"}));
    let frames = host.take(conn);
    assert_eq!(frames[1]["threadId"], "b");
    assert_eq!(frames[1]["code"], "rate_limited");
    assert_eq!(frames[2]["reason"], "rate_limited");
    host.send(
        conn,
        json!({"type": "thread.unsubscribe", "threadId": "zzz"}),
    );
    host.send(
        conn,
        json!({"type": "thread.unsubscribe", "threadId": "zzz"}),
    );
    let frames = host.take(conn);
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0]["code"], "rate_limited");
    assert!(frames[0].get("threadId").is_none());
}
