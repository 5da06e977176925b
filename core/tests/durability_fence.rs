//! "Acknowledged means durable": with persistence held back, no answer,
//! acknowledgement or delivery that depends on a write leaves the engine
//! before the host reports the batch durable. (The harness also checks
//! every released event against the store.)

mod common;

use bubble_core::http::Method;
use common::{event_seqs, run_started, Harness, ADMIN};
use serde_json::json;

#[test]
fn create_is_answered_after_durable() {
    let mut h = Harness::new();
    h.hold_persistence();
    let req = h.send_request(
        Method::Post,
        Some("alice"),
        "/v1/threads",
        Some(&json!({ "threadId": "thread-1" })),
        None,
    );
    assert!(h.response(req).is_none(), "answered before durable");
    assert_eq!(h.held_batches(), 1);
    h.persist(1);
    let resp = h.response(req).expect("answered once durable");
    assert_eq!(resp.status, 201);
    assert!(h.store_has_thread("thread-1"));
}

#[test]
fn append_is_acknowledged_and_delivered_after_durable() {
    let mut h = Harness::new();
    h.create_thread(ADMIN, "thread-1");
    h.grant("thread-1", "alice", "member");
    let sub = h.connect("alice");
    h.subscribe(sub, "thread-1", Some(1));
    h.frames(sub);
    h.hold_persistence();
    let first = h.append_n_async("thread-1", 2);
    let writer = h.connect("alice");
    h.ws_append(writer, "thread-1", run_started("run-ws"));
    assert!(first.iter().all(|r| h.response(*r).is_none()));
    assert!(h.frames(sub).is_empty(), "delivered before durable");
    // Group commit: two of the three batches at once.
    h.persist(2);
    let answered: Vec<u64> = first
        .iter()
        .map(|r| {
            h.response(*r).expect("answered").expect(201).body["event"]["seq"]
                .as_u64()
                .expect("seq")
        })
        .collect();
    assert_eq!(answered, [1, 2]);
    assert_eq!(event_seqs(&h.frames(sub), "thread-1"), [1, 2]);
    h.persist(1);
    assert_eq!(event_seqs(&h.frames(sub), "thread-1"), [3]);
    assert!(h.frames(writer).is_empty());
}

#[test]
fn repeat_of_a_pending_idempotent_append_waits_for_the_original() {
    let mut h = Harness::new();
    h.create_thread(ADMIN, "thread-1");
    h.hold_persistence();
    let body = run_started("run-1");
    let target = "/v1/threads/thread-1/events";
    let first = h.send_request(
        Method::Post,
        Some(ADMIN),
        target,
        Some(&body),
        Some("key-1"),
    );
    let again = h.send_request(
        Method::Post,
        Some(ADMIN),
        target,
        Some(&body),
        Some("key-1"),
    );
    assert!(h.response(first).is_none());
    assert!(
        h.response(again).is_none(),
        "the repeat is acknowledged only once the original is durable"
    );
    h.release_persistence();
    let first = h.response(first).expect("answered").expect(201).body;
    let again = h.response(again).expect("answered").expect(200).body;
    assert_eq!(again["event"], first["event"]);
    assert_eq!(again["duplicate"], true);
    assert_eq!(h.thread("thread-1")["headSeq"], 1);
}

#[test]
fn subscription_opened_waits_for_the_events_it_covers() {
    let mut h = Harness::new();
    h.create_thread(ADMIN, "thread-1");
    h.grant("thread-1", "alice", "reader");
    h.append_n("thread-1", 2);
    h.hold_persistence();
    h.append_n_async("thread-1", 2);
    let conn = h.connect("alice");
    h.subscribe(conn, "thread-1", Some(1));
    let early = h.frames(conn);
    // Whatever is released early covers only durable events.
    if let Some(opened) = early.first() {
        assert!(
            opened["throughSeq"].as_u64().expect("throughSeq") <= 2,
            "{opened}"
        );
    }
    h.release_persistence();
    let mut frames = early;
    frames.extend(h.frames(conn));
    assert_eq!(frames[0]["type"], "thread.subscription_opened");
    assert_eq!(event_seqs(&frames, "thread-1"), [1, 2, 3, 4]);
}

#[test]
fn title_and_grant_changes_are_answered_after_durable() {
    let mut h = Harness::new();
    h.create_thread(ADMIN, "thread-1");
    h.hold_persistence();
    let patch = h.send_request(
        Method::Patch,
        Some(ADMIN),
        "/v1/threads/thread-1",
        Some(&json!({ "title": "T" })),
        None,
    );
    let grant = h.send_request(
        Method::Put,
        Some(ADMIN),
        "/v1/threads/thread-1/grants/bob",
        Some(&json!({ "role": "reader" })),
        None,
    );
    assert!(h.response(patch).is_none());
    assert!(h.response(grant).is_none());
    h.release_persistence();
    assert_eq!(h.response(patch).expect("answered").status, 200);
    assert!((200..300).contains(&h.response(grant).expect("answered").status));
}
