//! A `/v1/ws` socket that outlives its engine (a Durable Object evicted
//! while the runtime kept the socket open) is resumed on a new engine over
//! the same store with `Input::ResumeThreads`: the positions the old engine
//! reported, no second `thread.subscription_opened`, every event once and in
//! order from there.

mod common;

use bubble_core::{Millis, ThreadId};
use common::*;
use serde_json::Value;

fn id(thread: &str) -> ThreadId {
    ThreadId::parse(thread).expect("thread id")
}

/// An engine with `thread-1` (3 events) and `thread-2` (none), both
/// readable by alice.
fn setup() -> Harness {
    let mut h = Harness::new();
    for thread in ["thread-1", "thread-2"] {
        h.create_thread(ADMIN, thread);
        h.grant(thread, "alice", "member");
    }
    h.append_n("thread-1", 3);
    h
}

/// A new engine over the store `h` left (the object rebuilt after eviction).
fn rebuilt(h: &Harness) -> Harness {
    Harness::engine_over(config(), h.store.clone(), Millis(h.now().0 + 1_000), 99)
}

#[test]
fn positions_are_the_next_seq_of_each_subscription() {
    let mut h = setup();
    let conn = h.connect("alice");
    assert_eq!(h.engine.thread_subscriptions(conn), Some(vec![]));
    h.subscribe(conn, "thread-1", Some(2));
    h.subscribe(conn, "thread-2", None);
    h.append_n("thread-1", 2);
    let frames = h.frames(conn);
    assert_eq!(event_seqs(&frames, "thread-1"), [2, 3, 4, 5]);
    assert_eq!(
        h.engine.thread_subscriptions(conn),
        Some(vec![(id("thread-1"), 6), (id("thread-2"), 1)])
    );
    h.unsubscribe(conn, "thread-2");
    assert_eq!(
        h.engine.thread_subscriptions(conn),
        Some(vec![(id("thread-1"), 6)])
    );
    h.disconnect(conn);
    assert_eq!(h.engine.thread_subscriptions(conn), None);
}

#[test]
fn a_resumed_socket_goes_on_where_it_stood() {
    let mut h = setup();
    let conn = h.connect("alice");
    h.subscribe(conn, "thread-1", Some(1));
    h.subscribe(conn, "thread-2", None);
    assert_eq!(event_seqs(&h.frames(conn), "thread-1"), [1, 2, 3]);
    let positions = h.engine.thread_subscriptions(conn).expect("open");

    let mut again = rebuilt(&h);
    let conn = again.resume(Some(&token("alice")), &positions);
    assert_eq!(
        again.frames(conn),
        Vec::<Value>::new(),
        "nothing is sent again"
    );
    assert_eq!(again.engine.thread_subscriptions(conn), Some(positions));
    again.append_n("thread-1", 2);
    again
        .append("alice", "thread-2", run_started("r-1"))
        .expect(201);
    let frames = again.frames(conn);
    assert_eq!(event_seqs(&frames, "thread-1"), [4, 5]);
    assert_eq!(event_seqs(&frames, "thread-2"), [1]);
    // The subscriptions are the socket's own: a second subscribe conflicts.
    again.subscribe(conn, "thread-1", None);
    let frames = again.frames(conn);
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0]["code"], "conflict");
}

#[test]
fn a_position_behind_the_head_replays_what_the_socket_missed() {
    let mut h = setup();
    h.append_n("thread-1", 2);
    let mut again = rebuilt(&h);
    let conn = again.resume(Some(&token("alice")), &[(id("thread-1"), 4)]);
    let frames = again.frames(conn);
    assert!(
        frames.iter().all(|f| f["type"] == "thread.event"),
        "{frames:?}"
    );
    assert_eq!(event_seqs(&frames, "thread-1"), [4, 5]);
    again.append_n("thread-1", 1);
    assert_eq!(event_seqs(&again.frames(conn), "thread-1"), [6]);
}

#[test]
fn a_resumed_subscription_is_decided_again() {
    let mut h = setup();
    h.revoke("thread-2", "alice");
    let mut again = rebuilt(&h);
    let conn = again.resume(
        Some(&token("alice")),
        &[(id("thread-1"), 4), (id("thread-2"), 1), (id("missing"), 1)],
    );
    let frames = again.frames(conn);
    assert!(
        frames.contains(&closed("thread-2", "not_found")),
        "{frames:?}"
    );
    assert!(
        frames.contains(&closed("missing", "not_found")),
        "{frames:?}"
    );
    assert!(!frames
        .iter()
        .any(|f| f["type"] == "thread.subscription_opened"));
    assert_eq!(
        again.engine.thread_subscriptions(conn),
        Some(vec![(id("thread-1"), 4)])
    );
    // A client subscribe after a failed resume is a fresh subscription.
    again.grant("thread-2", "alice", "reader");
    again.subscribe(conn, "thread-2", None);
    assert_eq!(again.frames(conn), [opened("thread-2", 0)]);
}

#[test]
fn a_refused_bearer_resumes_nothing() {
    let h = setup();
    let mut again = rebuilt(&h);
    let conn = again.resume(Some("wrong"), &[(id("thread-1"), 1)]);
    let frames = again.frames(conn);
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0]["code"], "unauthorized");
    assert_eq!(again.close_code(conn), Some(1008));
    assert_eq!(again.engine.thread_subscriptions(conn), None);
}
