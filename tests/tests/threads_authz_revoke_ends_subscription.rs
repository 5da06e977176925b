//! Losing `events.subscribe` ends live subscriptions with a scoped error,
//! then `thread.subscription_closed{reason:"not_found"}`; other
//! subscriptions and connections go on.

use std::time::Duration;

use bubble_tests::threads::{
    append, create_subthread, create_thread, error_frame, expect_event, grant, run_started,
    subscribe,
};
use bubble_tests::{Server, ALICE, CAROL, DAVE, TEST_CONFIG};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_a_grant_closes_the_subscription() {
    let server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);
    create_thread(&alice, "thread-1").await;
    create_thread(&alice, "thread-2").await;
    for t in ["thread-1", "thread-2"] {
        grant(&alice, t, "carol", "member").await;
        grant(&alice, t, "dave", "reader").await;
    }

    let mut carol = server.ws(CAROL).await;
    subscribe(&mut carol, "thread-1", None).await;
    subscribe(&mut carol, "thread-2", None).await;
    let mut dave = server.ws(DAVE).await;
    subscribe(&mut dave, "thread-1", None).await;

    let (status, body) = alice.delete("/v1/threads/thread-1/grants/carol").await;
    assert_eq!(status, 204, "{body}");

    let error = carol.recv_json().await;
    error_frame(&error, "not_found", Some("thread-1"));
    let closed = carol.recv_json().await;
    assert_eq!(
        closed,
        serde_json::json!({"type": "thread.subscription_closed", "threadId": "thread-1", "reason": "not_found"})
    );

    // No further event of thread-1 reaches carol; thread-2 and dave go on.
    append(&alice, "thread-1", &run_started("r1")).await;
    append(&alice, "thread-2", &run_started("r2")).await;
    expect_event(&mut carol, "thread-2", 1).await;
    carol
        .expect_no_frame_within(Duration::from_millis(300))
        .await;
    expect_event(&mut dave, "thread-1", 1).await;

    // Re-subscribing is refused like any unreadable thread.
    carol
        .send_json(&serde_json::json!({"type": "thread.subscribe", "threadId": "thread-1"}))
        .await;
    error_frame(&carol.recv_json().await, "not_found", Some("thread-1"));
    assert_eq!(
        carol.recv_json().await["type"],
        "thread.subscription_closed"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn revoking_a_parent_grant_closes_inherited_subscriptions() {
    let server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);
    create_thread(&alice, "root").await;
    grant(&alice, "root", "dave", "reader").await;
    create_subthread(&alice, "child", "root").await;

    let mut dave = server.ws(DAVE).await;
    subscribe(&mut dave, "child", None).await;
    let (status, _) = alice.delete("/v1/threads/root/grants/dave").await;
    assert_eq!(status, 204);
    error_frame(&dave.recv_json().await, "not_found", Some("child"));
    let closed = dave.recv_json().await;
    assert_eq!(closed["type"], "thread.subscription_closed");
    assert_eq!(closed["threadId"], "child");
    assert_eq!(closed["reason"], "not_found");
}

/// Changing a role that keeps `events.subscribe` ends nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn downgrading_to_reader_keeps_the_subscription() {
    let server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);
    create_thread(&alice, "thread-1").await;
    grant(&alice, "thread-1", "carol", "member").await;
    let mut carol = server.ws(CAROL).await;
    subscribe(&mut carol, "thread-1", None).await;
    grant(&alice, "thread-1", "carol", "reader").await;
    carol
        .expect_no_frame_within(Duration::from_millis(300))
        .await;
    append(&alice, "thread-1", &run_started("r")).await;
    expect_event(&mut carol, "thread-1", 1).await;
}
