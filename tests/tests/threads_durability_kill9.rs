//! `kill -9` during an append load: every acknowledged (201) event, and
//! every event delivered live to a subscriber, is there after a restart on
//! the same SQLite file, and seqs have no gap.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bubble_tests::threads::{create_thread, message_part, page_all, subscribe};
use bubble_tests::{Server, WsClient, WsMessage, ALICE, HANG_TIMEOUT, TEST_CONFIG};
use serde_json::Value;

const WRITERS: usize = 4;
const THREADS: [&str; 2] = ["thread-a", "thread-b"];

/// Every event delivered live on `ws`, by thread, until the server dies.
async fn watch(mut ws: WsClient) -> Vec<(String, Value)> {
    let mut delivered = Vec::new();
    while let WsMessage::Text(text) = ws.recv().await {
        let frame: Value = serde_json::from_str(&text).expect("JSON frame");
        assert_eq!(frame["type"], "thread.event", "{frame}");
        let thread = frame["threadId"].as_str().expect("threadId").to_owned();
        delivered.push((thread, frame["event"].clone()));
    }
    delivered
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_acknowledged_event_is_lost() {
    let mut server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);
    for t in THREADS {
        create_thread(&alice, t).await;
    }
    let mut ws = server.ws(ALICE).await;
    for t in THREADS {
        subscribe(&mut ws, t, None).await;
    }
    let watcher = tokio::spawn(watch(ws));

    let acked_count = Arc::new(AtomicU64::new(0));
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let client = alice.clone();
        let count = acked_count.clone();
        writers.push(tokio::spawn(async move {
            let mut acked: Vec<(String, Value)> = Vec::new();
            for i in 0.. {
                let thread = THREADS[(w + i) % THREADS.len()];
                let body = message_part(&format!("w{w}"), &format!("{w}-{i}")).to_string();
                let path = format!("/v1/threads/{thread}/events");
                let headers = [("content-type", "application/json")];
                match client
                    .try_request("POST", &path, &headers, body.into_bytes())
                    .await
                {
                    Ok(res) if res.status == 201 => {
                        acked.push((thread.to_owned(), res.json()["event"].clone()));
                        count.fetch_add(1, Ordering::SeqCst);
                    }
                    Ok(res) => panic!("unexpected {}: {}", res.status, res.text()),
                    Err(_) => break, // the server is gone
                }
            }
            acked
        }));
    }

    // Kill once a good number of appends has been acknowledged, while the
    // writers are still going.
    let deadline = tokio::time::Instant::now() + HANG_TIMEOUT * 3;
    while acked_count.load(Ordering::SeqCst) < 300 {
        assert!(
            writers.iter().all(|w| !w.is_finished()),
            "a writer stopped before the kill"
        );
        assert!(tokio::time::Instant::now() < deadline, "appends hang");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    server.kill9();
    let mut acked = Vec::new();
    for w in writers {
        acked.extend(w.await.expect("writer"));
    }
    assert!(acked.len() >= 300);
    let delivered = watcher.await.expect("watcher");
    assert!(!delivered.is_empty(), "the subscriber saw live events");

    server.restart();
    let alice = server.http(ALICE);
    for t in THREADS {
        let (events, _) = page_all(&alice, t, 1000).await;
        let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
        assert_eq!(
            seqs,
            (1..=seqs.len() as u64).collect::<Vec<_>>(),
            "{t}: no gap"
        );
        let by_seq: BTreeMap<u64, &Value> = events
            .iter()
            .map(|e| (e["seq"].as_u64().unwrap(), e))
            .collect();
        for (thread, event) in acked.iter().filter(|(thread, _)| thread == t) {
            let seq = event["seq"].as_u64().unwrap();
            assert_eq!(
                by_seq.get(&seq),
                Some(&event),
                "{thread} seq {seq} was acknowledged"
            );
        }
        for (thread, event) in delivered.iter().filter(|(thread, _)| thread == t) {
            let seq = event["seq"].as_u64().unwrap();
            assert_eq!(
                by_seq.get(&seq),
                Some(&event),
                "{thread} seq {seq} was delivered"
            );
        }
        let (_, snapshot) = alice.get(&format!("/v1/threads/{t}")).await;
        assert_eq!(snapshot["headSeq"], seqs.len() as u64);
    }
}
