//! bubble-websocket-protocol.txt, "Closing a Subscription": a client
//! `thread.unsubscribe` is silent (no ack, no `subscription_closed`) and no
//! event of that thread follows once it is processed.

use std::time::Duration;

use bubble_tests::threads::{append, create_thread, expect_event, run_started, subscribe};
use bubble_tests::{Server, ALICE, TEST_CONFIG};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsubscribe_is_silent_and_stops_delivery() {
    let server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);
    create_thread(&alice, "thread-1").await;
    create_thread(&alice, "thread-2").await;

    let mut ws = server.ws(ALICE).await;
    subscribe(&mut ws, "thread-1", None).await;
    subscribe(&mut ws, "thread-2", None).await;

    // { "type": "thread.unsubscribe", "threadId": "thread-1" }
    ws.send_json(&json!({"type": "thread.unsubscribe", "threadId": "thread-1"}))
        .await;
    ws.expect_no_frame_within(Duration::from_millis(300)).await;

    // The server handles a connection's frames in order: a subscribe sent
    // after the unsubscribe is accepted (no conflict), which proves the
    // unsubscribe took effect.
    subscribe(&mut ws, "thread-1", None).await;
    ws.send_json(&json!({"type": "thread.unsubscribe", "threadId": "thread-1"}))
        .await;
    // Likewise, once a later subscribe is confirmed, the unsubscribe before
    // it has been handled.
    create_thread(&alice, "fence").await;
    subscribe(&mut ws, "fence", None).await;

    // Events on thread-1 are no longer delivered; thread-2 goes on.
    append(&alice, "thread-1", &run_started("run-1")).await;
    append(&alice, "thread-2", &run_started("run-2")).await;
    let frame = ws.recv_json().await;
    assert_eq!(
        frame["threadId"], "thread-2",
        "only thread-2 is subscribed: {frame}"
    );
    assert_eq!(frame["event"]["seq"], 1);
    ws.expect_no_frame_within(Duration::from_millis(300)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unsubscribe_without_a_subscription_is_silent() {
    let server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);
    create_thread(&alice, "thread-1").await;
    let mut ws = server.ws(ALICE).await;
    ws.send_json(&json!({"type": "thread.unsubscribe", "threadId": "thread-1"}))
        .await;
    ws.send_json(&json!({"type": "thread.unsubscribe", "threadId": "no-such-thread"}))
        .await;
    ws.expect_no_frame_within(Duration::from_millis(300)).await;
    subscribe(&mut ws, "thread-1", None).await;
    append(&alice, "thread-1", &run_started("run-1")).await;
    expect_event(&mut ws, "thread-1", 1).await;
}
