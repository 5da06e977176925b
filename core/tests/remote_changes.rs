//! Two engines over one store, as cluster nodes: remote changes arrive as
//! `Input::Changed` and reach local subscribers in seq order, once, with no
//! gap, even when announcements are lost or both engines append.

mod common;

use bubble_core::cluster::ClusterMessage;
use bubble_core::store::MemoryStore;
use bubble_core::{ConnId, Millis};
use common::*;
use serde_json::Value;

fn pair() -> (Harness, Harness) {
    let store = MemoryStore::default();
    (
        Harness::engine_over(config(), store.clone(), Millis(T0), 1),
        Harness::engine_over(config(), store, Millis(T0), 2),
    )
}

/// Tells `to` what `from` committed; `keep` picks which announcements
/// arrive (a broker may lose some).
fn gossip(from: &mut Harness, to: &mut Harness, keep: impl Fn(usize, usize) -> bool) {
    let committed = from.take_committed();
    let n = committed.len();
    for (i, (thread, head, version)) in committed.into_iter().enumerate() {
        if keep(i, n) {
            to.changed(&thread, head, version);
        }
    }
}

fn event_seqs(frames: &[Value]) -> Vec<u64> {
    frames
        .iter()
        .filter(|f| f["type"] == "thread.event")
        .map(|f| f["event"]["seq"].as_u64().expect("seq"))
        .collect()
}

fn subscribed(h: &mut Harness, who: &str, thread: &str) -> ConnId {
    let conn = h.connect(who);
    h.subscribe(conn, thread, Some(1));
    conn
}

#[test]
fn remote_appends_reach_local_subscribers_once_in_order() {
    let (mut a, mut b) = pair();
    a.create_thread("alice", "t");
    a.append_n("t", 3);
    let on_b = subscribed(&mut b, "alice", "t");
    let opened = b.frames(on_b);
    assert_eq!(opened[0]["type"], "thread.subscription_opened");
    assert_eq!(opened[0]["throughSeq"], 3);
    let mut seen = event_seqs(&opened);
    a.take_committed();

    a.append_n("t", 5);
    gossip(&mut a, &mut b, |_, _| true);
    seen.extend(event_seqs(&b.frames(on_b)));
    assert_eq!(seen, (1..=8).collect::<Vec<_>>());

    // Lost announcements: only the last of four arrives.
    a.append_n("t", 4);
    gossip(&mut a, &mut b, |i, n| i + 1 == n);
    seen.extend(event_seqs(&b.frames(on_b)));
    assert_eq!(seen, (1..=12).collect::<Vec<_>>());

    // Both engines append; b's cache is stale for a's last appends, so its
    // writes are refused, reloaded and decided again.
    let on_a = subscribed(&mut a, "alice", "t");
    let mut seen_a = event_seqs(&a.frames(on_a));
    for round in 0..4 {
        a.append_n("t", 2);
        b.append(ADMIN, "t", run_started(&format!("b-{round}")))
            .expect(201);
        gossip(&mut a, &mut b, |i, _| i % 2 == 0);
        gossip(&mut b, &mut a, |_, _| true);
    }
    gossip(&mut a, &mut b, |_, _| true);
    seen.extend(event_seqs(&b.frames(on_b)));
    seen_a.extend(event_seqs(&a.frames(on_a)));
    let head = b.thread("t")["headSeq"].as_u64().expect("head");
    assert_eq!(head, 12 + 4 * 3);
    assert_eq!(seen, (1..=head).collect::<Vec<_>>());
    assert_eq!(seen_a, (1..=head).collect::<Vec<_>>());
    assert_eq!(
        event_seqs(
            &a.history("t")
                .into_iter()
                .map(|e| serde_json::json!({"type": "thread.event", "event": e}))
                .collect::<Vec<_>>()
        ),
        (1..=head).collect::<Vec<_>>()
    );
}

/// Bob, a reader of `t` and so of its subthread `t.child`, subscribes on
/// `b` to each of `threads`; `a` then revokes his grant and `b` is told.
fn revoked_while_following(threads: &[&str]) -> (Harness, Harness, Vec<ConnId>) {
    let (mut a, mut b) = pair();
    a.create_thread("alice", "t");
    a.create_subthread("alice", "t.child", "t");
    a.grant("t", "bob", "reader");
    a.take_committed();
    let conns: Vec<ConnId> = threads
        .iter()
        .map(|thread| subscribed(&mut b, "bob", thread))
        .collect();
    for conn in &conns {
        b.frames(*conn);
    }
    a.revoke("t", "bob");
    gossip(&mut a, &mut b, |_, _| true);
    (a, b, conns)
}

/// `frames` are a `not_found` error scoped to `thread`, then its close.
fn ended_not_found(frames: &[Value], thread: &str) {
    assert_eq!(frames.len(), 2, "{frames:?}");
    assert_eq!(frames[0]["type"], "error");
    assert_eq!(frames[0]["threadId"], thread);
    assert_eq!(frames[0]["code"], "not_found");
    assert_eq!(frames[1]["type"], "thread.subscription_closed");
    assert_eq!(frames[1]["reason"], "not_found");
}

#[test]
fn a_grant_revoked_elsewhere_ends_local_subscriptions() {
    let (_, mut b, conns) = revoked_while_following(&["t", "t.child"]);
    for (conn, thread) in conns.into_iter().zip(["t", "t.child"]) {
        ended_not_found(&b.frames(conn), thread);
    }
}

/// A subthread's subscription rests on grants of its parent: a revocation
/// on a parent nobody follows here still ends it (the parent is read
/// again, not forgotten), and the revoked reader gets nothing appended
/// after it.
#[test]
fn a_revocation_elsewhere_on_an_unfollowed_parent_ends_subthread_subscriptions() {
    let (mut a, mut b, conns) = revoked_while_following(&["t.child"]);
    let on_child = conns[0];
    ended_not_found(&b.frames(on_child), "t.child");
    a.append_n("t.child", 2);
    gossip(&mut a, &mut b, |_, _| true);
    assert!(b.frames(on_child).is_empty());
}

#[test]
fn completions_after_close_or_unsubscribe_are_ignored() {
    let (mut a, mut b) = pair();
    a.create_thread("alice", "t");
    a.append_n("t", 5);
    b.hold_reads();
    // The subscribe waits for the thread's record; the socket closes first.
    let gone = b.connect("alice");
    b.subscribe(gone, "t", Some(1));
    assert!(b.held_reads() > 0);
    b.disconnect(gone);
    b.release_reads();
    assert!(b.frames(gone).is_empty());

    // A backlog page is in flight when the subscription ends.
    let conn = b.connect("alice");
    b.hold_reads();
    b.subscribe(conn, "t", Some(1));
    let opened = b.frames(conn);
    assert_eq!(opened.len(), 1, "{opened:?}");
    assert_eq!(opened[0]["type"], "thread.subscription_opened");
    b.unsubscribe(conn, "t");
    b.release_reads();
    assert!(b.frames(conn).is_empty());
    // Subscribing again replays the whole backlog once.
    b.subscribe(conn, "t", Some(1));
    assert_eq!(event_seqs(&b.frames(conn)), [1, 2, 3, 4, 5]);
}

#[test]
fn frames_behind_a_waiting_frame_keep_their_order() {
    let (mut a, mut b) = pair();
    a.create_thread("alice", "t");
    a.append_n("t", 2);
    b.hold_reads();
    let conn = b.connect("alice");
    b.subscribe(conn, "t", Some(1));
    b.ws_append(conn, "t", run_started("live"));
    b.send_text(conn, "[]");
    assert!(b.frames(conn).is_empty(), "everything waits for the load");
    b.release_reads();
    let frames = b.frames(conn);
    // The thread's frames keep the protocol's order; the error of the last
    // frame is unscoped and may pass backlog events still being read.
    let scoped: Vec<&str> = frames
        .iter()
        .filter(|f| f["threadId"] == "t")
        .map(|f| f["type"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(
        scoped,
        [
            "thread.subscription_opened",
            "thread.event",
            "thread.event",
            "thread.event"
        ],
        "{frames:?}"
    );
    assert_eq!(frames[0]["throughSeq"], 2);
    assert_eq!(event_seqs(&frames), [1, 2, 3]);
    let errors: Vec<&Value> = frames.iter().filter(|f| f["type"] == "error").collect();
    assert_eq!(errors.len(), 1, "{frames:?}");
    assert_eq!(errors[0]["code"], "invalid_request");
}

fn clustered_pair() -> (Harness, Harness) {
    let mut cfg = config();
    cfg.cluster = true;
    let store = MemoryStore::default();
    (
        Harness::engine_over(cfg.clone(), store.clone(), Millis(T0), 1),
        Harness::engine_over(cfg, store, Millis(T0), 2),
    )
}

#[test]
fn clustered_engines_announce_their_commits() {
    let (mut a, mut b) = clustered_pair();
    a.create_thread("alice", "t");
    let on_b = subscribed(&mut b, "alice", "t");
    b.frames(on_b);
    a.append_n("t", 3);
    let said = a.take_broadcasts();
    assert!(!said.is_empty());
    assert!(
        said.iter()
            .all(|m| matches!(m, ClusterMessage::ThreadChanged { .. })),
        "{said:?}"
    );
    for message in said {
        b.remote("a", message);
    }
    assert_eq!(event_seqs(&b.frames(on_b)), [1, 2, 3]);
    assert!(b.take_broadcasts().is_empty(), "b committed nothing");
}

#[test]
fn a_recheck_catches_changes_nobody_announced() {
    let (mut a, mut b) = pair();
    a.create_thread("alice", "t");
    let on_b = subscribed(&mut b, "alice", "t");
    b.frames(on_b);
    a.append_n("t", 4);
    a.take_committed();
    assert!(
        event_seqs(&b.frames(on_b)).is_empty(),
        "nothing was announced"
    );
    b.input(bubble_core::Input::Recheck);
    assert_eq!(event_seqs(&b.frames(on_b)), [1, 2, 3, 4]);
    assert_eq!(b.engine.metrics().missed_changes, 1);
    b.input(bubble_core::Input::Recheck);
    assert!(
        event_seqs(&b.frames(on_b)).is_empty(),
        "nothing new: nothing sent"
    );
    assert_eq!(b.engine.metrics().missed_changes, 1);
}

#[test]
fn a_recheck_resumes_subscriptions_whose_reload_failed() {
    let (mut a, mut b) = pair();
    a.create_thread("alice", "t");
    let on_b = subscribed(&mut b, "alice", "t");
    b.frames(on_b);
    a.append_n("t", 2);
    b.fail_reads(Some(|q| {
        matches!(q, bubble_core::store::ReadQuery::Thread { .. })
    }));
    gossip(&mut a, &mut b, |_, _| true);
    assert!(event_seqs(&b.frames(on_b)).is_empty(), "the reload failed");
    b.fail_reads(None);
    b.input(bubble_core::Input::Recheck);
    assert_eq!(event_seqs(&b.frames(on_b)), [1, 2]);
}

#[test]
fn a_change_to_a_thread_nobody_follows_here_is_forgotten_not_read() {
    let (mut a, mut b) = pair();
    a.create_thread("alice", "t");
    b.append(ADMIN, "t", run_started("b-1")).expect(201);
    let reads = b.engine.metrics().store_reads;
    a.append_n("t", 3);
    gossip(&mut a, &mut b, |_, _| true);
    assert_eq!(b.engine.metrics().store_reads, reads, "nothing was read");
    let appended = b.append(ADMIN, "t", run_started("b-2")).expect(201);
    assert_eq!(
        appended.body["event"]["seq"], 5,
        "the next use reads it again"
    );
    assert_eq!(b.engine.metrics().write_conflicts, 0);
}

/// A node that has not heard of another node's commit yet reads the
/// durable head before it answers a page from past its own, or takes a
/// `fromSeq` past it for the seed's "sentinel beyond the head": the page
/// holds the acknowledged event, the subscription starts at `fromSeq`
/// (nothing below it is sent), and a real sentinel still opens at the
/// durable head and delivers what follows.
#[test]
fn a_from_seq_past_a_stale_head_is_decided_on_the_durable_one() {
    let (mut a, mut b) = clustered_pair();
    a.create_thread("alice", "t");
    a.append_n("t", 2);
    let watcher = subscribed(&mut b, "alice", "t");
    assert_eq!(event_seqs(&b.frames(watcher)), [1, 2]);
    a.take_broadcasts();
    a.append_n("t", 1);
    let said = a.take_broadcasts();

    let page = b.get("alice", "/v1/threads/t/events?fromSeq=3").expect(200);
    assert_eq!(page.body["events"][0]["seq"], 3, "{}", page.body);
    assert_eq!(page.body["nextSeq"], serde_json::Value::Null);

    let resuming = b.connect("alice");
    b.subscribe(resuming, "t", Some(4));
    let frames = b.frames(resuming);
    assert_eq!(
        frames[0]["type"], "thread.subscription_opened",
        "{frames:?}"
    );
    assert_eq!(
        frames[0]["throughSeq"], 3,
        "the durable head, not the cached 2"
    );
    assert!(event_seqs(&frames).is_empty(), "{frames:?}");
    assert_eq!(
        event_seqs(&b.frames(watcher)),
        [3],
        "the node read what it had not been told of"
    );

    let live_only = b.connect("alice");
    b.subscribe(live_only, "t", Some(1_000));
    let frames = b.frames(live_only);
    assert_eq!(frames[0]["throughSeq"], 3);
    assert!(event_seqs(&frames).is_empty(), "{frames:?}");

    for message in said {
        b.remote("a", message);
    }
    a.append_n("t", 2);
    for message in a.take_broadcasts() {
        b.remote("a", message);
    }
    assert_eq!(event_seqs(&b.frames(resuming)), [4, 5]);
    assert_eq!(event_seqs(&b.frames(live_only)), [4, 5]);
    assert_eq!(event_seqs(&b.frames(watcher)), [4, 5]);
}

/// A thread a node answered `404` for, then created on another node: the
/// first node, not told yet, does not take its cached absence for the
/// store's word, so the thread is there for it at once (the common "look,
/// create if missing, use" of a client behind a load balancer).
#[test]
fn a_thread_created_elsewhere_is_not_taken_for_absent() {
    let (mut a, mut b) = clustered_pair();
    b.get("alice", "/v1/threads/fresh").expect(404);
    a.create_thread("alice", "fresh");
    let thread = b.get("alice", "/v1/threads/fresh").expect(200);
    assert_eq!(thread.body["threadId"], "fresh");
    let appended = b.append("alice", "fresh", run_started("b-1")).expect(201);
    assert_eq!(appended.body["event"]["seq"], 1);
    b.get("alice", "/v1/threads/never").expect(404);
    b.get("alice", "/v1/threads/never").expect(404);
}

/// What another node committed and this one was not told of yet is
/// decided on the store, not on the cached record: a thread's snapshot,
/// a page from below the cached head, and a grant given there (on the
/// thread or on its parent) are there at once.
#[test]
fn reads_and_refusals_are_decided_on_the_durable_record() {
    let (mut a, mut b) = clustered_pair();
    a.create_thread("alice", "t");
    a.create_subthread("alice", "t-sub", "t");
    a.append_n("t", 2);
    assert_eq!(b.thread("t")["headSeq"], 2);
    b.get("bob", "/v1/threads/t").expect_error(404, "not_found");
    b.get("bob", "/v1/threads/t-sub")
        .expect_error(404, "not_found");
    a.take_broadcasts();

    a.append_n("t", 1);
    assert_eq!(
        b.thread("t")["headSeq"],
        3,
        "the durable head, not the cached 2"
    );
    let page = b.get("alice", "/v1/threads/t/events?fromSeq=2").expect(200);
    let seqs: Vec<&Value> = page.body["events"]
        .as_array()
        .expect("events")
        .iter()
        .map(|e| &e["seq"])
        .collect();
    assert_eq!(seqs, [2, 3], "{}", page.body);
    assert_eq!(page.body["nextSeq"], Value::Null);

    a.grant("t", "bob", "reader");
    let thread = b.get("bob", "/v1/threads/t").expect(200);
    assert!(thread.body["participants"].is_array(), "{}", thread.body);
    let inherited = b.get("bob", "/v1/threads/t-sub").expect(200);
    assert_eq!(inherited.body["parentThreadId"], "t");
    let on_b = subscribed(&mut b, "bob", "t-sub");
    let frames = b.frames(on_b);
    assert_eq!(
        frames[0]["type"], "thread.subscription_opened",
        "{frames:?}"
    );
    b.append("bob", "t", run_started("bob-1"))
        .expect_error(403, "forbidden");

    a.grant("t", "bob", "member");
    let appended = b.append("bob", "t", run_started("bob-2")).expect(201);
    assert_eq!(appended.body["event"]["seq"], 4, "{}", appended.body);
    b.get("carol", "/v1/threads/t")
        .expect_error(404, "not_found");
    b.get("carol", "/v1/threads/t")
        .expect_error(404, "not_found");
}

/// Dave, a reader of `t`, follows its subthread `t-sub` on `b`; `b` has
/// an append of its own in flight on each when `a` revokes his grant and
/// `b` is told (dave having unsubscribed first where `unsubscribed`).
/// Returns the frames dave got once `b`'s writes are durable.
fn revoked_above_writes_in_flight(unsubscribed: bool) -> Vec<Value> {
    let (mut a, mut b) = clustered_pair();
    a.create_thread("alice", "t");
    a.create_subthread("alice", "t-sub", "t");
    a.grant("t", "dave", "reader");
    let dave = subscribed(&mut b, "dave", "t-sub");
    let opened = b.frames(dave);
    assert_eq!(
        opened[0]["type"], "thread.subscription_opened",
        "{opened:?}"
    );
    a.take_broadcasts();

    b.hold_persistence();
    b.append_n_async("t", 1);
    b.append_n_async("t-sub", 1);
    if unsubscribed {
        b.unsubscribe(dave, "t-sub");
    }
    a.revoke("t", "dave");
    for message in a.take_broadcasts() {
        b.remote("a", message);
    }
    b.release_persistence();
    b.frames(dave)
}

/// A node told of a revocation on a parent while a write of its own is in
/// flight there cannot reload the parent yet: the event it holds for a
/// subthread's subscriber behind a durability fence waits for that reload,
/// which ends the subscription, so the revoked reader gets none.
#[test]
fn a_revocation_above_a_thread_with_writes_in_flight_holds_back_events_below() {
    let frames = revoked_above_writes_in_flight(false);
    assert!(event_seqs(&frames).is_empty(), "{frames:?}");
    assert_eq!(
        frames.last().map(|f| f["type"].clone()),
        Some(Value::from("thread.subscription_closed")),
        "{frames:?}"
    );
}

/// An event held behind a durability fence for a subthread subscription
/// that has ended is withdrawn when a change to the parent is learned from
/// elsewhere, as one held on the parent is: nothing says its reader could
/// still read it.
#[test]
fn a_revocation_above_withdraws_events_held_for_ended_subthread_subscriptions() {
    let frames = revoked_above_writes_in_flight(true);
    assert!(event_seqs(&frames).is_empty(), "{frames:?}");
}
