//! Contract cases: What a restart over the same data keeps.

use serde_json::{json, Value};

use super::node::{seqs, Node, START};
use super::ContractBackend;

/// After a restart the same threads, titles and events are served.
pub fn reopen_keeps_threads_and_events<C: ContractBackend>(backend: &C) {
    let mut node = Node::start(backend, START);
    node.create("alice", "thread-root", None).expect(201);
    node.create("alice", "thread-child", Some("thread-root"))
        .expect(201);
    node.create("alice", "thread-plain", None).expect(201);
    node.title("alice", "thread-root", json!("Q3 planning"))
        .expect(200);
    for n in 1..=4 {
        node.append("alice", "thread-child", &format!("run-{n}"), None)
            .expect(201);
    }
    let before: Vec<(Value, Vec<Value>)> = ["thread-root", "thread-child", "thread-plain"]
        .iter()
        .map(|t| (node.thread(t), node.history(t)))
        .collect();
    let mut node = node.restart(backend);
    let after: Vec<(Value, Vec<Value>)> = ["thread-root", "thread-child", "thread-plain"]
        .iter()
        .map(|t| (node.thread(t), node.history(t)))
        .collect();
    assert_eq!(after, before);
    // The creation rules still see the stored parents.
    node.create("alice", "thread-child", Some("thread-root"))
        .expect(200);
    node.create("alice", "thread-child", None)
        .expect_error(409, "conflict");
    node.create("alice", "thread-plain", Some("thread-root"))
        .expect_error(409, "conflict");
    // The title is remembered: setting it again appends nothing.
    node.title("alice", "thread-root", json!("Q3 planning"))
        .expect(200);
    assert_eq!(node.thread("thread-root")["headSeq"], 1);
}

/// After a restart grants and participants still decide access.
pub fn reopen_keeps_grants_and_participants<C: ContractBackend>(backend: &C) {
    let mut node = Node::start(backend, START);
    node.create("alice", "thread-1", None).expect(201);
    node.grant("alice", "thread-1", "bob", "member").expect_ok();
    node.grant("alice", "thread-1", "carol", "reader")
        .expect_ok();
    node.post("bob", "/v1/threads/thread-1/participants", json!({}))
        .expect_ok();
    node.create("alice", "thread-child", Some("thread-1"))
        .expect(201);
    let grants = node.grant_rows("thread-1");
    let thread = node.thread("thread-1");
    let mut node = node.restart(backend);
    assert_eq!(node.grant_rows("thread-1"), grants);
    assert_eq!(node.thread("thread-1"), thread);
    // Grants on the parent still confer read access on the child.
    node.get("carol", "/v1/threads/thread-child").expect(200);
    node.get("bob", "/v1/threads/thread-child").expect(200);
    node.append("bob", "thread-1", "run-1", None).expect(201);
    node.append("carol", "thread-1", "run-1", None)
        .expect_error(403, "forbidden");
    node.delete("bob", "/v1/threads/thread-1/participants/bob")
        .expect(204);
    assert_eq!(node.thread("thread-1")["participants"], json!([]));
}

/// After a restart a repeated idempotency key still appends nothing.
pub fn reopen_keeps_idempotency_keys<C: ContractBackend>(backend: &C) {
    let mut node = Node::start(backend, START);
    node.create("alice", "thread-1", None).expect(201);
    let first = node
        .append("alice", "thread-1", "run-1", Some("key-1"))
        .expect(201);
    let mut node = node.restart(backend);
    let again = node
        .append("alice", "thread-1", "run-1", Some("key-1"))
        .expect(200);
    assert_eq!(again["event"], first["event"]);
    assert_eq!(again["duplicate"], true);
    assert_eq!(node.thread("thread-1")["headSeq"], 1);
}

/// After a restart appends continue at the stored head, without gaps.
pub fn reopen_continues_seqs<C: ContractBackend>(backend: &C) {
    let mut node = Node::start(backend, START);
    node.create("alice", "thread-1", None).expect(201);
    node.append("alice", "thread-1", "run-1", None).expect(201);
    node.append("alice", "thread-1", "run-2", None).expect(201);
    let mut node = node.restart(backend);
    let next = node.append("alice", "thread-1", "run-3", None).expect(201);
    assert_eq!(next["event"]["seq"], 3);
    let mut node = node.restart(backend);
    node.create("alice", "thread-2", None).expect(201);
    assert_eq!(
        node.append("alice", "thread-1", "run-4", None).expect(201)["event"]["seq"],
        4
    );
    assert_eq!(seqs(&node.history("thread-1")), [1, 2, 3, 4]);
}
