//! Contract cases: Thread creation, snapshots, titles and `headSeq`.

use serde_json::{json, Value};

use super::node::{assert_keys, assert_rfc3339_millis, seqs, Node, ADMIN, START};
use super::ContractBackend;
use crate::http::Method;

/// A new thread is empty: `headSeq` 0, no participants, no parent, no title.
pub fn create_thread_returns_empty_snapshot<C: ContractBackend>(backend: &C) {
    let mut node = Node::start(backend, START);
    let thread = node.create("alice", "thread-42", None).expect(201);
    assert_eq!(thread["threadId"], "thread-42");
    assert_eq!(thread["headSeq"], 0);
    assert_eq!(thread["participants"], json!([]));
    assert_keys(
        &thread,
        &["threadId", "headSeq", "createdAt", "participants"],
    );
    assert_rfc3339_millis(&thread["createdAt"]);
    assert_eq!(node.thread("thread-42"), thread);
}

/// Creating an existing thread with the same parent returns it unchanged.
pub fn create_thread_is_idempotent<C: ContractBackend>(backend: &C) {
    let mut node = Node::start(backend, START);
    let first = node.create("alice", "thread-42", None).expect(201);
    assert_eq!(node.create("alice", "thread-42", None).expect(200), first);
    let child = node
        .create("alice", "thread-child", Some("thread-42"))
        .expect(201);
    assert_eq!(child["parentThreadId"], "thread-42");
    assert_eq!(
        node.create("alice", "thread-child", Some("thread-42"))
            .expect(200),
        child
    );
}

/// The four rejections of createThread, and the parent relation unchanged.
pub fn create_thread_rejections<C: ContractBackend>(backend: &C) {
    let mut node = Node::start(backend, START);
    node.create("alice", "thread-root", None).expect(201);
    node.create("alice", "thread-other", None).expect(201);
    node.create("alice", "thread-child", Some("thread-root"))
        .expect(201);
    // A top-level thread cannot become a subthread.
    node.create("alice", "thread-other", Some("thread-root"))
        .expect_error(409, "conflict");
    // A subthread cannot move to another parent.
    node.create("alice", "thread-child", Some("thread-other"))
        .expect_error(409, "conflict");
    // A subthread cannot become top-level.
    node.create("alice", "thread-child", None)
        .expect_error(409, "conflict");
    // The parent must exist.
    node.create("alice", "thread-orphan", Some("thread-missing"))
        .expect_error(404, "not_found");
    // A thread cannot be its own parent.
    node.create("alice", "thread-self", Some("thread-self"))
        .expect_error(400, "invalid_request");
    assert!(node.thread("thread-other").get("parentThreadId").is_none());
    assert_eq!(node.thread("thread-child")["parentThreadId"], "thread-root");
    node.get(ADMIN, "/v1/threads/thread-orphan")
        .expect_error(404, "not_found");
    node.get(ADMIN, "/v1/threads/thread-self")
        .expect_error(404, "not_found");
}

/// `getThread`: exactly the `BubbleThread` keys; `parentThreadId` only on
/// subthreads, `title` only when set.
pub fn get_thread_shape<C: ContractBackend>(backend: &C) {
    let mut node = Node::start(backend, START);
    node.create("alice", "thread-root", None).expect(201);
    node.create("alice", "thread-child", Some("thread-root"))
        .expect(201);
    let root = node.get("alice", "/v1/threads/thread-root").expect(200);
    assert_keys(&root, &["threadId", "headSeq", "createdAt", "participants"]);
    let child = node.get("alice", "/v1/threads/thread-child").expect(200);
    assert_keys(
        &child,
        &[
            "threadId",
            "parentThreadId",
            "headSeq",
            "createdAt",
            "participants",
        ],
    );
    assert_eq!(child["parentThreadId"], "thread-root");
    node.title("alice", "thread-root", json!("Planning"))
        .expect(200);
    let root = node.get("alice", "/v1/threads/thread-root").expect(200);
    assert_keys(
        &root,
        &["threadId", "title", "headSeq", "createdAt", "participants"],
    );
    assert_eq!(root["title"], "Planning");
    node.get("alice", "/v1/threads/thread-none")
        .expect_error(404, "not_found");
}

/// `headSeq` grows by one per append and is per thread.
pub fn head_seq_counts_appends<C: ContractBackend>(backend: &C) {
    let mut node = Node::start(backend, START);
    node.create("alice", "thread-root", None).expect(201);
    node.create("alice", "thread-child", Some("thread-root"))
        .expect(201);
    for n in 1..=3 {
        let event = node
            .append("alice", "thread-root", &format!("run-{n}"), None)
            .expect(201);
        assert_eq!(event["event"]["seq"], n);
        assert_eq!(node.thread("thread-root")["headSeq"], n);
    }
    assert_eq!(node.thread("thread-child")["headSeq"], 0);
    assert!(node.history("thread-child").is_empty());
}

/// Title set, replace, clear; `thread_title_updated` only on change.
pub fn title_set_and_clear<C: ContractBackend>(backend: &C) {
    let mut node = Node::start(backend, START);
    node.create("alice", "thread-42", None).expect(201);
    let set = node
        .title("alice", "thread-42", json!("Q3 planning"))
        .expect(200);
    assert_eq!(set["title"], "Q3 planning");
    assert_eq!(set["headSeq"], 1);
    node.title("alice", "thread-42", json!("Q3 planning"))
        .expect(200);
    let body = json!({});
    let untouched = node
        .call(
            Method::Patch,
            "alice",
            "/v1/threads/thread-42",
            Some(&body),
            None,
        )
        .expect(200);
    assert_eq!(untouched["title"], "Q3 planning");
    let cleared = node.title("alice", "thread-42", Value::Null).expect(200);
    assert!(
        cleared.get("title").is_none(),
        "a cleared title has no key: {cleared}"
    );
    node.title("alice", "thread-42", Value::Null).expect(200);
    let history = node.history("thread-42");
    assert_eq!(seqs(&history), [1, 2]);
    assert_eq!(history[0]["type"], "thread_title_updated");
    assert_eq!(history[0]["byPrincipalId"], "alice");
    assert_eq!(history[0]["title"], "Q3 planning");
    assert_eq!(history[1]["type"], "thread_title_updated");
    assert_eq!(history[1]["title"], Value::Null);
    assert_eq!(node.thread("thread-42")["headSeq"], 2);
}
