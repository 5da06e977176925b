//! Restart on the same SQLite file: threads, events, grants, participants,
//! titles and idempotency keys all survive, and seqs continue gaplessly.

use bubble_tests::threads::{
    append, create_subthread, create_thread, expect_event, grant, message_part, page_all,
    run_started, subscribe,
};
use bubble_tests::{Server, ALICE, BOB, CAROL, TEST_CONFIG};
use serde_json::{json, Value};

struct Observed {
    threads: Vec<Value>,
    events: Vec<Value>,
    child_events: Vec<Value>,
    grants: Value,
}

async fn observe(server: &Server) -> Observed {
    let alice = server.http(ALICE);
    let (status, parent) = alice.get("/v1/threads/thread-1").await;
    assert_eq!(status, 200, "{parent}");
    let (status, child) = alice.get("/v1/threads/thread-1.child").await;
    assert_eq!(status, 200, "{child}");
    let (events, _) = page_all(&alice, "thread-1", 100).await;
    let (child_events, _) = page_all(&alice, "thread-1.child", 100).await;
    let (status, grants) = alice.get("/v1/threads/thread-1/grants").await;
    assert_eq!(status, 200, "{grants}");
    Observed {
        threads: vec![parent, child],
        events,
        child_events,
        grants,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn everything_survives_a_restart() {
    let mut server = Server::start(TEST_CONFIG);
    {
        let alice = server.http(ALICE);
        let (status, _) = alice
            .post(
                "/v1/threads",
                &json!({"threadId": "thread-1", "title": "Kick-off"}),
            )
            .await;
        assert_eq!(status, 201);
        create_subthread(&alice, "thread-1.child", "thread-1").await;
        grant(&alice, "thread-1", "bob", "member").await;
        grant(&alice, "thread-1", "carol", "reader").await;
        let (status, _) = alice
            .post("/v1/threads/thread-1/participants", &json!({}))
            .await;
        assert_eq!(status, 201);
        let (status, _) = server
            .http(BOB)
            .post("/v1/threads/thread-1/participants", &json!({}))
            .await;
        assert_eq!(status, 201);
        let (status, _) = alice
            .patch("/v1/threads/thread-1", &json!({"title": "Q3 planning"}))
            .await;
        assert_eq!(status, 200);
        for i in 0..20 {
            append(&alice, "thread-1", &message_part("run-1", &i.to_string())).await;
        }
        let (status, _) = alice
            .post_idempotent(
                "/v1/threads/thread-1/events",
                &run_started("run-key"),
                "key-1",
            )
            .await;
        assert_eq!(status, 201);
        append(&alice, "thread-1.child", &run_started("child-run")).await;
    }
    let before = observe(&server).await;
    assert_eq!(before.threads[0]["title"], "Q3 planning");
    assert_eq!(
        before.threads[0]["participants"].as_array().unwrap().len(),
        2
    );

    server.restart();

    let after = observe(&server).await;
    assert_eq!(after.threads, before.threads, "snapshots survive");
    assert_eq!(after.events, before.events, "events survive byte for byte");
    assert_eq!(after.child_events, before.child_events);
    assert_eq!(after.grants, before.grants, "grants survive");

    let alice = server.http(ALICE);
    let head = before.threads[0]["headSeq"].as_u64().unwrap();
    // The idempotency key is remembered: the repeat returns the original.
    let (status, repeat) = alice
        .post_idempotent(
            "/v1/threads/thread-1/events",
            &run_started("run-key"),
            "key-1",
        )
        .await;
    assert_eq!(status, 200, "{repeat}");
    assert_eq!(repeat["duplicate"], true);
    assert_eq!(repeat["event"]["runId"], "run-key");

    // Grants still decide: carol is a reader, bob a member.
    let (status, _) = server
        .http(CAROL)
        .post("/v1/threads/thread-1/events", &run_started("x"))
        .await;
    assert_eq!(status, 403);
    let mut ws = server.ws(CAROL).await;
    assert_eq!(subscribe(&mut ws, "thread-1", Some(head + 1)).await, head);

    // Seqs continue with no gap, and live delivery works.
    let event = append(&server.http(BOB), "thread-1", &run_started("after")).await;
    assert_eq!(event["seq"], head + 1);
    expect_event(&mut ws, "thread-1", head + 1).await;
}

/// The memory store keeps nothing across a restart (the contrast that
/// shows the test above exercises the disk).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_store_starts_empty() {
    let mut server = Server::start_with_store(TEST_CONFIG, bubble_tests::Store::Memory);
    create_thread(&server.http(ALICE), "thread-1").await;
    server.restart();
    let (status, _) = server.http(ALICE).get("/v1/threads/thread-1").await;
    assert_eq!(status, 404);
}
