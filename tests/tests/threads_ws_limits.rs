//! Per-connection limits of `/v1/ws` (SPEC §5): the subscription cap and
//! the frame rate. Windows are set long so nothing depends on timing.

use std::time::Duration;

use bubble_tests::threads::{create_thread, error_frame, subscribe};
use bubble_tests::{Server, ALICE, TEST_CONFIG};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscription_cap_refuses_the_extra_subscription() {
    let config = format!("{TEST_CONFIG}\n[limits]\nmax_subscriptions = 2\n");
    let server = Server::start(&config);
    let alice = server.http(ALICE);
    for t in ["t1", "t2", "t3"] {
        create_thread(&alice, t).await;
    }
    let mut ws = server.ws(ALICE).await;
    subscribe(&mut ws, "t1", None).await;
    subscribe(&mut ws, "t2", None).await;
    ws.send_json(&json!({"type": "thread.subscribe", "threadId": "t3"}))
        .await;
    error_frame(&ws.recv_json().await, "rate_limited", Some("t3"));
    let closed = ws.recv_json().await;
    assert_eq!(
        closed,
        json!({"type": "thread.subscription_closed", "threadId": "t3", "reason": "rate_limited"})
    );
    // Freeing a slot makes room again.
    ws.send_json(&json!({"type": "thread.unsubscribe", "threadId": "t1"}))
        .await;
    subscribe(&mut ws, "t3", None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frames_over_the_rate_are_dropped_with_an_error() {
    let config =
        format!("{TEST_CONFIG}\n[limits]\nframe_rate = 3\nframe_rate_window_ms = 3600000\n");
    let server = Server::start(&config);
    let alice = server.http(ALICE);
    for t in ["t1", "t2", "t3", "t4"] {
        create_thread(&alice, t).await;
    }
    let mut ws = server.ws(ALICE).await;
    for t in ["t1", "t2", "t3"] {
        subscribe(&mut ws, t, None).await;
    }
    ws.send_json(&json!({"type": "thread.subscribe", "threadId": "t4"}))
        .await;
    let frame = ws.recv_json().await;
    error_frame(&frame, "rate_limited", None);
    // The frame was dropped (no subscription_opened), the socket stays open.
    ws.expect_no_frame_within(Duration::from_millis(300)).await;
    bubble_tests::threads::append(&alice, "t1", &bubble_tests::threads::run_started("r")).await;
    bubble_tests::threads::expect_event(&mut ws, "t1", 1).await;
}
