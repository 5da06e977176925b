//! A subscriber whose outbound queue overflows is a slow consumer: the
//! server closes it with 1013 instead of growing memory, counts it on
//! `/metrics`, and keeps serving everyone else.

use bubble_tests::threads::{append, create_thread, run_started, subscribe};
use bubble_tests::{Server, WsClient, WsMessage, ALICE, TEST_CONFIG};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overflowing_queue_closes_1013() {
    let config =
        format!("{TEST_CONFIG}\n[limits]\noutbound_queue_frames = 4\nbacklog_page = 1000\n");
    let server = Server::start(&config);
    let alice = server.http(ALICE);
    create_thread(&alice, "thread-1").await;
    for i in 0..50 {
        append(&alice, "thread-1", &run_started(&format!("run-{i}"))).await;
    }

    let mut slow = server.ws(ALICE).await;
    slow.send_json(&json!({ "type": "thread.subscribe", "threadId": "thread-1", "fromSeq": 1 }))
        .await;
    // Frames queued before the overflow may still be written ahead of the Close.
    let code = loop {
        match slow.recv().await {
            WsMessage::Text(_) => continue,
            WsMessage::Close(code, _) => break code,
            other => panic!("expected frames then a Close, got {other:?}"),
        }
    };
    assert_eq!(code, Some(1013));

    let metrics = server
        .http_anonymous()
        .request("GET", "/metrics", &[], Vec::new())
        .await;
    assert!(
        metrics
            .text()
            .contains("bubble_slow_consumer_closes_total 1"),
        "{}",
        metrics.text()
    );

    // Another subscriber that asks for less than the queue holds is served.
    let mut other = WsClient::connect(&server.ws_url("/v1/ws"), Some(ALICE))
        .await
        .expect("upgrade");
    assert_eq!(subscribe(&mut other, "thread-1", Some(50)).await, 50);
    let event = other.recv_json().await;
    assert_eq!(event["event"]["seq"], 50, "{event}");
}
