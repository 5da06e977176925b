//! Every frame example of bubble-websocket-protocol.txt, through the
//! engine's WebSocket inputs.

mod common;

use common::{assert_error, by, closed, event_seqs, message_part, opened, Harness, ADMIN};
use serde_json::json;

/// A harness with `thread-1` holding `n` events, readable by alice.
fn thread_with(n: usize) -> Harness {
    let mut h = Harness::new();
    h.create_thread(ADMIN, "thread-1");
    h.grant("thread-1", "alice", "reader");
    h.grant("thread-1", "bot-research", "member");
    h.append_n("thread-1", n);
    h
}

/// `{ "type": "thread.subscribe", "threadId": "thread-1", "fromSeq": 18 }`
/// → opened with `throughSeq: 42`, backlog 18..=42, then live 43.
#[test]
fn subscribe_opened_backlog_then_live() {
    let mut h = thread_with(42);
    let conn = h.connect("alice");
    h.send(
        conn,
        json!({ "type": "thread.subscribe", "threadId": "thread-1", "fromSeq": 18 }),
    );
    let frames = h.frames(conn);
    assert_eq!(frames[0], opened("thread-1", 42));
    assert_eq!(
        event_seqs(&frames, "thread-1"),
        (18..=42).collect::<Vec<_>>()
    );
    assert_eq!(
        frames.len(),
        1 + 25,
        "only opened and the backlog: {frames:?}"
    );
    for frame in &frames[1..] {
        let keys: Vec<&String> = frame.as_object().expect("object").keys().collect();
        assert_eq!(
            keys.len(),
            3,
            "thread.event has type, threadId, event: {frame}"
        );
        assert_eq!(frame["type"], "thread.event");
        assert_eq!(frame["event"]["threadId"], "thread-1");
        assert!(frame["event"]["createdAt"].is_string());
    }
    h.append(ADMIN, "thread-1", common::run_started("run-43"))
        .expect(201);
    let live = h.frames(conn);
    assert_eq!(event_seqs(&live, "thread-1"), [43]);
    assert_eq!(live.len(), 1);
    assert_eq!(live[0]["event"]["runId"], "run-43");
}

/// `fromSeq` defaults to 1.
#[test]
fn from_seq_defaults_to_one() {
    let mut h = thread_with(3);
    let conn = h.connect("alice");
    h.send(
        conn,
        json!({ "type": "thread.subscribe", "threadId": "thread-1" }),
    );
    let frames = h.frames(conn);
    assert_eq!(frames[0], opened("thread-1", 3));
    assert_eq!(event_seqs(&frames, "thread-1"), [1, 2, 3]);
}

/// A sentinel beyond the head skips the backlog; live events still arrive.
#[test]
fn from_seq_beyond_head_is_live_only() {
    let mut h = thread_with(3);
    let conn = h.connect("alice");
    h.subscribe(conn, "thread-1", Some(1_000_000));
    assert_eq!(h.frames(conn), [opened("thread-1", 3)]);
    h.append_n("thread-1", 1);
    assert_eq!(event_seqs(&h.frames(conn), "thread-1"), [4]);
}

/// An empty thread opens with `throughSeq: 0`.
#[test]
fn empty_thread_opens_at_zero() {
    let mut h = thread_with(0);
    let conn = h.connect("alice");
    h.subscribe(conn, "thread-1", Some(1));
    assert_eq!(h.frames(conn), [opened("thread-1", 0)]);
}

/// Re-subscribing gets the seed's `conflict` frame; the first subscription
/// goes on.
#[test]
fn duplicate_subscribe_conflict() {
    let mut h = thread_with(2);
    let conn = h.connect("alice");
    h.subscribe(conn, "thread-1", Some(1));
    h.frames(conn);
    h.subscribe(conn, "thread-1", Some(2));
    assert_eq!(
        h.frames(conn),
        [
            json!({ "type": "error", "threadId": "thread-1", "code": "conflict",
            "message": "Connection is already subscribed to thread \"thread-1\"." })
        ]
    );
    h.append_n("thread-1", 1);
    assert_eq!(event_seqs(&h.frames(conn), "thread-1"), [3]);
}

/// `thread.unsubscribe` is silent and stops delivery; resubscribing works.
#[test]
fn unsubscribe_is_silent() {
    let mut h = thread_with(2);
    let conn = h.connect("alice");
    h.subscribe(conn, "thread-1", Some(1));
    h.frames(conn);
    h.send(
        conn,
        json!({ "type": "thread.unsubscribe", "threadId": "thread-1" }),
    );
    assert_eq!(h.frames(conn), Vec::<serde_json::Value>::new());
    h.append_n("thread-1", 2);
    assert!(h.frames(conn).is_empty(), "no events after unsubscribe");
    h.subscribe(conn, "thread-1", Some(3));
    let frames = h.frames(conn);
    assert_eq!(frames[0], opened("thread-1", 4));
    assert_eq!(event_seqs(&frames, "thread-1"), [3, 4]);
}

/// The seed's append frame: no response to the appender, the event reaches
/// subscribers on other connections (and on the appender's own, when it is
/// subscribed) with its seq and createdAt.
#[test]
fn fire_and_forget_append() {
    let mut h = thread_with(0);
    let reader = h.connect("alice");
    h.subscribe(reader, "thread-1", Some(1));
    h.frames(reader);
    let bot = h.connect("bot-research");
    let part = json!({ "type": "text-delta", "id": "msg-1", "delta": "Hello" });
    h.send(
        bot,
        json!({ "type": "thread.append", "threadId": "thread-1",
            "event": { "type": "message_part", "principalId": "bot-research",
                "runId": "run-001", "part": part, "version": "ai-sdk-v6" } }),
    );
    assert!(h.frames(bot).is_empty(), "appends are never acknowledged");
    let frames = h.frames(reader);
    assert_eq!(frames.len(), 1);
    let event = &frames[0]["event"];
    assert_eq!(frames[0]["type"], "thread.event");
    assert_eq!(frames[0]["threadId"], "thread-1");
    assert_eq!(event["seq"], 1);
    assert_eq!(event["type"], "message_part");
    assert_eq!(event["principalId"], "bot-research");
    assert_eq!(event["runId"], "run-001");
    assert_eq!(event["part"], part);
    assert_eq!(event["version"], "ai-sdk-v6");
    assert_eq!(event["createdAt"], bubble_core::clock::rfc3339(h.now()));
    // Subscribed, the appender sees its own event come back.
    h.subscribe(bot, "thread-1", Some(2));
    h.frames(bot);
    h.ws_append(
        bot,
        "thread-1",
        by("bot-research", message_part("run-001", " world")),
    );
    assert_eq!(event_seqs(&h.frames(bot), "thread-1"), [2]);
    assert_eq!(event_seqs(&h.frames(reader), "thread-1"), [2]);
}

/// The seed's forbidden frame; the connection and its subscription go on.
#[test]
fn append_forbidden_message() {
    let mut h = thread_with(1);
    let conn = h.connect("alice");
    h.subscribe(conn, "thread-1", Some(1));
    h.frames(conn);
    h.ws_append(conn, "thread-1", by("alice", message_part("run-001", "hi")));
    assert_eq!(
        h.frames(conn),
        [
            json!({ "type": "error", "threadId": "thread-1", "code": "forbidden",
            "message": "Principal \"alice\" lacks \"events.message_part\" on thread \"thread-1\"." })
        ]
    );
    h.append_n("thread-1", 1);
    assert_eq!(event_seqs(&h.frames(conn), "thread-1"), [2]);
}

/// A valid-JSON frame that is not an object: the seed's message, unscoped.
#[test]
fn frame_body_must_be_a_json_object() {
    let mut h = thread_with(0);
    let conn = h.connect("alice");
    for text in ["[1,2]", "\"thread.subscribe\"", "42", "null", "true"] {
        h.send_text(conn, text);
        assert_eq!(
            h.frames(conn),
            [json!({ "type": "error", "code": "invalid_request",
                "message": "Frame body must be a JSON object." })],
            "frame {text}"
        );
    }
    h.subscribe(conn, "thread-1", Some(1));
    assert_eq!(h.frames(conn), [opened("thread-1", 0)]);
}

/// The seed's scoped `Frame body must be a JSON object.` example: a
/// `thread.append` whose `event` is not an object.
#[test]
fn append_event_not_an_object_is_scoped() {
    let mut h = thread_with(0);
    let conn = h.connect("bot-research");
    for event in [json!("text"), json!([1]), json!(5), json!(null)] {
        h.send(
            conn,
            json!({ "type": "thread.append", "threadId": "thread-1", "event": event }),
        );
        let frames = h.frames(conn);
        assert_eq!(frames.len(), 1, "{frames:?}");
        assert_error(&frames[0], Some("thread-1"), "invalid_request");
    }
    h.send(
        conn,
        json!({ "type": "thread.append", "threadId": "thread-1", "event": "text" }),
    );
    assert_eq!(
        h.frames(conn),
        [
            json!({ "type": "error", "threadId": "thread-1", "code": "invalid_request",
            "message": "Frame body must be a JSON object." })
        ]
    );
    assert_eq!(h.thread("thread-1")["headSeq"], 0);
}

/// A refused subscribe: scoped `not_found`, then the seed's
/// `subscription_closed` frame; unknown and unreadable look the same.
#[test]
fn subscription_closed_not_found() {
    let mut h = thread_with(1);
    let conn = h.connect("carol");
    for thread in ["thread-1", "thread-missing"] {
        h.subscribe(conn, thread, Some(1));
        let frames = h.frames(conn);
        assert_eq!(frames.len(), 2, "{frames:?}");
        assert_error(&frames[0], Some(thread), "not_found");
        assert_eq!(frames[1], closed(thread, "not_found"));
        assert_eq!(
            frames[1],
            json!({ "type": "thread.subscription_closed", "threadId": thread, "reason": "not_found" })
        );
    }
    // A refused subscribe leaves no subscription behind.
    h.grant("thread-1", "carol", "reader");
    h.subscribe(conn, "thread-1", Some(1));
    let frames = h.frames(conn);
    assert_eq!(frames[0], opened("thread-1", 1));
}

/// The worked example: one connection multiplexes threads; every frame
/// carries its threadId.
#[test]
fn multiplexed_threads() {
    let mut h = thread_with(2);
    h.create_thread(ADMIN, "thread-2");
    h.grant("thread-2", "alice", "reader");
    h.append_n("thread-2", 1);
    let conn = h.connect("alice");
    h.subscribe(conn, "thread-1", Some(1));
    h.subscribe(conn, "thread-2", Some(1));
    let frames = h.frames(conn);
    assert_eq!(event_seqs(&frames, "thread-1"), [1, 2]);
    assert_eq!(event_seqs(&frames, "thread-2"), [1]);
    assert!(frames.iter().all(|f| f["threadId"].is_string()));
    h.unsubscribe(conn, "thread-1");
    h.append_n("thread-1", 1);
    h.append_n("thread-2", 1);
    let frames = h.frames(conn);
    assert_eq!(event_seqs(&frames, "thread-1"), Vec::<u64>::new());
    assert_eq!(event_seqs(&frames, "thread-2"), [2]);
}

/// The catch-up strategy: page history over HTTP until `nextSeq` is null,
/// then subscribe from the next unseen seq; `throughSeq` dedupes the overlap.
#[test]
fn http_paging_then_subscribe() {
    let mut h = thread_with(7);
    let mut seen = Vec::new();
    let mut from = 1;
    loop {
        let page = h
            .get(
                "alice",
                &format!("/v1/threads/thread-1/events?fromSeq={from}&limit=3"),
            )
            .expect(200)
            .body;
        let events = page["events"].as_array().expect("events").clone();
        seen.extend(events.iter().map(|e| e["seq"].as_u64().expect("seq")));
        match page["nextSeq"].as_u64() {
            Some(next) => from = next,
            None => break,
        }
    }
    assert_eq!(seen, (1..=7).collect::<Vec<_>>());
    h.append_n("thread-1", 1);
    let conn = h.connect("alice");
    h.subscribe(conn, "thread-1", Some(8));
    let frames = h.frames(conn);
    assert_eq!(frames[0], opened("thread-1", 8));
    assert_eq!(event_seqs(&frames, "thread-1"), [8]);
}

/// An idempotency key on the WebSocket event: a repeat appends nothing.
#[test]
fn ws_append_idempotency_key() {
    let mut h = thread_with(0);
    let conn = h.connect("bot-research");
    h.subscribe(conn, "thread-1", Some(1));
    h.frames(conn);
    let mut event = message_part("run-001", "Hello");
    event["idempotencyKey"] = json!("part-1");
    h.ws_append(conn, "thread-1", event.clone());
    h.ws_append(conn, "thread-1", event);
    let frames = h.frames(conn);
    assert_eq!(event_seqs(&frames, "thread-1"), [1], "{frames:?}");
    assert!(frames.iter().all(|f| f["type"] != "error"), "{frames:?}");
    assert_eq!(h.thread("thread-1")["headSeq"], 1);
}

/// After a restart over the same store, subscriptions replay the stored
/// history and go on live.
#[test]
fn restart_then_subscribe() {
    let h = thread_with(3);
    let store = h.store.clone();
    let later = h.now().plus(60_000);
    let mut h = Harness::over(common::config(), store, later);
    let conn = h.connect("alice");
    h.subscribe(conn, "thread-1", Some(2));
    let frames = h.frames(conn);
    assert_eq!(frames[0], opened("thread-1", 3));
    assert_eq!(event_seqs(&frames, "thread-1"), [2, 3]);
    h.append_n("thread-1", 1);
    assert_eq!(event_seqs(&h.frames(conn), "thread-1"), [4]);
}
