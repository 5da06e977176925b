//! `GET /v1/threads/:id/messages` through the engine: the answer is always
//! the fold from scratch of the thread's durable events through the
//! answer's `throughSeq`, whatever happened before it (appends made
//! durable one by one and folded as they commit, appends not yet durable,
//! the thread evicted from the cache, folds dropped for the cache budget,
//! rebuilds from the store in small pages, reads completed out of order,
//! restarts, another engine appending to the same store).

mod common;

use bubble_core::fold::MessageFold;
use bubble_core::http::Method;
use bubble_core::store::{Backend, MemoryStore, ReadQuery, ReadResult};
use bubble_core::{Config, Millis, ThreadId};
use common::*;
use proptest::prelude::*;
use serde_json::{json, Value};

const THREAD: &str = "t";

fn messages_path(thread: &str) -> String {
    format!("/v1/threads/{thread}/messages")
}

/// The fold from scratch of `thread`'s first `through` durable events.
fn scratch(store: &MemoryStore, thread: &str, through: u64) -> Value {
    let mut fold = MessageFold::new();
    if through > 0 {
        let query = ReadQuery::Events {
            thread_id: ThreadId::parse(thread).expect("thread id"),
            from_seq: 1,
            through_seq: through,
            limit: usize::try_from(through).expect("small"),
        };
        let Ok(ReadResult::Events(events)) = store.read(&query) else {
            panic!("the memory store reads events");
        };
        assert_eq!(
            events.len() as u64,
            through,
            "the answer's throughSeq is durable"
        );
        for event in &events {
            fold.apply(event.seq, &event.json).expect("in order");
        }
    }
    serde_json::from_str(&fold.to_json()).expect("fold JSON")
}

fn head(store: &MemoryStore, thread: &str) -> u64 {
    let query = ReadQuery::Thread {
        thread_id: ThreadId::parse(thread).expect("thread id"),
    };
    match store.read(&query) {
        Ok(ReadResult::Thread(Some(record))) => record.head_seq,
        _ => 0,
    }
}

fn part(run: &str, chunk: Value) -> Value {
    json!({"type": "message_part", "runId": run, "part": chunk, "version": "ai-sdk-v6"})
}

/// One event of a random conversation: chunks of a few runs over small id
/// pools (so deltas sometimes hit an open part and sometimes do not),
/// approvals, and run boundaries.
fn event() -> impl Strategy<Value = Value> {
    let run = prop::sample::select(vec!["r0", "r1", "r2"]);
    let id = prop::sample::select(vec!["a", "b"]);
    let call = prop::sample::select(vec!["c0", "c1"]);
    let msg = prop::sample::select(vec!["m0", "m1", "m2"]);
    let word = prop::sample::select(vec!["Hi", " there", "{\"x\":", "[1,", "\"é", "}", "tr"]);
    (run, id, call, msg, word, 0u8..24, any::<bool>()).prop_map(|(run, id, call, msg, word, pick, flag)| {
        let chunk = match pick {
            0 => json!({"type": "start", "messageId": msg}),
            1 => json!({"type": "start", "messageMetadata": {"k": {"n": word}}}),
            2 => json!({"type": "text-start", "id": id}),
            3 | 4 => json!({"type": "text-delta", "id": id, "delta": word}),
            5 => json!({"type": "text-end", "id": id}),
            6 => json!({"type": "reasoning-start", "id": id}),
            7 => json!({"type": "reasoning-delta", "id": id, "delta": word}),
            8 => json!({"type": "start-step"}),
            9 => json!({"type": "finish-step"}),
            10 => json!({"type": "tool-input-start", "toolCallId": call, "toolName": "w", "dynamic": flag}),
            11 | 12 => json!({"type": "tool-input-delta", "toolCallId": call, "inputTextDelta": word}),
            13 => json!({"type": "tool-input-available", "toolCallId": call, "toolName": "w", "input": {"w": word}}),
            14 => json!({"type": "tool-approval-request", "approvalId": format!("ap-{call}"), "toolCallId": call}),
            15 => json!({"type": "tool-output-available", "toolCallId": call, "output": word, "preliminary": flag}),
            16 => json!({"type": "tool-output-error", "toolCallId": call, "errorText": word}),
            17 => json!({"type": "data-progress", "id": id, "data": word, "transient": flag}),
            18 => json!({"type": "error", "errorText": word}),
            19 => json!({"type": "finish", "messageMetadata": {"k": {"m": flag}}}),
            20 => json!({"type": "text-delta", "id": id, "delta": 7}),
            21 => {
                return json!({"type": "tool_call_approval", "runId": run, "toolCallId": call, "approved": flag});
            }
            22 => return json!({"type": "run_finished", "runId": run, "status": "completed"}),
            _ => return json!({"type": "run_started", "runId": run}),
        };
        part(run, chunk)
    })
}

#[derive(Debug, Clone)]
enum Op {
    /// Appends an event to the thread (from the first engine).
    Append(Value),
    /// Appends events whose batches are held back, reads, then releases.
    Held(Vec<Value>),
    /// Reads the messages and checks them.
    Get,
    /// Reads the messages of another thread (folds compete for the budget).
    GetOther,
    /// Touches other threads until the thread leaves the cache.
    Evict,
    /// Restarts the first engine over the same store.
    Restart,
    /// Appends through the second engine; `true`: the first hears of it.
    Remote(Value, bool),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        12 => event().prop_map(Op::Append),
        1 => prop::collection::vec(event(), 1..4).prop_map(Op::Held),
        4 => Just(Op::Get),
        1 => Just(Op::GetOther),
        1 => Just(Op::Evict),
        1 => Just(Op::Restart),
        2 => (event(), any::<bool>()).prop_map(|(e, told)| Op::Remote(e, told)),
    ]
}

fn config(page: usize, budget: usize) -> Config {
    let mut config = common::config();
    config.limits.backlog_page = page;
    config.limits.thread_cache = 4;
    config.limits.fold_cache_bytes = budget;
    config
}

#[track_caller]
fn check_get(h: &mut Harness, store: &MemoryStore, thread: &str) -> u64 {
    let resp = h.get("alice", &messages_path(thread)).expect(200);
    let through = resp.body["throughSeq"].as_u64().expect("throughSeq");
    assert!(through <= head(store, thread));
    assert_eq!(
        resp.body,
        scratch(store, thread, through),
        "after seq {through}"
    );
    through
}

fn run(ops: Vec<Op>, page: usize, budget: usize, seed: u64) {
    let store = MemoryStore::default();
    let mut a = Harness::engine_over(config(page, budget), store.clone(), Millis(T0), 1);
    let mut b = Harness::engine_over(config(page, budget), store.clone(), Millis(T0), 2);
    a.shuffle_reads(seed);
    a.create_thread("alice", THREAD);
    a.create_thread("alice", "other");
    a.append(
        "alice",
        "other",
        part("o", json!({"type": "text-start", "id": "x"})),
    )
    .expect(201);
    // Another engine appended and this one was not told: it may lag.
    let mut stale = false;
    for op in ops {
        match op {
            Op::Append(event) => {
                a.append("alice", THREAD, event).expect(201);
            }
            Op::Held(events) => {
                a.hold_persistence();
                let path = format!("/v1/threads/{THREAD}/events");
                for event in &events {
                    a.send_request(Method::Post, Some("alice"), &path, Some(event), None);
                }
                // Decided now, answered once the appends it was authorized
                // beside are durable. An append that meets another writer's
                // event is retried after a reload, so its read may be
                // answered after the release: the bound is what the store
                // holds when the answer arrives, and the body must equal the
                // fold of exactly those stored events.
                let read = a.send_request(
                    Method::Get,
                    Some("alice"),
                    &messages_path(THREAD),
                    None,
                    None,
                );
                a.release_persistence();
                let resp = a.response(read).expect("answered").expect(200);
                let through = resp.body["throughSeq"].as_u64().expect("throughSeq");
                assert!(
                    through <= head(&store, THREAD),
                    "a fold includes only durable events"
                );
                assert_eq!(resp.body, scratch(&store, THREAD, through));
            }
            Op::Get => {
                let through = check_get(&mut a, &store, THREAD);
                if !stale {
                    assert_eq!(
                        through,
                        head(&store, THREAD),
                        "a fold a writer knows of is current"
                    );
                }
            }
            Op::GetOther => {
                check_get(&mut a, &store, "other");
            }
            Op::Evict => {
                for i in 0..6 {
                    let _ = a.get("alice", &format!("/v1/threads/x-{i}"));
                }
            }
            Op::Restart => {
                a = Harness::engine_over(config(page, budget), store.clone(), a.now(), 1);
                a.shuffle_reads(seed);
                stale = false;
            }
            Op::Remote(event, told) => {
                b.append("alice", THREAD, event).expect(201);
                let committed = b.take_committed();
                stale |= !told;
                if told {
                    for (thread, head, version) in committed {
                        a.changed(&thread, head, version);
                    }
                }
                check_get(&mut a, &store, THREAD);
            }
        }
    }
    check_get(&mut a, &store, THREAD);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn the_served_fold_is_the_fold_from_scratch(
        ops in prop::collection::vec(op(), 1..120),
        page in 1usize..6,
        budget in prop::sample::select(vec![600usize, 64 * 1024 * 1024]),
        seed in any::<u64>(),
    ) {
        run(ops, page, budget, seed);
    }
}

#[test]
fn readers_see_it_and_others_get_what_a_missing_thread_gets() {
    let mut h = Harness::new();
    h.create_thread("alice", THREAD);
    h.append(
        "alice",
        THREAD,
        part("r", json!({"type": "text-start", "id": "t"})),
    )
    .expect(201);
    h.grant(THREAD, "bob", "reader");
    let want = json!({"messages": [{"id": "r", "role": "assistant",
        "parts": [{"type": "text", "text": "", "state": "streaming"}]}], "throughSeq": 1,
        "activeRuns": [{"runId": "r", "messageId": "r", "fromSeq": 1}]});
    assert_eq!(
        h.get("alice", &messages_path(THREAD)).expect(200).body,
        want
    );
    assert_eq!(h.get("bob", &messages_path(THREAD)).expect(200).body, want);
    let hidden = h
        .get("carol", &messages_path(THREAD))
        .expect_error(404, "not_found");
    let missing = h
        .get("carol", &messages_path("u"))
        .expect_error(404, "not_found");
    assert_eq!(
        hidden.message().replace("\"t\"", "\"u\""),
        missing.message()
    );
    h.post("alice", &messages_path(THREAD), json!({}))
        .expect_error(405, "invalid_request");
    let resp = h.raw_request(Method::Get, None, &messages_path(THREAD), b"");
    assert_eq!((resp.status, resp.code()), (401, "unauthorized"));
    assert_eq!(
        h.get("alice", "/v1/threads/t/messages/x")
            .expect_error(404, "not_found")
            .code(),
        "not_found"
    );
}

#[test]
fn a_fold_over_the_limit_is_refused_and_the_server_keeps_serving() {
    let mut config = common::config();
    config.limits.max_fold_bytes = 2000;
    let mut h = Harness::with_config(config.clone());
    h.create_thread("alice", THREAD);
    h.create_thread("alice", "small");
    let delta = |i: usize| {
        part(
            "r",
            json!({"type": "text-delta", "id": "t", "delta": format!("{i:0>200}")}),
        )
    };
    h.append(
        "alice",
        THREAD,
        part("r", json!({"type": "text-start", "id": "t"})),
    )
    .expect(201);
    h.get("alice", &messages_path(THREAD)).expect(200);
    for i in 0..8 {
        h.append("alice", THREAD, delta(i)).expect(201);
    }
    let refused = h
        .get("alice", &messages_path(THREAD))
        .expect_error(413, "payload_too_large");
    assert!(
        refused.message().contains("2000 bytes"),
        "{}",
        refused.message()
    );
    h.get("alice", &messages_path(THREAD))
        .expect_error(413, "payload_too_large");
    assert_eq!(
        h.get("alice", &messages_path("small")).expect(200).body,
        json!({"messages": [], "throughSeq": 0, "activeRuns": []})
    );
    // Rebuilt from the store after a restart, it is refused the same way.
    let mut h = Harness::over(config, h.store.clone(), h.now());
    h.get("alice", &messages_path(THREAD))
        .expect_error(413, "payload_too_large");
    h.get("alice", &format!("/v1/threads/{THREAD}/events"))
        .expect(200);
}

#[test]
fn events_not_yet_durable_are_not_folded() {
    let mut h = Harness::new();
    h.create_thread("alice", THREAD);
    h.append(
        "alice",
        THREAD,
        part("r", json!({"type": "text-start", "id": "t"})),
    )
    .expect(201);
    assert_eq!(
        h.get("alice", &messages_path(THREAD)).expect(200).body["throughSeq"],
        1
    );
    h.hold_persistence();
    let path = format!("/v1/threads/{THREAD}/events");
    let delta = part("r", json!({"type": "text-delta", "id": "t", "delta": "x"}));
    let pending = h.send_request(Method::Post, Some("alice"), &path, Some(&delta), None);
    let read = h.send_request(
        Method::Get,
        Some("alice"),
        &messages_path(THREAD),
        None,
        None,
    );
    assert!(
        h.response(read).is_none(),
        "answered beside a write not yet durable"
    );
    h.release_persistence();
    h.response(pending).expect("answered").expect(201);
    let before = h.response(read).expect("answered").expect(200).body;
    assert_eq!(before["throughSeq"], 1);
    assert_eq!(before["messages"][0]["parts"][0]["text"], "");
    let after = h.get("alice", &messages_path(THREAD)).expect(200).body;
    assert_eq!(after["throughSeq"], 2);
    assert_eq!(after["messages"][0]["parts"][0]["text"], "x");
}

#[test]
fn a_cached_fold_follows_commits_without_reading_the_store_again() {
    let mut config = common::config();
    config.limits.backlog_page = 2;
    let mut h = Harness::with_config(config);
    h.create_thread("alice", THREAD);
    h.append(
        "alice",
        THREAD,
        part("r", json!({"type": "text-start", "id": "t"})),
    )
    .expect(201);
    let delta = |d: &str| part("r", json!({"type": "text-delta", "id": "t", "delta": d}));
    for word in ["a", "b", "c", "d"] {
        h.append("alice", THREAD, delta(word)).expect(201);
    }
    // Built from the store: three pages of at most two events.
    let reads = h.engine.metrics().store_reads;
    h.get("alice", &messages_path(THREAD)).expect(200);
    assert_eq!(h.engine.metrics().store_reads - reads, 3);
    for word in ["e", "f", "g"] {
        h.append("alice", THREAD, delta(word)).expect(201);
    }
    let reads = h.engine.metrics().store_reads;
    let body = h.get("alice", &messages_path(THREAD)).expect(200).body;
    assert_eq!(
        h.engine.metrics().store_reads,
        reads,
        "folded as they committed"
    );
    assert_eq!(body["throughSeq"], 8);
    assert_eq!(body["messages"][0]["parts"][0]["text"], "abcdefg");
}
