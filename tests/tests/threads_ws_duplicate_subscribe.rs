//! bubble-websocket-protocol.txt, "One Subscription Per Thread Per
//! Connection": a second subscribe gets only the `conflict` error and the
//! first subscription goes on.

use std::time::Duration;

use bubble_tests::threads::{append, create_thread, expect_event, run_started, subscribe};
use bubble_tests::{Server, ALICE, TEST_CONFIG};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resubscribe_is_a_conflict_and_the_first_goes_on() {
    let server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);
    create_thread(&alice, "thread-1").await;
    append(&alice, "thread-1", &run_started("run-1")).await;

    let mut ws = server.ws(ALICE).await;
    assert_eq!(subscribe(&mut ws, "thread-1", Some(1)).await, 1);
    expect_event(&mut ws, "thread-1", 1).await;

    ws.send_json(&json!({"type": "thread.subscribe", "threadId": "thread-1", "fromSeq": 1}))
        .await;
    let error = ws.recv_json().await;
    assert_eq!(
        error,
        json!({
            "type": "error", "threadId": "thread-1", "code": "conflict",
            "message": "Connection is already subscribed to thread \"thread-1\"."
        })
    );
    ws.expect_no_frame_within(Duration::from_millis(300)).await;

    // The first subscription is still live: no replay, no closed frame.
    append(&alice, "thread-1", &run_started("run-2")).await;
    expect_event(&mut ws, "thread-1", 2).await;
}

/// "If you actually want to change fromSeq, send thread.unsubscribe first."
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsubscribe_then_subscribe_changes_from_seq() {
    let server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);
    create_thread(&alice, "thread-1").await;
    for i in 0..3 {
        append(&alice, "thread-1", &run_started(&format!("run-{i}"))).await;
    }
    let mut ws = server.ws(ALICE).await;
    assert_eq!(subscribe(&mut ws, "thread-1", Some(4)).await, 3);
    ws.send_json(&json!({"type": "thread.unsubscribe", "threadId": "thread-1"}))
        .await;
    assert_eq!(subscribe(&mut ws, "thread-1", Some(2)).await, 3);
    expect_event(&mut ws, "thread-1", 2).await;
    expect_event(&mut ws, "thread-1", 3).await;
}
