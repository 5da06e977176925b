//! A subscriber that stops reading during live traffic, on `/v1/ws` and on
//! `/socket`: the server closes it as a slow consumer (counted on
//! `/metrics`) instead of queueing without bound, its memory stays bounded
//! while far more than its queue is published, a subscriber that reads
//! receives every event, and a client on another thread is served within
//! its normal latency.
//!
//! The push that overflows the stalled socket loads the server by itself,
//! so "normal latency" is measured under that same load: a probe times its
//! append round trips while the first eighth is pushed with every
//! subscriber reading (the baseline), then one subscriber stops reading
//! while the rest is pushed (during), then after; the bound is
//! [`bubble_tests::latency`]'s (which also says why this is one of the few
//! places a test looks at time). The two tests take turns, so that
//! neither's push is the other's noise.

mod channels_common;

use std::ops::Range;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bubble_tests::latency::{self, assert_served, Probe, Via, ROUND_TRIPS};
use bubble_tests::threads::{create_thread, subscribe};
use bubble_tests::{Server, WsClient, ALICE, DAVE, HANG_TIMEOUT};
use channels_common::{backend, config_with, connect, events_path};
use serde_json::{json, Value};

/// Bytes pushed in all; seven eighths of them after one subscriber
/// stopped reading: far beyond what its queue and the kernel's socket
/// buffers hold.
const PUSHED: usize = 64 << 20;
/// The server's resident memory may grow by less than this over the push.
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

/// Runs `send(i)` for every `i` of `range` on 8 concurrent tasks.
async fn in_parallel<F, Fut>(range: Range<usize>, send: F)
where
    F: Fn(usize) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let next = Arc::new(AtomicUsize::new(range.start));
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let (next, send, end) = (next.clone(), send.clone(), range.end);
        tasks.push(tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::SeqCst);
                if i >= end {
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
    let _turn = latency::turn().await;
    let server = Server::start(&config());
    let alice = server.http(ALICE);
    create_thread(&alice, "live").await;
    let mut stalled = server.ws(ALICE).await;
    subscribe(&mut stalled, "live", None).await;
    let mut reader = server.ws(ALICE).await;
    subscribe(&mut reader, "live", None).await;
    let probe = Probe::start(&server, DAVE, "probe", Via::Http).await;
    let before = rss(&server);

    let filler = "x".repeat(32 * 1024);
    let events = PUSHED / filler.len();
    let warm = events / 8;
    // It reads the first eighth, then never again.
    let stalling = tokio::spawn(async move {
        for seq in 1..=warm as u64 {
            let frame = stalled.recv_json().await;
            assert_eq!(frame["event"]["seq"], seq, "{frame}");
        }
        stalled
    });
    let reading = tokio::spawn(async move {
        for seq in 1..=events as u64 {
            let frame = reader.recv_json().await;
            assert_eq!(frame["event"]["seq"], seq, "{frame}");
        }
        reader
    });
    let push = move |range: Range<usize>| {
        let (alice, filler) = (alice.clone(), filler.clone());
        in_parallel(range, move |i| {
            let alice = alice.clone();
            let filler = filler.clone();
            async move {
                let event = json!({"type": "message_part", "runId": "r", "version": "ai-sdk-v6",
                                   "part": {"type": "text-delta", "id": format!("{i}"), "delta": filler}});
                let (status, body) = alice.post("/v1/threads/live/events", &event).await;
                assert_eq!(status, 201, "{body}");
            }
        })
    };

    // The baseline: the first eighth pushed, every subscriber reading.
    let warm_up = probe.during();
    push(0..warm).await;
    let (probe, baseline) = warm_up.stop().await;
    let stalled = tokio::time::timeout(HANG_TIMEOUT, stalling)
        .await
        .expect("the first eighth reaches both")
        .expect("stalled");

    // One subscriber has stopped reading; the rest is pushed.
    let during = probe.during();
    push(warm..events).await;
    let _reader = tokio::time::timeout(HANG_TIMEOUT, reading)
        .await
        .expect("the reader gets every event")
        .expect("reader");

    let growth = rss(&server).saturating_sub(before);
    eprintln!(
        "threads: {events} events of 32 KiB pushed, {} after one subscriber stopped reading; server RSS grew {growth} bytes",
        events - warm
    );
    let (mut probe, during) = during.stop().await;
    let after = probe.measure(ROUND_TRIPS).await;
    stalled_one_was_closed(&server, growth).await;
    assert_served("a stalled /v1/ws subscriber", &baseline, &during, &after);
    drop(stalled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stalled_channel_subscriber_is_closed_and_others_get_everything() {
    let _turn = latency::turn().await;
    let server = Server::start(&config());
    let mut stalled = connect(&server).await;
    channels_common::subscribe(&mut stalled.ws, "live").await;
    let reader = connect(&server).await;
    let mut reader: WsClient = reader.ws;
    channels_common::subscribe(&mut reader, "live").await;
    let probe = Probe::start(&server, DAVE, "probe", Via::Http).await;
    let before = rss(&server);

    let filler = "x".repeat(48 * 1024);
    let publishes = PUSHED / filler.len();
    let warm = publishes / 8;
    // It reads the first eighth, then never again.
    let stalling = tokio::spawn(async move {
        for _ in 0..warm {
            let frame = stalled.ws.recv_json().await;
            assert_eq!(frame["channel"], "live", "{frame}");
        }
        stalled
    });
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
    let push = move |range: Range<usize>| {
        let (app, filler) = (app.clone(), filler.clone());
        in_parallel(range, move |i| {
            let app = app.clone();
            let filler = filler.clone();
            async move {
                let body = json!({"channel": "live", "name": format!("{i}"), "data": filler});
                let (status, response) = app.post(&events_path(), &body).await;
                assert_eq!(status, 202, "{response}");
            }
        })
    };

    // The baseline: the first eighth published, every subscriber reading.
    let warm_up = probe.during();
    push(0..warm).await;
    let (probe, baseline) = warm_up.stop().await;
    let stalled = tokio::time::timeout(HANG_TIMEOUT, stalling)
        .await
        .expect("the first eighth reaches both")
        .expect("stalled");

    // One subscriber has stopped reading; the rest is published.
    let during = probe.during();
    push(warm..publishes).await;
    let _reader = tokio::time::timeout(HANG_TIMEOUT, reading)
        .await
        .expect("the reader gets every publication")
        .expect("reader");

    let growth = rss(&server).saturating_sub(before);
    eprintln!(
        "channels: {publishes} publications of 48 KiB, {} after one subscriber stopped reading; server RSS grew {growth} bytes",
        publishes - warm
    );
    let (mut probe, during) = during.stop().await;
    let after = probe.measure(ROUND_TRIPS).await;
    stalled_one_was_closed(&server, growth).await;
    assert_served("a stalled /socket subscriber", &baseline, &during, &after);
    drop(stalled);
}

/// Memory stayed bounded, the stalled socket was closed as a slow
/// consumer, and only the reader's and the probe's sockets are left open.
async fn stalled_one_was_closed(server: &Server, growth: u64) {
    assert!(growth < RSS_GROWTH_LIMIT, "RSS grew by {growth} bytes");
    assert_eq!(server.metric("bubble_slow_consumer_closes_total").await, 1);
    assert_eq!(
        server.metric("bubble_open_sockets").await,
        2,
        "the stalled one is gone"
    );
}
