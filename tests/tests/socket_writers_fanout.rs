//! Fan-out written each way the server can write its sockets: by the
//! engine's thread through one `io_uring` submission per turn (the default
//! on Linux), by the engine's thread with one `send` per socket
//! (`io_uring = false`), and by writer threads (`io_threads`), where frames
//! for one socket are queued by the engine and written by another thread;
//! and with a write delay (`write_delay_ms`), where a socket's frames wait
//! to share one send. Every way, every subscriber gets every frame once, whole and in order,
//! on both protocols.

mod channels_common;

use bubble_tests::threads::{create_thread, expect_event, run_started, subscribe};
use bubble_tests::{Server, Store, ALICE, TEST_CONFIG};
use channels_common::{expect_published_ticks, publish, spawn_tick_publishers, subscribe_spread};
use serde_json::json;

const SUBSCRIBERS: usize = 40;
const CHANNELS: usize = 4;
const PUBLISHES: usize = 150;

/// How the server under test writes its sockets.
#[derive(Debug, Clone, Copy)]
enum Writing {
    /// The engine's thread, one `io_uring` submission per turn (the
    /// default below 4 cores).
    Ring,
    /// The engine's thread, one `send` per socket.
    Send,
    /// Three writer threads.
    WriterThreads,
    /// The engine's thread through the ring, each socket written 20 ms
    /// after its first frame.
    Delayed,
}

impl Writing {
    fn config(self) -> String {
        let line = match self {
            Writing::Ring => "io_threads = 0\n",
            Writing::Send => "io_threads = 0\nio_uring = false\n",
            Writing::WriterThreads => "io_threads = 3\n",
            Writing::Delayed => "io_threads = 0\nwrite_delay_ms = 20\n",
        };
        format!("{line}{TEST_CONFIG}")
    }

    /// Checks in the server's log that it writes this way.
    fn check(self, server: &Server) {
        let logs = server.logs();
        let ring = logs.contains("the engine writes sockets through io_uring");
        let (says, ring_wanted) = match self {
            Writing::Ring => ("io_threads=0", true),
            Writing::Send => ("io_uring=false", false),
            Writing::WriterThreads => ("io_threads=3", false),
            Writing::Delayed => ("write_delay_ms=20", true),
        };
        assert!(logs.contains(says), "the server says {says}:\n{logs}");
        assert_eq!(ring, ring_wanted, "{self:?} and the ring:\n{logs}");
    }
}

async fn channel_publications_arrive_once_in_order(writing: Writing) {
    let server = Server::start_with_store(&writing.config(), Store::Memory);
    writing.check(&server);
    let mut sockets = subscribe_spread(&server, SUBSCRIBERS, CHANNELS).await;
    // Publications to every channel, sent concurrently so that engine
    // turns carry several frames per socket.
    let sends = spawn_tick_publishers(&server, CHANNELS, PUBLISHES);
    expect_published_ticks(sends, &mut sockets, PUBLISHES).await;
    // The server still answers after the burst.
    publish(
        &server,
        &json!({"channel": "news-0", "name": "after", "data": null}),
    )
    .await;
}

async fn thread_events_arrive_once_in_order(writing: Writing) {
    let server = Server::start(&writing.config());
    writing.check(&server);
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channel_publications_through_the_ring() {
    channel_publications_arrive_once_in_order(Writing::Ring).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channel_publications_with_one_send_per_socket() {
    channel_publications_arrive_once_in_order(Writing::Send).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channel_publications_through_writer_threads() {
    channel_publications_arrive_once_in_order(Writing::WriterThreads).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thread_events_through_the_ring() {
    thread_events_arrive_once_in_order(Writing::Ring).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thread_events_with_one_send_per_socket() {
    thread_events_arrive_once_in_order(Writing::Send).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thread_events_through_writer_threads() {
    thread_events_arrive_once_in_order(Writing::WriterThreads).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channel_publications_with_a_write_delay() {
    channel_publications_arrive_once_in_order(Writing::Delayed).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thread_events_with_a_write_delay() {
    thread_events_arrive_once_in_order(Writing::Delayed).await;
}
