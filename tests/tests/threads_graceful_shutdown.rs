//! SIGTERM: open sockets are closed with 1001, acknowledged events are
//! durable, and the process exits 0.

use bubble_tests::threads::{append, create_thread, page_all, run_started, subscribe};
use bubble_tests::{Server, WsMessage, ALICE, TEST_CONFIG};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_closes_sockets_with_1001_and_exits_0() {
    let mut server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);
    create_thread(&alice, "thread-1").await;
    for i in 0..5 {
        append(&alice, "thread-1", &run_started(&format!("r{i}"))).await;
    }
    let mut first = server.ws(ALICE).await;
    subscribe(&mut first, "thread-1", Some(6)).await;
    let mut second = server.ws(ALICE).await;

    let status = tokio::task::block_in_place(|| server.terminate());
    assert!(status.success(), "exit status {status}");
    for ws in [&mut first, &mut second] {
        match ws.recv().await {
            WsMessage::Close(code, _) => assert_eq!(code, Some(1001)),
            other => panic!("expected close 1001, got {other:?}"),
        }
    }

    server.restart();
    let (events, _) = page_all(&server.http(ALICE), "thread-1", 100).await;
    assert_eq!(events.len(), 5);
}
