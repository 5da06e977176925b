//! A `/v1/ws` client frame over the limit (1 MiB by default) closes that
//! connection with 1009; other connections keep working.

use bubble_tests::threads::{append, create_thread, expect_event, run_started, subscribe};
use bubble_tests::{Message, Server, ALICE, TEST_CONFIG};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_text_frame_closes_1009() {
    let server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);
    create_thread(&alice, "thread-1").await;
    let mut other = server.ws(ALICE).await;
    subscribe(&mut other, "thread-1", None).await;

    let mut ws = server.ws(ALICE).await;
    subscribe(&mut ws, "thread-1", None).await;
    // Just under the limit is an ordinary (here: refused, too large an
    // event) frame; the connection stays open.
    let padding = "x".repeat(1024 * 1024 - 200);
    let near = json!({"type": "thread.append", "threadId": "thread-1",
                      "event": {"type": "run_started", "runId": padding}});
    assert!(near.to_string().len() <= 1024 * 1024);
    ws.send_json(&near).await;
    let frame = ws.recv_json().await;
    assert_eq!(frame["type"], "error", "{frame}");

    let huge = json!({"type": "thread.append", "threadId": "thread-1",
                      "event": {"type": "run_started", "runId": "y".repeat(1024 * 1024 + 1)}});
    // The server may close before the whole frame is written: a failed
    // send is fine, the close frame is what counts.
    let _ = ws.send(Message::text(huge.to_string())).await;
    assert_eq!(ws.recv_close().await, Some(1009));

    append(&alice, "thread-1", &run_started("after")).await;
    let event = expect_event(&mut other, "thread-1", 1).await;
    assert_eq!(event["runId"], "after");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_binary_frame_closes_1009() {
    let config = format!("{TEST_CONFIG}\n[limits]\nmax_ws_frame_bytes = 4096\n");
    let server = Server::start(&config);
    let mut ws = server.ws(ALICE).await;
    let _ = ws.send(Message::binary(vec![0u8; 4097])).await;
    assert_eq!(ws.recv_close().await, Some(1009));
    let mut fresh = server.ws(ALICE).await;
    create_thread(&server.http(ALICE), "thread-1").await;
    subscribe(&mut fresh, "thread-1", None).await;
}
