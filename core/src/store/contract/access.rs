//! Contract cases: Grants and participants.

use serde_json::json;

use super::node::{assert_keys, assert_rfc3339_millis, types, Node, START};
use super::ContractBackend;

/// Grants: the creator owns; put, list, replace, delete; access follows.
pub fn grants<C: ContractBackend>(backend: &C) {
    let mut node = Node::start(backend, START);
    node.create("alice", "thread-1", None).expect(201);
    let rows = node.grant_rows("thread-1");
    assert_eq!(
        rows,
        [json!({ "threadId": "thread-1", "principalId": "alice", "role": "owner" })]
    );
    node.get("bob", "/v1/threads/thread-1")
        .expect_error(404, "not_found");
    let row = node.grant("alice", "thread-1", "bob", "reader").expect_ok();
    assert_eq!(
        row,
        json!({ "threadId": "thread-1", "principalId": "bob", "role": "reader" })
    );
    node.get("bob", "/v1/threads/thread-1").expect(200);
    node.append("bob", "thread-1", "run-1", None)
        .expect_error(403, "forbidden");
    node.grant("alice", "thread-1", "bob", "member").expect_ok();
    node.append("bob", "thread-1", "run-1", None).expect(201);
    assert_eq!(
        node.grant_rows("thread-1"),
        [
            json!({ "threadId": "thread-1", "principalId": "alice", "role": "owner" }),
            json!({ "threadId": "thread-1", "principalId": "bob", "role": "member" }),
        ]
    );
    node.delete("alice", "/v1/threads/thread-1/grants/bob")
        .expect(204);
    node.get("bob", "/v1/threads/thread-1")
        .expect_error(404, "not_found");
    assert_eq!(node.grant_rows("thread-1").len(), 1);
}

/// Participants: join and leave append `participant_joined` and
/// `participant_left`; the snapshot lists the current rows.
pub fn participants<C: ContractBackend>(backend: &C) {
    let mut node = Node::start(backend, START);
    node.create("alice", "thread-1", None).expect(201);
    node.grant("alice", "thread-1", "bob", "member").expect_ok();
    let row = node
        .post("bob", "/v1/threads/thread-1/participants", json!({}))
        .expect_ok();
    assert_eq!(row["principalId"], "bob");
    assert!(row["role"].is_string(), "participant row has a role: {row}");
    assert_rfc3339_millis(&row["joinedAt"]);
    assert_keys(&row, &["principalId", "role", "joinedAt"]);
    let added = node
        .post(
            "alice",
            "/v1/threads/thread-1/participants",
            json!({ "principalId": "carol", "role": "reader" }),
        )
        .expect_ok();
    assert_eq!(added["principalId"], "carol");
    let thread = node.thread("thread-1");
    assert_eq!(thread["participants"], json!([row, added]));
    node.delete("bob", "/v1/threads/thread-1/participants/bob")
        .expect(204);
    let history = node.history("thread-1");
    assert_eq!(
        types(&history),
        [
            "participant_joined",
            "participant_joined",
            "participant_left"
        ]
    );
    assert_eq!(history[0]["principalId"], "bob");
    assert_eq!(history[0]["role"], row["role"]);
    assert_eq!(history[1]["principalId"], "carol");
    assert_eq!(history[2]["principalId"], "bob");
    assert_eq!(node.thread("thread-1")["participants"], json!([added]));
    assert_eq!(node.thread("thread-1")["headSeq"], 3);
}
