//! Losing read access ends live subscriptions with a scoped error, then
//! `thread.subscription_closed{reason:"not_found"}`; nothing more arrives.

mod common;

use bubble_core::ConnId;
use common::{closed, event_seqs, Harness, ADMIN};

fn subscribed(h: &mut Harness, who: &str, thread: &str) -> ConnId {
    let conn = h.connect(who);
    h.subscribe(conn, thread, Some(1));
    h.frames(conn);
    conn
}

#[track_caller]
fn assert_closed(frames: &[serde_json::Value], thread: &str) {
    assert_eq!(frames.len(), 2, "error then closed: {frames:?}");
    assert_eq!(frames[0]["type"], "error");
    assert_eq!(frames[0]["threadId"], thread);
    assert_eq!(frames[0]["code"], "not_found", "denial hiding: {frames:?}");
    assert!(frames[0]["message"].is_string());
    assert_eq!(frames[1], closed(thread, "not_found"));
}

#[test]
fn revoking_the_grant_closes() {
    let mut h = Harness::new();
    h.create_thread(ADMIN, "thread-1");
    h.create_thread(ADMIN, "thread-2");
    h.grant("thread-1", "alice", "reader");
    h.grant("thread-2", "alice", "reader");
    h.append_n("thread-1", 1);
    let conn = subscribed(&mut h, "alice", "thread-1");
    h.subscribe(conn, "thread-2", Some(1));
    h.frames(conn);
    h.revoke("thread-1", "alice");
    assert_closed(&h.frames(conn), "thread-1");
    h.append_n("thread-1", 1);
    h.append_n("thread-2", 1);
    let frames = h.frames(conn);
    assert!(
        event_seqs(&frames, "thread-1").is_empty(),
        "nothing after the close"
    );
    assert_eq!(
        event_seqs(&frames, "thread-2"),
        [1],
        "other subscriptions go on"
    );
    // A new subscribe is refused like any unreadable thread.
    h.subscribe(conn, "thread-1", Some(1));
    let frames = h.frames(conn);
    assert_eq!(frames[0]["code"], "not_found");
    assert_eq!(frames[1], closed("thread-1", "not_found"));
}

#[test]
fn revoking_an_ancestor_grant_closes_the_subthread() {
    let mut h = Harness::new();
    h.create_thread(ADMIN, "thread-root");
    h.create_subthread(ADMIN, "thread-child", "thread-root");
    h.create_subthread(ADMIN, "thread-grandchild", "thread-child");
    h.grant("thread-root", "alice", "member");
    let conn = subscribed(&mut h, "alice", "thread-grandchild");
    h.revoke("thread-root", "alice");
    assert_closed(&h.frames(conn), "thread-grandchild");
}

#[test]
fn downgrade_that_keeps_read_access_keeps_the_subscription() {
    let mut h = Harness::new();
    h.create_thread(ADMIN, "thread-root");
    h.create_subthread(ADMIN, "thread-child", "thread-root");
    h.grant("thread-child", "alice", "owner");
    h.grant("thread-root", "alice", "reader");
    let conn = subscribed(&mut h, "alice", "thread-child");
    h.grant("thread-child", "alice", "reader");
    // Still readable through the direct grant, then through the parent.
    h.revoke("thread-child", "alice");
    assert!(h.frames(conn).is_empty(), "no teardown while readable");
    h.append_n("thread-child", 1);
    assert_eq!(event_seqs(&h.frames(conn), "thread-child"), [1]);
    h.revoke("thread-root", "alice");
    assert_closed(&h.frames(conn), "thread-child");
}

#[test]
fn only_the_revoked_principal_is_closed() {
    let mut h = Harness::new();
    h.create_thread(ADMIN, "thread-1");
    h.grant("thread-1", "alice", "reader");
    h.grant("thread-1", "bob", "reader");
    let alice = subscribed(&mut h, "alice", "thread-1");
    let alice_too = subscribed(&mut h, "alice", "thread-1");
    let bob = subscribed(&mut h, "bob", "thread-1");
    h.revoke("thread-1", "alice");
    assert_closed(&h.frames(alice), "thread-1");
    assert_closed(&h.frames(alice_too), "thread-1");
    assert!(h.frames(bob).is_empty());
    h.append_n("thread-1", 1);
    assert_eq!(event_seqs(&h.frames(bob), "thread-1"), [1]);
    assert!(h.frames(alice).is_empty());
}

#[test]
fn events_appended_before_the_revocation_are_still_delivered_in_order() {
    let mut h = Harness::new();
    h.create_thread(ADMIN, "thread-1");
    h.grant("thread-1", "alice", "reader");
    let conn = subscribed(&mut h, "alice", "thread-1");
    h.hold_persistence();
    h.append_n_async("thread-1", 2);
    h.revoke_async("thread-1", "alice");
    h.append_n_async("thread-1", 1);
    assert!(h.frames(conn).is_empty(), "nothing before durability");
    h.release_persistence();
    let frames = h.frames(conn);
    assert_eq!(event_seqs(&frames, "thread-1"), [1, 2]);
    assert_closed(&frames[2..], "thread-1");
}
