//! Multiplexing: one socket carries several threads; every frame names the
//! thread it belongs to and each thread's events arrive in seq order.

use std::collections::BTreeMap;

use bubble_tests::threads::{append, create_thread, error_frame, message_part, subscribe};
use bubble_tests::{Server, ALICE, TEST_CONFIG};
use serde_json::json;

const THREADS: [&str; 4] = ["alpha", "beta", "gamma", "delta"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_socket_many_threads() {
    let server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);
    for (i, thread) in THREADS.iter().enumerate() {
        create_thread(&alice, thread).await;
        // Different backlogs per thread: 0, 3, 6, 9 events.
        for k in 0..(i * 3) {
            append(
                &alice,
                thread,
                &message_part(thread, &format!("{thread} {}", k + 1)),
            )
            .await;
        }
    }

    let mut ws = server.ws(ALICE).await;
    let mut expected: BTreeMap<&str, u64> = BTreeMap::new();
    for (i, thread) in THREADS.iter().enumerate() {
        let through = subscribe_collecting(&mut ws, thread, &mut expected).await;
        assert_eq!(through, (i * 3) as u64);
    }

    // Interleaved live appends over HTTP and over the same socket.
    for round in 0..5 {
        for thread in THREADS {
            if round % 2 == 0 {
                append(&alice, thread, &message_part(thread, "live")).await;
            } else {
                ws.send_json(&json!({"type": "thread.append", "threadId": thread,
                                     "event": message_part(thread, "live")}))
                    .await;
            }
        }
    }
    // A scoped error names its own thread and disturbs no other.
    ws.send_json(&json!({"type": "thread.subscribe", "threadId": "missing"}))
        .await;

    let target: BTreeMap<&str, u64> = THREADS
        .iter()
        .enumerate()
        .map(|(i, t)| (*t, (i * 3 + 5) as u64))
        .collect();
    let mut seen_error = false;
    let mut seen_closed = false;
    while expected != target || !seen_error || !seen_closed {
        let frame = ws.recv_json().await;
        match frame["type"].as_str().unwrap() {
            "thread.event" => {
                let thread = frame["threadId"].as_str().unwrap();
                assert_eq!(
                    frame["event"]["threadId"], thread,
                    "frame and event agree: {frame}"
                );
                let next = expected.get_mut(thread).expect("a subscribed thread");
                *next += 1;
                assert_eq!(frame["event"]["seq"], *next, "in order per thread: {frame}");
                assert_eq!(
                    frame["event"]["runId"], thread,
                    "the event of this thread: {frame}"
                );
            }
            "error" => {
                error_frame(&frame, "not_found", Some("missing"));
                seen_error = true;
            }
            "thread.subscription_closed" => {
                assert_eq!(frame["threadId"], "missing");
                assert!(seen_error, "error comes before subscription_closed");
                seen_closed = true;
            }
            other => panic!("unexpected frame type {other}: {frame}"),
        }
    }
    ws.expect_no_frame_within(std::time::Duration::from_millis(300))
        .await;
}

/// Subscribes to `thread` and records each backlog event before returning.
async fn subscribe_collecting<'a>(
    ws: &mut bubble_tests::WsClient,
    thread: &'a str,
    expected: &mut BTreeMap<&'a str, u64>,
) -> u64 {
    let through = subscribe(ws, thread, None).await;
    for seq in 1..=through {
        let frame = ws.recv_json().await;
        assert_eq!(frame["threadId"], thread, "{frame}");
        assert_eq!(frame["event"]["seq"], seq);
    }
    expected.insert(thread, through);
    through
}
