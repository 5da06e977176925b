//! A read the store fails answers `internal` to the one request (or ends
//! the one subscription) that waited for it; everything else goes on.

mod common;

use bubble_core::store::{MemoryStore, ReadQuery};
use bubble_core::Millis;
use common::*;
use serde_json::json;

fn events(query: &ReadQuery) -> bool {
    matches!(query, ReadQuery::Events { .. })
}

fn idempotent(query: &ReadQuery) -> bool {
    matches!(query, ReadQuery::Idempotent { .. })
}

fn thread_u(query: &ReadQuery) -> bool {
    matches!(query, ReadQuery::Thread { thread_id } if thread_id.as_str() == "u")
}

#[test]
fn a_failed_history_read_fails_that_page_alone() {
    let mut h = Harness::new();
    h.create_thread("alice", "t");
    h.append_n("t", 3);
    h.fail_reads(Some(events));
    h.get("alice", "/v1/threads/t/events?fromSeq=1")
        .expect_error(500, "internal");
    assert_eq!(h.thread("t")["headSeq"], 3);
    h.append(ADMIN, "t", run_started("more")).expect(201);
    h.fail_reads(None);
    assert_eq!(h.history("t").len(), 4);
}

#[test]
fn a_failed_backlog_read_ends_that_subscription_alone() {
    let mut h = Harness::new();
    h.create_thread("alice", "t");
    h.create_thread("alice", "u");
    h.append_n("t", 2);
    let conn = h.connect("alice");
    h.subscribe(conn, "u", Some(1));
    h.frames(conn);
    h.fail_reads(Some(events));
    h.subscribe(conn, "t", Some(1));
    let frames = h.frames(conn);
    let types: Vec<&str> = frames
        .iter()
        .map(|f| f["type"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        types,
        [
            "thread.subscription_opened",
            "error",
            "thread.subscription_closed"
        ],
        "{frames:?}"
    );
    assert_eq!(frames[1]["code"], "internal");
    assert_eq!(frames[1]["threadId"], "t");
    assert_eq!(frames[2]["reason"], "internal");
    h.fail_reads(None);
    // The other subscription and the connection go on.
    h.append(ADMIN, "u", run_started("live")).expect(201);
    let frames = h.frames(conn);
    assert_eq!(frames.len(), 1, "{frames:?}");
    assert_eq!(frames[0]["type"], "thread.event");
    assert_eq!(frames[0]["threadId"], "u");
}

#[test]
fn a_failed_load_or_key_lookup_fails_that_frame_alone() {
    let store = MemoryStore::default();
    let mut first = Harness::engine_over(config(), store.clone(), Millis(T0), 1);
    first.create_thread("alice", "t");
    first.create_thread("alice", "u");
    first.append_n("t", 1);
    // A fresh engine over the same data must load both threads.
    let mut h = Harness::engine_over(config(), store, Millis(T0), 2);
    h.fail_reads(Some(thread_u));
    let conn = h.connect("alice");
    h.subscribe(conn, "u", Some(1));
    h.subscribe(conn, "t", Some(2));
    let frames = h.frames(conn);
    assert_eq!(frames[0]["type"], "error", "{frames:?}");
    assert_eq!(frames[0]["threadId"], "u");
    assert_eq!(frames[0]["code"], "internal");
    assert_eq!(frames[1]["type"], "thread.subscription_closed");
    assert_eq!(frames[2]["type"], "thread.subscription_opened");
    assert_eq!(frames[2]["threadId"], "t");
    h.fail_reads(Some(idempotent));
    let keyed = json!({"type": "run_started", "runId": "r", "idempotencyKey": "k-1"});
    h.ws_append(conn, "t", keyed.clone());
    let frames = h.frames(conn);
    assert_eq!(frames.len(), 1, "{frames:?}");
    assert_eq!(frames[0]["type"], "error");
    assert_eq!(frames[0]["code"], "internal");
    assert_eq!(frames[0]["threadId"], "t");
    h.fail_reads(None);
    h.ws_append(conn, "t", keyed.clone());
    h.ws_append(conn, "t", keyed);
    let frames = h.frames(conn);
    assert_eq!(frames.len(), 1, "the repeat appends nothing: {frames:?}");
    assert_eq!(frames[0]["event"]["seq"], 2);
    assert_eq!(h.thread("t")["headSeq"], 2);
}
