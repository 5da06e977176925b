//! bubble-threads.txt, "Top-Level Threads vs. Subthreads" and "Creating and
//! Inspecting Threads": every example, over the HTTP routes.

use bubble_tests::threads::{append, create_thread, error_code, run_started};
use bubble_tests::{Server, ALICE, ROOT, TEST_CONFIG};
use serde_json::{json, Value};

fn is_rfc3339_utc_millis(s: &str) -> bool {
    // 2024-01-02T03:04:05.678Z
    let b = s.as_bytes();
    b.len() == 24
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && b[19] == b'.'
        && b[23] == b'Z'
        && s.chars().filter(char::is_ascii_digit).count() == 17
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_thread_returns_an_empty_snapshot() {
    let server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);

    // const thread = await store.createThread('thread-42');
    let thread = create_thread(&alice, "thread-42").await;
    assert_eq!(thread["threadId"], "thread-42");
    assert_eq!(thread["headSeq"], 0);
    assert_eq!(thread["participants"], json!([]));
    assert!(
        thread.get("parentThreadId").is_none(),
        "top-level thread has no parentThreadId key"
    );
    assert!(
        thread.get("title").is_none(),
        "no title key until one is set"
    );
    let created_at = thread["createdAt"].as_str().expect("createdAt string");
    assert!(is_rfc3339_utc_millis(created_at), "createdAt {created_at}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_thread_is_idempotent_when_the_parent_matches() {
    let server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);
    let first = create_thread(&alice, "thread-42").await;
    let (status, second) = alice
        .post("/v1/threads", &json!({"threadId": "thread-42"}))
        .await;
    assert_eq!(status, 200, "{second}");
    assert_eq!(second, first);

    let (status, child) = alice
        .post(
            "/v1/threads",
            &json!({"threadId": "c", "parentThreadId": "thread-42"}),
        )
        .await;
    assert_eq!(status, 201, "{child}");
    let (status, again) = alice
        .post(
            "/v1/threads",
            &json!({"threadId": "c", "parentThreadId": "thread-42"}),
        )
        .await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(again, child);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_generates_a_thread_id_when_omitted() {
    let server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);
    let (status, a) = alice.post("/v1/threads", &json!({})).await;
    assert_eq!(status, 201, "{a}");
    let (status, b) = alice.post("/v1/threads", &json!({})).await;
    assert_eq!(status, 201, "{b}");
    let (a, b) = (
        a["threadId"].as_str().unwrap(),
        b["threadId"].as_str().unwrap(),
    );
    assert_ne!(a, b);
    for id in [a, b] {
        assert!((1..=128).contains(&id.len()), "{id}");
        assert!(
            id.bytes()
                .all(|c| c.is_ascii_alphanumeric() || b"._:-".contains(&c)),
            "{id}"
        );
        let (status, got) = alice.get(&format!("/v1/threads/{id}")).await;
        assert_eq!(status, 200, "{got}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subthread_has_its_own_stream() {
    let server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);

    // const root = await store.createThread('thread-root');
    let root = create_thread(&alice, "thread-root").await;
    assert!(root.get("parentThreadId").is_none());

    append(&alice, "thread-root", &run_started("run-1")).await;

    // const child = await store.createThread('thread-child', { parentThreadId: 'thread-root' });
    let (status, child) = alice
        .post(
            "/v1/threads",
            &json!({"threadId": "thread-child", "parentThreadId": "thread-root"}),
        )
        .await;
    assert_eq!(status, 201, "{child}");
    assert_eq!(child["parentThreadId"], "thread-root");
    assert_eq!(
        child["headSeq"], 0,
        "events on root are not visible on child"
    );

    let (status, page) = alice.get("/v1/threads/thread-child/events").await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["events"], json!([]));

    // Appends to the child do not touch the parent either.
    let event = append(&alice, "thread-child", &run_started("run-2")).await;
    assert_eq!(event["seq"], 1, "the child numbers its own events from 1");
    let (_, root) = alice.get("/v1/threads/thread-root").await;
    assert_eq!(root["headSeq"], 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parent_grants_are_not_copied_to_the_child() {
    let server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);
    create_thread(&alice, "thread-root").await;
    bubble_tests::threads::grant(&alice, "thread-root", "bob", "reader").await;
    let (status, _) = alice
        .post(
            "/v1/threads",
            &json!({"threadId": "thread-child", "parentThreadId": "thread-root"}),
        )
        .await;
    assert_eq!(status, 201);

    let (status, grants) = server
        .http(ROOT)
        .get("/v1/threads/thread-child/grants")
        .await;
    assert_eq!(status, 200, "{grants}");
    let rows = grants_rows(&grants);
    assert!(
        rows.iter().all(|g| g["principalId"] != "bob"),
        "no child grant row is materialised for a parent grantee: {grants}"
    );
}

fn grants_rows(body: &Value) -> Vec<Value> {
    body["grants"].as_array().cloned().expect("grants array")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_thread_rejections() {
    let server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);
    create_thread(&alice, "top").await;
    create_thread(&alice, "other").await;
    let (status, _) = alice
        .post(
            "/v1/threads",
            &json!({"threadId": "sub", "parentThreadId": "top"}),
        )
        .await;
    assert_eq!(status, 201);

    // Turning an existing top-level thread into a subthread.
    let (status, body) = alice
        .post(
            "/v1/threads",
            &json!({"threadId": "other", "parentThreadId": "top"}),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    error_code(&body, "conflict");

    // Moving a subthread to a different parent.
    let (status, body) = alice
        .post(
            "/v1/threads",
            &json!({"threadId": "sub", "parentThreadId": "other"}),
        )
        .await;
    assert_eq!(status, 409, "{body}");
    error_code(&body, "conflict");

    // Re-creating a subthread as top-level (the parent differs the other way).
    let (status, body) = alice.post("/v1/threads", &json!({"threadId": "sub"})).await;
    assert_eq!(status, 409, "{body}");
    error_code(&body, "conflict");

    // A parent that does not exist.
    let (status, body) = alice
        .post(
            "/v1/threads",
            &json!({"threadId": "orphan", "parentThreadId": "missing"}),
        )
        .await;
    assert_eq!(status, 404, "{body}");
    error_code(&body, "not_found");

    // A parent equal to the thread itself.
    let (status, body) = alice
        .post(
            "/v1/threads",
            &json!({"threadId": "self", "parentThreadId": "self"}),
        )
        .await;
    assert_eq!(status, 400, "{body}");
    error_code(&body, "invalid_request");

    // None of the rejected requests created anything.
    for id in ["orphan", "self"] {
        let (status, body) = alice.get(&format!("/v1/threads/{id}")).await;
        assert_eq!(status, 404, "{id}: {body}");
    }
    let (_, sub) = alice.get("/v1/threads/sub").await;
    assert_eq!(sub["parentThreadId"], "top");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_thread_returns_head_seq_created_at_and_participants() {
    let server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);
    let created = create_thread(&alice, "thread-42").await;

    // Each successful append bumps headSeq by exactly one, starting at 1.
    for expected in 1..=3u64 {
        let event = append(
            &alice,
            "thread-42",
            &run_started(&format!("run-{expected}")),
        )
        .await;
        assert_eq!(event["seq"], expected);
        let (status, thread) = alice.get("/v1/threads/thread-42").await;
        assert_eq!(status, 200, "{thread}");
        assert_eq!(thread["headSeq"], expected);
        assert_eq!(thread["createdAt"], created["createdAt"]);
    }

    let (status, joined) = alice
        .post("/v1/threads/thread-42/participants", &json!({}))
        .await;
    assert_eq!(status, 201, "{joined}");
    let (_, thread) = alice.get("/v1/threads/thread-42").await;
    let participants = thread["participants"].as_array().expect("participants");
    assert_eq!(participants.len(), 1, "{thread}");
    assert_eq!(participants[0]["principalId"], "alice");
    assert!(participants[0]["role"].is_string(), "{thread}");
    assert!(participants[0]["joinedAt"].is_string(), "{thread}");
    assert_eq!(
        thread["headSeq"], 4,
        "joining appends participant_joined: {thread}"
    );
}
