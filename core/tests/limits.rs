//! Per-connection limits of `/v1/ws` (SPEC §5): subscriptions per
//! connection and the frame rate.

mod common;

use common::{event_seqs, opened, Harness, ADMIN};

#[test]
fn subscription_limit_refuses_the_next_one_only() {
    let mut config = common::config();
    config.limits.max_subscriptions = 2;
    let mut h = Harness::with_config(config);
    for t in ["thread-1", "thread-2", "thread-3"] {
        h.create_thread(ADMIN, t);
        h.grant(t, "alice", "reader");
    }
    let conn = h.connect("alice");
    h.subscribe(conn, "thread-1", Some(1));
    h.subscribe(conn, "thread-2", Some(1));
    assert_eq!(
        h.frames(conn),
        [opened("thread-1", 0), opened("thread-2", 0)]
    );
    h.subscribe(conn, "thread-3", Some(1));
    let frames = h.frames(conn);
    assert!(!frames.is_empty(), "the 3rd subscribe is answered");
    assert_eq!(frames[0]["type"], "error");
    assert_eq!(frames[0]["threadId"], "thread-3");
    assert!(
        frames
            .iter()
            .all(|f| f["type"] != "thread.subscription_opened"),
        "{frames:?}"
    );
    assert!(h.is_open(conn));
    h.append_n("thread-1", 1);
    assert_eq!(event_seqs(&h.frames(conn), "thread-1"), [1]);
    // Freeing a slot makes room again.
    h.unsubscribe(conn, "thread-1");
    h.subscribe(conn, "thread-3", Some(1));
    assert_eq!(h.frames(conn), [opened("thread-3", 0)]);
}

#[test]
fn frame_rate_limit() {
    let mut config = common::config();
    config.limits.frame_rate = 5;
    config.limits.frame_rate_window_ms = 1_000;
    let mut h = Harness::with_config(config);
    h.create_thread(ADMIN, "thread-1");
    h.grant("thread-1", "alice", "member");
    let conn = h.connect("alice");
    let calm = h.connect("alice");
    for i in 0..5 {
        h.ws_append(conn, "thread-1", common::run_started(&format!("run-{i}")));
    }
    assert!(h.frames(conn).is_empty(), "within the limit");
    h.ws_append(conn, "thread-1", common::run_started("run-over"));
    let frames = h.frames(conn);
    let limited = frames
        .iter()
        .any(|f| f["type"] == "error" && f["code"] == "rate_limited");
    assert!(
        limited || h.close_code(conn).is_some(),
        "over the limit: {frames:?}"
    );
    assert_eq!(
        h.thread("thread-1")["headSeq"],
        5,
        "the frame over the limit was not applied"
    );
    // Other connections are unaffected.
    h.subscribe(calm, "thread-1", Some(5));
    assert_eq!(event_seqs(&h.frames(calm), "thread-1"), [5]);
    // After the window the connection, if still open, may send again.
    if h.is_open(conn) {
        h.advance(1_000);
        h.ws_append(conn, "thread-1", common::run_started("run-later"));
        assert!(h.frames(conn).iter().all(|f| f["type"] != "error"));
        assert_eq!(h.thread("thread-1")["headSeq"], 6);
    }
}
