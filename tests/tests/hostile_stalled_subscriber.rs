//! A subscriber that stops reading during live traffic, on `/v1/ws` and on
//! `/socket`: the server closes it as a slow consumer (counted on
//! `/metrics`) instead of queueing without bound, its memory stays bounded
//! while far more than its queue is published, and a subscriber that reads
//! receives every event.

mod channels_common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bubble_tests::threads::{create_thread, subscribe};
use bubble_tests::{Server, WsClient, ALICE, HANG_TIMEOUT};
use channels_common::{backend, config_with, connect, events_path};
use serde_json::{json, Value};

/// Bytes sent toward the stalled subscriber: far beyond what its queue and
/// the kernel's socket buffers hold.
const PUSHED: usize = 64 << 20;
/// The server's resident memory may grow by less than this meanwhile.
const RSS_GROWTH_LIMIT: u64 = 40 << 20;

fn config() -> String {
    config_with("[limits]\noutbound_queue_frames = 256\nmax_publish_data_bytes = 65536\n")
}

/// The server's resident set size, in bytes.
fn rss(server: &Server) -> u64 {
    let pid = server.pid().expect("running");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .expect("VmRSS")
        * 1024
}

async fn metric(server: &Server, name: &str) -> u64 {
    let text = server
        .http_anonymous()
        .request("GET", "/metrics", &[], Vec::new())
        .await
        .text();
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{name} in metrics:\n{text}"))
}

/// Runs `send` `n` times on 8 concurrent tasks.
async fn in_parallel<F, Fut>(n: usize, send: F)
where
    F: Fn(usize) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let next = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (next, send) = (next.clone(), send.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let i = usize::try_from(next.fetch_add(1, Ordering::SeqCst)).expect("fits");
                if i >= n {
                    break;
                }
                send(i).await;
            }
        }));
    }
    for task in tasks {
        task.await.expect("sender");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stalled_threads_subscriber_is_closed_and_others_get_everything() {
    let server = Server::start(&config());
    let alice = server.http(ALICE);
    create_thread(&alice, "live").await;
    // Subscribed, then never read again.
    let mut stalled = server.ws(ALICE).await;
    subscribe(&mut stalled, "live", None).await;
    let mut reader = server.ws(ALICE).await;
    subscribe(&mut reader, "live", None).await;
    let before = rss(&server);

    let filler = "x".repeat(32 * 1024);
    let events = PUSHED / filler.len();
    let reading = tokio::spawn(async move {
        for seq in 1..=events as u64 {
            let frame = reader.recv_json().await;
            assert_eq!(frame["event"]["seq"], seq, "{frame}");
        }
        reader
    });
    in_parallel(events, move |i| {
        let alice = alice.clone();
        let filler = filler.clone();
        async move {
            let event = json!({"type": "message_part", "runId": "r", "version": "ai-sdk-v6",
                               "part": {"type": "text-delta", "id": format!("{i}"), "delta": filler}});
            let (status, body) = alice.post("/v1/threads/live/events", &event).await;
            assert_eq!(status, 201, "{body}");
        }
    })
    .await;
    let _reader = tokio::time::timeout(HANG_TIMEOUT, reading)
        .await
        .expect("the reader gets every event")
        .expect("reader");

    let growth = rss(&server).saturating_sub(before);
    eprintln!("threads: {events} events of 32 KiB pushed, server RSS grew {growth} bytes");
    stalled_one_was_closed(&server, growth).await;
    drop(stalled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stalled_channel_subscriber_is_closed_and_others_get_everything() {
    let server = Server::start(&config());
    let mut stalled = connect(&server).await;
    channels_common::subscribe(&mut stalled.ws, "live").await;
    let mut reader = connect(&server).await;
    channels_common::subscribe(&mut reader.ws, "live").await;
    let before = rss(&server);

    let filler = "x".repeat(48 * 1024);
    let publishes = PUSHED / filler.len();
    let mut reader: WsClient = reader.ws;
    let reading = tokio::spawn(async move {
        let mut seen = vec![false; publishes];
        for _ in 0..publishes {
            let frame = reader.recv_json().await;
            let inner: Value =
                serde_json::from_str(frame["data"].as_str().expect("data")).expect("data is JSON");
            let i: usize = inner["name"]
                .as_str()
                .expect("name")
                .parse()
                .expect("index");
            assert!(!seen[i], "delivered once: {i}");
            seen[i] = true;
        }
        reader
    });
    let app = backend(&server);
    in_parallel(publishes, move |i| {
        let app = app.clone();
        let filler = filler.clone();
        async move {
            let body = json!({"channel": "live", "name": format!("{i}"), "data": filler});
            let (status, response) = app.post(&events_path(), &body).await;
            assert_eq!(status, 202, "{response}");
        }
    })
    .await;
    let _reader = tokio::time::timeout(HANG_TIMEOUT, reading)
        .await
        .expect("the reader gets every publication")
        .expect("reader");

    let growth = rss(&server).saturating_sub(before);
    eprintln!("channels: {publishes} publications of 48 KiB, server RSS grew {growth} bytes");
    stalled_one_was_closed(&server, growth).await;
    drop(stalled);
}

/// Memory stayed bounded, the stalled socket was closed as a slow
/// consumer, and only the reader's socket is left open.
async fn stalled_one_was_closed(server: &Server, growth: u64) {
    assert!(growth < RSS_GROWTH_LIMIT, "RSS grew by {growth} bytes");
    assert_eq!(metric(server, "bubble_slow_consumer_closes_total").await, 1);
    assert_eq!(
        metric(server, "bubble_open_sockets").await,
        1,
        "the stalled one is gone"
    );
}
