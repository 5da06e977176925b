//! Fan-out written by writer threads (`io_threads`): every subscriber still
//! gets every frame once, whole and in order, on both protocols, while
//! frames for one socket are queued by the engine and written by another
//! thread.

mod channels_common;

use std::time::Duration;

use bubble_tests::threads::{create_thread, expect_event, run_started, subscribe};
use bubble_tests::{Server, Store, ALICE, TEST_CONFIG};
use channels_common::{connect, publish, subscribe as subscribe_channel, Socket};
use serde_json::{json, Value};

const SUBSCRIBERS: usize = 40;
const CHANNELS: usize = 4;
const PUBLISHES: usize = 150;

fn config() -> String {
    format!("io_threads = 3\n{TEST_CONFIG}")
}

fn started_with_writers(server: &Server) {
    let logs = server.logs();
    assert!(
        logs.contains("io_threads=3"),
        "the server says it runs 3 writers:\n{logs}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channel_publications_arrive_once_in_order() {
    let server = Server::start_with_store(&config(), Store::Memory);
    started_with_writers(&server);
    let mut sockets: Vec<(usize, Socket)> = Vec::new();
    for i in 0..SUBSCRIBERS {
        let mut socket = connect(&server).await;
        let channel = i % CHANNELS;
        subscribe_channel(&mut socket.ws, &format!("news-{channel}")).await;
        sockets.push((channel, socket));
    }
    // Publications to every channel, sent concurrently so that engine
    // turns carry several frames per socket.
    let mut sends = Vec::new();
    for channel in 0..CHANNELS {
        let server_url = server.base_url();
        sends.push(tokio::spawn(async move {
            let backend =
                bubble_tests::HttpClient::new(&server_url, Some(bubble_tests::APP_SECRET));
            for n in 0..PUBLISHES {
                let body =
                    json!({"channel": format!("news-{channel}"), "name": "tick", "data": {"n": n}});
                let (status, response) = backend
                    .post(&format!("/api/apps/{}/events", bubble_tests::APP_ID), &body)
                    .await;
                assert_eq!(status, 202, "{response}");
            }
        }));
    }
    for send in sends {
        send.await.expect("publisher");
    }
    for (channel, socket) in &mut sockets {
        for n in 0..PUBLISHES {
            let frame = socket.ws.recv_json().await;
            assert_eq!(frame["channel"], format!("news-{channel}"), "{frame}");
            let event: Value =
                serde_json::from_str(frame["data"].as_str().expect("data is a string"))
                    .expect("data is JSON");
            assert_eq!(event, json!({"name": "tick", "data": {"n": n}}));
        }
        socket
            .ws
            .expect_no_frame_within(Duration::from_millis(50))
            .await;
    }
    // The server still answers after the burst.
    publish(
        &server,
        &json!({"channel": "news-0", "name": "after", "data": null}),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thread_events_arrive_once_in_order() {
    let server = Server::start(&config());
    started_with_writers(&server);
    let alice = server.http(ALICE);
    create_thread(&alice, "writers").await;
    let mut sockets = Vec::new();
    for _ in 0..SUBSCRIBERS / 2 {
        let mut ws = server.ws(ALICE).await;
        assert_eq!(subscribe(&mut ws, "writers", None).await, 0);
        sockets.push(ws);
    }
    let mut appender = server.ws(ALICE).await;
    for n in 0..PUBLISHES {
        appender
            .send_json(&json!({"type": "thread.append", "threadId": "writers",
                               "event": run_started(&format!("run-{n}"))}))
            .await;
    }
    for ws in &mut sockets {
        for seq in 1..=PUBLISHES as u64 {
            let event = expect_event(ws, "writers", seq).await;
            assert_eq!(event["runId"], format!("run-{}", seq - 1));
        }
    }
}
