//! Contract cases: Event seqs, idempotency keys and history pages.

use serde_json::{json, Value};

use super::node::{assert_rfc3339_millis, seqs, Node, START};
use super::ContractBackend;

/// Seqs run 1, 2, … without gaps; each persisted event carries `seq`,
/// `threadId`, `createdAt` and its body verbatim.
pub fn seqs_are_gapless<C: ContractBackend>(backend: &C) {
    let mut node = Node::start(backend, START);
    node.create("alice", "thread-1", None).expect(201);
    node.create("alice", "thread-2", None).expect(201);
    let part =
        json!({ "type": "text-delta", "id": "m1", "delta": "Hel", "extra": { "k": [1, 2] } });
    let bodies = [
        json!({ "type": "run_started", "runId": "run-1" }),
        json!({ "type": "message_part", "runId": "run-1", "part": part, "version": "ai-sdk-v6" }),
        json!({ "type": "tool_call_approval", "runId": "run-1", "toolCallId": "c1", "approved": false, "reason": "no" }),
        json!({ "type": "run_finished", "runId": "run-1", "status": "completed" }),
    ];
    for (i, body) in bodies.iter().enumerate() {
        let event = node
            .post("alice", "/v1/threads/thread-1/events", body.clone())
            .expect(201);
        assert_eq!(event["event"]["seq"], i + 1);
        node.append("alice", "thread-2", "run-x", None).expect(201);
    }
    let history = node.history("thread-1");
    assert_eq!(seqs(&history), [1, 2, 3, 4]);
    for (event, body) in history.iter().zip(&bodies) {
        assert_eq!(event["threadId"], "thread-1");
        assert_eq!(event["principalId"], "alice");
        assert_rfc3339_millis(&event["createdAt"]);
        for (key, value) in body.as_object().expect("object") {
            assert_eq!(&event[key], value, "field {key} of {event}");
        }
    }
    assert_eq!(seqs(&node.history("thread-2")), [1, 2, 3, 4]);
}

/// A repeated idempotency key returns the original event and appends nothing.
pub fn idempotency_keys<C: ContractBackend>(backend: &C) {
    let mut node = Node::start(backend, START);
    node.create("alice", "thread-1", None).expect(201);
    node.create("alice", "thread-2", None).expect(201);
    let first = node
        .append("alice", "thread-1", "run-1", Some("key-1"))
        .expect(201);
    node.append("alice", "thread-1", "run-2", None).expect(201);
    let again = node
        .append("alice", "thread-1", "run-1", Some("key-1"))
        .expect(200);
    assert_eq!(again["event"], first["event"]);
    assert_eq!(again["duplicate"], true);
    assert_eq!(node.thread("thread-1")["headSeq"], 2);
    // Keys are scoped to their thread.
    let other = node
        .append("alice", "thread-2", "run-1", Some("key-1"))
        .expect(201);
    assert_eq!(other["event"]["seq"], 1);
    let next = node
        .append("alice", "thread-1", "run-3", Some("key-2"))
        .expect(201);
    assert_eq!(next["event"]["seq"], 3);
    assert_eq!(seqs(&node.history("thread-1")), [1, 2, 3]);
}

/// History pages: `fromSeq`, `limit`, `nextSeq` null once the page reaches
/// the head; bad parameters are `invalid_request`.
pub fn history_paging<C: ContractBackend>(backend: &C) {
    let mut node = Node::start(backend, START);
    node.create("alice", "thread-1", None).expect(201);
    for n in 1..=7 {
        node.append("alice", "thread-1", &format!("run-{n}"), None)
            .expect(201);
    }
    let page = |node: &mut Node<C::Store>, query: &str| {
        node.get("alice", &format!("/v1/threads/thread-1/events?{query}"))
            .expect(200)
    };
    let p = page(&mut node, "fromSeq=1&limit=3");
    assert_eq!(seqs(p["events"].as_array().expect("events")), [1, 2, 3]);
    assert_eq!(p["nextSeq"], 4);
    let p = page(&mut node, "fromSeq=4&limit=3");
    assert_eq!(seqs(p["events"].as_array().expect("events")), [4, 5, 6]);
    assert_eq!(p["nextSeq"], 7);
    let p = page(&mut node, "fromSeq=7&limit=3");
    assert_eq!(seqs(p["events"].as_array().expect("events")), [7]);
    assert_eq!(p["nextSeq"], Value::Null);
    let p = page(&mut node, "fromSeq=5&limit=3");
    assert_eq!(seqs(p["events"].as_array().expect("events")), [5, 6, 7]);
    assert_eq!(p["nextSeq"], Value::Null);
    let p = page(&mut node, "fromSeq=8");
    assert_eq!(p["events"], json!([]));
    assert_eq!(p["nextSeq"], Value::Null);
    let p = node.get("alice", "/v1/threads/thread-1/events").expect(200);
    assert_eq!(
        seqs(p["events"].as_array().expect("events")),
        [1, 2, 3, 4, 5, 6, 7]
    );
    assert_eq!(p["nextSeq"], Value::Null);
    let p = page(&mut node, "limit=1000");
    assert_eq!(p["events"].as_array().map(Vec::len), Some(7));
    for bad in [
        "fromSeq=0",
        "limit=0",
        "limit=1001",
        "fromSeq=abc",
        "limit=-1",
        "fromSeq=1.5",
    ] {
        node.get("alice", &format!("/v1/threads/thread-1/events?{bad}"))
            .expect_error(400, "invalid_request");
    }
}

/// A read that fails answers `internal` to the one request that waited for
/// it; the engine and the data stay as they were.
pub fn failed_read_answers_internal<C: ContractBackend>(backend: &C) {
    let mut node = Node::start(backend, START);
    node.create("alice", "thread-1", None).expect(201);
    for run in ["run-1", "run-2"] {
        node.append("alice", "thread-1", run, None).expect(201);
    }
    node.fail_reads(Some("events"));
    node.get("alice", "/v1/threads/thread-1/events?fromSeq=1")
        .expect_error(500, "internal");
    assert_eq!(node.thread("thread-1")["headSeq"], 2);
    node.append("alice", "thread-1", "run-3", None).expect(201);
    node.fail_reads(None);
    assert_eq!(seqs(&node.history("thread-1")), [1, 2, 3]);
    node.fail_reads(Some("thread"));
    node.get("alice", "/v1/threads/unknown")
        .expect_error(500, "internal");
    node.fail_reads(None);
    node.get("alice", "/v1/threads/unknown")
        .expect_error(404, "not_found");
}
