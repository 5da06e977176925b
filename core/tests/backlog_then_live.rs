//! Backlog `fromSeq..=throughSeq`, then live `> throughSeq`: no gap and no
//! duplicate when appends race the registration and the paged replay.

mod common;

use common::{event_seqs, opened, Harness, ADMIN};

fn paged(page: usize) -> Harness {
    let mut config = common::config();
    config.limits.backlog_page = page;
    let mut h = Harness::with_config(config);
    h.create_thread(ADMIN, "thread-1");
    h.grant("thread-1", "alice", "reader");
    h
}

/// With replay paced by `Drained`, appends made during the replay arrive
/// after the backlog, in order, once.
#[test]
fn appends_during_paged_replay() {
    let mut h = paged(3);
    h.append_n("thread-1", 10);
    h.hold_drains();
    let conn = h.connect("alice");
    h.subscribe(conn, "thread-1", Some(2));
    let mut frames = h.frames(conn);
    assert_eq!(frames[0], opened("thread-1", 10));
    let mut rounds = 0;
    while h.wants_drained(conn) {
        h.append_n("thread-1", 1);
        h.drain(conn);
        frames.extend(h.frames(conn));
        rounds += 1;
        assert!(rounds < 50, "replay never finished");
    }
    assert!(
        rounds >= 3,
        "a 9-event backlog in pages of 3 needs several drains"
    );
    let head = h.thread("thread-1")["headSeq"].as_u64().expect("headSeq");
    assert_eq!(
        event_seqs(&frames, "thread-1"),
        (2..=head).collect::<Vec<_>>()
    );
    h.append_n("thread-1", 1);
    assert_eq!(event_seqs(&h.frames(conn), "thread-1"), [head + 1]);
}

/// Nothing beyond the first page is sent before the host reports the
/// socket drained.
#[test]
fn replay_waits_for_drained() {
    let mut h = paged(4);
    h.append_n("thread-1", 12);
    h.hold_drains();
    let conn = h.connect("alice");
    h.subscribe(conn, "thread-1", Some(1));
    let first = h.frames(conn);
    let sent = event_seqs(&first, "thread-1").len();
    assert!(
        (1..=4).contains(&sent),
        "at most one page before Drained, got {sent}"
    );
    assert!(h.wants_drained(conn));
    h.append_n("thread-1", 2);
    assert!(
        event_seqs(&h.frames(conn), "thread-1").is_empty(),
        "live waits behind the backlog"
    );
    h.release_drains();
    let rest = event_seqs(&h.frames(conn), "thread-1");
    let mut all = event_seqs(&first, "thread-1");
    all.extend(rest);
    assert_eq!(all, (1..=14).collect::<Vec<_>>());
}

/// Other subscriptions on the connection keep receiving live events while
/// one thread replays.
#[test]
fn replay_does_not_stall_other_threads_forever() {
    let mut h = paged(2);
    h.create_thread(ADMIN, "thread-2");
    h.grant("thread-2", "alice", "reader");
    h.append_n("thread-1", 6);
    h.hold_drains();
    let conn = h.connect("alice");
    h.subscribe(conn, "thread-2", Some(1));
    h.subscribe(conn, "thread-1", Some(1));
    h.append_n("thread-2", 1);
    h.release_drains();
    let frames = h.frames(conn);
    assert_eq!(event_seqs(&frames, "thread-1"), (1..=6).collect::<Vec<_>>());
    assert_eq!(event_seqs(&frames, "thread-2"), [1]);
}

/// A subscriber that disconnects mid-replay frees its subscription.
#[test]
fn disconnect_mid_replay() {
    let mut h = paged(2);
    h.append_n("thread-1", 6);
    h.hold_drains();
    let conn = h.connect("alice");
    h.subscribe(conn, "thread-1", Some(1));
    h.disconnect(conn);
    h.release_drains();
    h.append_n("thread-1", 1);
    let again = h.connect("alice");
    h.subscribe(again, "thread-1", Some(6));
    let frames = h.frames(again);
    assert_eq!(frames[0], opened("thread-1", 7));
    assert_eq!(event_seqs(&frames, "thread-1"), [6, 7]);
}

/// Unsubscribing mid-replay stops the replay; a new subscription starts
/// clean.
#[test]
fn unsubscribe_mid_replay() {
    let mut h = paged(2);
    h.append_n("thread-1", 8);
    h.hold_drains();
    let conn = h.connect("alice");
    h.subscribe(conn, "thread-1", Some(1));
    h.frames(conn);
    h.unsubscribe(conn, "thread-1");
    h.release_drains();
    assert!(
        event_seqs(&h.frames(conn), "thread-1").is_empty(),
        "replay stopped"
    );
    h.subscribe(conn, "thread-1", Some(7));
    let frames = h.frames(conn);
    assert_eq!(frames[0], opened("thread-1", 8));
    assert_eq!(event_seqs(&frames, "thread-1"), [7, 8]);
}
