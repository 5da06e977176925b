//! Heartbeat (SPEC §5): the server pings; a client that answers stays
//! connected, one that never answers is dropped after the Pong deadline.

use std::time::Duration;

use bubble_tests::threads::{create_thread, subscribe};
use bubble_tests::{Server, ALICE, HANG_TIMEOUT, TEST_CONFIG};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn config() -> String {
    format!("{TEST_CONFIG}\n[heartbeat]\nping_interval_ms = 300\npong_timeout_ms = 5000\n")
}

/// A client that reads (and so answers every Ping) stays connected well
/// past several Pong deadlines' worth of pings.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answering_client_stays_connected() {
    let server = Server::start(&config());
    create_thread(&server.http(ALICE), "t1").await;
    let mut ws = server.ws(ALICE).await;
    ws.expect_no_frame_within(Duration::from_secs(6)).await;
    subscribe(&mut ws, "t1", None).await;
}

/// A raw TCP client completes the upgrade and then never reads or writes:
/// the server gives up on it and closes the connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_client_is_dropped() {
    let server = Server::start(&config());
    let mut tcp = TcpStream::connect(server.addr()).await.expect("connect");
    let request = format!(
        "GET /v1/ws HTTP/1.1\r\nHost: {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\
         Authorization: Bearer {ALICE}\r\n\r\n",
        server.addr()
    );
    tcp.write_all(request.as_bytes())
        .await
        .expect("write upgrade");
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        let n = tokio::time::timeout(HANG_TIMEOUT, tcp.read(&mut byte))
            .await
            .expect("upgrade answer");
        assert_eq!(n.expect("read"), 1, "connection closed during the upgrade");
        head.push(byte[0]);
    }
    assert!(
        head.starts_with(b"HTTP/1.1 101"),
        "{}",
        String::from_utf8_lossy(&head)
    );

    // Ping frames arrive; they are never answered. The server must end
    // the connection (EOF or reset) before the hang timeout.
    let mut buf = [0u8; 1024];
    let mut pings = 0;
    loop {
        match tokio::time::timeout(HANG_TIMEOUT, tcp.read(&mut buf)).await {
            Err(_) => panic!("the server never dropped a client that does not answer pings"),
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => pings += buf[..n].iter().filter(|b| **b == 0x89).count(),
        }
    }
    assert!(pings >= 1, "the server pinged before giving up");
}
