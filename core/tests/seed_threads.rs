//! Every code sample of bubble-threads.txt, through the engine's HTTP
//! routes (the store operations behind them).

mod common;

use bubble_core::clock::rfc3339;
use bubble_core::Millis;
use common::{run_started, Harness};
use serde_json::{json, Value};

/// `createThread('thread-root')` and a child under it: the child has its
/// own stream.
#[test]
fn root_and_child() {
    let mut h = Harness::new();
    let root = h.create_thread("alice", "thread-root");
    assert!(
        root.get("parentThreadId").is_none(),
        "no parentThreadId key: {root}"
    );
    let child = h.create_subthread("alice", "thread-child", "thread-root");
    assert_eq!(child["parentThreadId"], "thread-root");
    assert_eq!(child["headSeq"], 0);
    h.append("alice", "thread-root", run_started("run-1"))
        .expect(201);
    assert_eq!(
        h.get("alice", "/v1/threads/thread-child").expect(200).body["headSeq"],
        0
    );
    assert_eq!(
        h.get("alice", "/v1/threads/thread-root").expect(200).body["headSeq"],
        1
    );
}

/// `createThread('thread-42')`: headSeq 0, no participants; twice returns
/// the same snapshot.
#[test]
fn create_thread_42_twice() {
    let mut h = Harness::new();
    let created_at = rfc3339(h.now());
    let thread = h.create_thread("alice", "thread-42");
    assert_eq!(
        thread,
        json!({ "threadId": "thread-42", "headSeq": 0, "createdAt": created_at, "participants": [] })
    );
    h.advance(5_000);
    let again = h
        .post("alice", "/v1/threads", json!({ "threadId": "thread-42" }))
        .expect(200);
    assert_eq!(again.body, thread);
}

/// The four rejections of createThread.
#[test]
fn create_thread_rejections() {
    let mut h = Harness::new();
    h.create_thread("alice", "thread-root");
    h.create_thread("alice", "thread-top");
    h.create_thread("alice", "thread-b");
    h.create_subthread("alice", "thread-sub", "thread-root");
    let create = |h: &mut Harness, id: &str, parent: Option<&str>| {
        let mut body = json!({ "threadId": id });
        if let Some(p) = parent {
            body["parentThreadId"] = json!(p);
        }
        h.post("alice", "/v1/threads", body)
    };
    create(&mut h, "thread-top", Some("thread-root")).expect_error(409, "conflict");
    create(&mut h, "thread-sub", Some("thread-b")).expect_error(409, "conflict");
    create(&mut h, "thread-sub", None).expect_error(409, "conflict");
    create(&mut h, "thread-new", Some("thread-nowhere")).expect_error(404, "not_found");
    create(&mut h, "thread-self", Some("thread-self")).expect_error(400, "invalid_request");
}

/// `getThread`: the current snapshot with parent and participants; the
/// same shape as `GET /v1/threads/:threadId`.
#[test]
fn get_thread_snapshot() {
    let mut h = Harness::new();
    h.create_thread("alice", "thread-root");
    let created_at = rfc3339(h.now());
    h.advance(10);
    h.create_subthread("alice", "thread-42", "thread-root");
    h.grant("thread-42", "bob", "member");
    h.append("bob", "thread-42", run_started("run-1"))
        .expect(201);
    let joined = h
        .post("bob", "/v1/threads/thread-42/participants", json!({}))
        .expect_ok()
        .body;
    let thread = h.get("bob", "/v1/threads/thread-42").expect(200).body;
    assert_eq!(
        thread["headSeq"], 2,
        "one append and one participant_joined"
    );
    assert_eq!(thread["parentThreadId"], "thread-root");
    assert_eq!(thread["participants"], json!([joined]));
    assert_eq!(thread["createdAt"], rfc3339(Millis(common::T0 + 10)));
    let root = h.get("alice", "/v1/threads/thread-root").expect(200).body;
    assert_eq!(root["createdAt"], created_at);
}

/// `getHeadSeq` / `getCreatedAt`: the scalar fields of the snapshot.
#[test]
fn head_seq_and_created_at() {
    let mut h = Harness::new();
    let at = h.now();
    h.create_thread("alice", "thread-42");
    h.advance(1_234);
    for n in 1..=3u64 {
        h.append("alice", "thread-42", run_started(&format!("run-{n}")))
            .expect(201);
        let thread = h.get("alice", "/v1/threads/thread-42").expect(200).body;
        assert_eq!(thread["headSeq"], n);
        assert_eq!(thread["createdAt"], rfc3339(at));
    }
}

/// `updateThread` with a title, then `null`: `thread_title_updated` each
/// time the title changes, never when it does not; only `thread.manage`
/// may rename.
#[test]
fn rename_and_clear() {
    let mut h = Harness::new();
    h.create_thread("alice", "thread-42");
    h.grant("thread-42", "bob", "thread_manager");
    h.grant("thread-42", "carol", "member");
    h.grant("thread-42", "dave", "reader");
    let renamed = h
        .patch(
            "bob",
            "/v1/threads/thread-42",
            json!({ "title": "Q3 planning" }),
        )
        .expect(200);
    assert_eq!(renamed.body["title"], "Q3 planning");
    h.patch(
        "bob",
        "/v1/threads/thread-42",
        json!({ "title": "Q3 planning" }),
    )
    .expect(200);
    h.patch("bob", "/v1/threads/thread-42", json!({}))
        .expect(200);
    let cleared = h
        .patch("bob", "/v1/threads/thread-42", json!({ "title": null }))
        .expect(200);
    assert!(
        cleared.body.get("title").is_none(),
        "cleared title has no key: {}",
        cleared.body
    );
    for who in ["carol", "dave"] {
        let r = h
            .patch(who, "/v1/threads/thread-42", json!({ "title": "nope" }))
            .expect_error(403, "forbidden");
        assert_eq!(
            r.message(),
            format!("Principal \"{who}\" lacks \"thread.manage\" on thread \"thread-42\".")
        );
    }
    let history = h.history("thread-42");
    let strip = |e: &Value| json!({ "type": e["type"], "byPrincipalId": e["byPrincipalId"], "title": e["title"] });
    assert_eq!(
        history.iter().map(strip).collect::<Vec<_>>(),
        [
            json!({ "type": "thread_title_updated", "byPrincipalId": "bob", "title": "Q3 planning" }),
            json!({ "type": "thread_title_updated", "byPrincipalId": "bob", "title": null }),
        ]
    );
    assert!(
        history[1]
            .as_object()
            .expect("object")
            .contains_key("title"),
        "title: null is present"
    );
}

/// Subscribers observe a rename live.
#[test]
fn rename_reaches_subscribers() {
    let mut h = Harness::new();
    h.create_thread("alice", "thread-42");
    let conn = h.connect("alice");
    h.subscribe(conn, "thread-42", Some(1));
    h.frames(conn);
    h.patch(
        "alice",
        "/v1/threads/thread-42",
        json!({ "title": "Q3 planning" }),
    )
    .expect(200);
    let frames = h.frames(conn);
    assert_eq!(frames.len(), 1);
    assert_eq!(frames[0]["event"]["type"], "thread_title_updated");
    assert_eq!(frames[0]["event"]["byPrincipalId"], "alice");
    assert_eq!(frames[0]["event"]["seq"], 1);
}

/// Creating with a server-generated id, and reading it back.
#[test]
fn generated_thread_id() {
    let mut h = Harness::new();
    let thread = h.post("alice", "/v1/threads", json!({})).expect(201).body;
    let id = thread["threadId"].as_str().expect("threadId").to_owned();
    assert!(
        bubble_core::ThreadId::parse(&id).is_ok(),
        "generated id is valid: {id}"
    );
    assert_eq!(
        h.get("alice", &format!("/v1/threads/{id}"))
            .expect(200)
            .body,
        thread
    );
    let other = h.post("alice", "/v1/threads", json!({})).expect(201).body;
    assert_ne!(other["threadId"], thread["threadId"]);
}
