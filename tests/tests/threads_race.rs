//! The race: one task appends 1,000 events over HTTP as fast as it can
//! while another connection subscribes with `fromSeq=1` in the middle. The
//! subscriber sees 1..=1000 exactly once, in order, each with the body the
//! HTTP append acknowledged.

use std::collections::HashMap;

use bubble_tests::threads::{create_thread, message_part, subscribe};
use bubble_tests::{Server, ALICE, TEST_CONFIG};
use serde_json::Value;
use tokio::sync::watch;

const N: u64 = 1000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribe_during_appends_sees_each_event_once_in_order() {
    let server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);
    create_thread(&alice, "thread-1").await;

    let (progress_tx, mut progress) = watch::channel(0u64);
    let writer = alice.clone();
    let appender = tokio::spawn(async move {
        let mut acked = HashMap::new();
        for i in 1..=N {
            let body = message_part("run-1", &format!("event {i}"));
            let (status, res) = writer.post("/v1/threads/thread-1/events", &body).await;
            assert_eq!(status, 201, "{res}");
            acked.insert(res["event"]["seq"].as_u64().unwrap(), res["event"].clone());
            let _ = progress_tx.send(i);
        }
        acked
    });

    // Subscribe once a good part of the appends has been acknowledged, while
    // the rest are still in flight.
    progress
        .wait_for(|n| *n >= N / 3)
        .await
        .expect("appender alive");
    let mut ws = server.ws(ALICE).await;
    let through = subscribe(&mut ws, "thread-1", Some(1)).await;
    assert!((N / 3..=N).contains(&through), "throughSeq {through}");

    let mut received: Vec<Value> = Vec::new();
    while received.len() < N as usize {
        let frame = ws.recv_json().await;
        assert_eq!(frame["type"], "thread.event", "{frame}");
        assert_eq!(frame["threadId"], "thread-1");
        received.push(frame["event"].clone());
    }
    let acked = appender.await.expect("appender");

    let seqs: Vec<u64> = received
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(
        seqs,
        (1..=N).collect::<Vec<_>>(),
        "exactly once, in order, no gap"
    );
    for event in &received {
        let seq = event["seq"].as_u64().unwrap();
        assert_eq!(
            &acked[&seq], event,
            "the delivered event is the acknowledged one"
        );
    }
    ws.expect_no_frame_within(std::time::Duration::from_millis(300))
        .await;
}
