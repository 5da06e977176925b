//! Participants (SPEC §3): self-join needs an append capability, adding
//! others needs `participants.manage`, leaving is always allowed for
//! oneself; joins and leaves flow to subscribers as events.

mod common;

use common::{event_seqs, Harness, ADMIN};
use serde_json::json;

fn setup() -> Harness {
    let mut h = Harness::new();
    h.create_thread(ADMIN, "thread-1");
    h.grant("thread-1", "alice", "member");
    h.grant("thread-1", "dave", "reader");
    h.grant("thread-1", "olga", "owner");
    h
}

#[test]
fn joins_and_leaves_reach_subscribers() {
    let mut h = setup();
    let conn = h.connect("dave");
    h.subscribe(conn, "thread-1", Some(1));
    h.frames(conn);
    let row = h
        .post("alice", "/v1/threads/thread-1/participants", json!({}))
        .expect_ok()
        .body;
    let frames = h.frames(conn);
    assert_eq!(event_seqs(&frames, "thread-1"), [1]);
    let joined = &frames[0]["event"];
    assert_eq!(joined["type"], "participant_joined");
    assert_eq!(joined["principalId"], "alice");
    assert_eq!(joined["role"], row["role"]);
    h.delete("alice", "/v1/threads/thread-1/participants/alice")
        .expect(204);
    let frames = h.frames(conn);
    assert_eq!(frames[0]["event"]["type"], "participant_left");
    assert_eq!(frames[0]["event"]["principalId"], "alice");
    assert_eq!(h.thread("thread-1")["participants"], json!([]));
}

#[test]
fn self_join_needs_an_append_capability() {
    let mut h = setup();
    h.post("dave", "/v1/threads/thread-1/participants", json!({}))
        .expect_error(403, "forbidden");
    h.post("carol", "/v1/threads/thread-1/participants", json!({}))
        .expect_error(404, "not_found");
    assert_eq!(h.thread("thread-1")["headSeq"], 0);
}

#[test]
fn adding_and_removing_others_needs_participants_manage() {
    let mut h = setup();
    let r = h
        .post(
            "alice",
            "/v1/threads/thread-1/participants",
            json!({ "principalId": "dave" }),
        )
        .expect_error(403, "forbidden");
    assert_eq!(
        r.message(),
        "Principal \"alice\" lacks \"participants.manage\" on thread \"thread-1\"."
    );
    let row = h
        .post(
            "olga",
            "/v1/threads/thread-1/participants",
            json!({ "principalId": "dave", "role": "reader" }),
        )
        .expect_ok()
        .body;
    assert_eq!(row["principalId"], "dave");
    assert_eq!(row["role"], "reader");
    let r = h
        .delete("alice", "/v1/threads/thread-1/participants/dave")
        .expect_error(403, "forbidden");
    assert_eq!(
        r.message(),
        "Principal \"alice\" lacks \"participants.manage\" on thread \"thread-1\"."
    );
    // A participant may always leave.
    h.delete("dave", "/v1/threads/thread-1/participants/dave")
        .expect(204);
    let history = h.history("thread-1");
    let kinds: Vec<&str> = history
        .iter()
        .map(|e| e["type"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(kinds, ["participant_joined", "participant_left"]);
}
