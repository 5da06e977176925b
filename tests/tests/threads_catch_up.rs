//! The seed's catch-up strategy: page history over HTTP until `nextSeq` is
//! null, subscribe with the next `fromSeq`, dedupe the overlap with
//! `throughSeq`: every event is seen exactly once, in order.

use std::collections::BTreeMap;

use bubble_tests::threads::{append, create_thread, message_part, page_all, subscribe};
use bubble_tests::{Server, ALICE, TEST_CONFIG};
use serde_json::Value;

/// Collects `thread.event` frames until `last` has been seen.
async fn collect_until(ws: &mut bubble_tests::WsClient, last: u64) -> Vec<Value> {
    let mut events = Vec::new();
    loop {
        let frame = ws.recv_json().await;
        assert_eq!(frame["type"], "thread.event", "{frame}");
        assert_eq!(frame["threadId"], "thread-1");
        let seq = frame["event"]["seq"].as_u64().unwrap();
        events.push(frame["event"].clone());
        if seq == last {
            return events;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_pages_then_subscribe_sees_everything_once() {
    let server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);
    create_thread(&alice, "thread-1").await;
    for i in 1..=250 {
        append(&alice, "thread-1", &message_part("run-1", &i.to_string())).await;
    }

    // HTTP first: full pages of 100, then a last page whose nextSeq is null.
    let (history, next) = page_all(&alice, "thread-1", 100).await;
    assert_eq!(history.len(), 250);
    assert_eq!(next, 251);

    // Events appended between the last page and the subscribe.
    for i in 251..=260 {
        append(&alice, "thread-1", &message_part("run-1", &i.to_string())).await;
    }

    let mut ws = server.ws(ALICE).await;
    let through = subscribe(&mut ws, "thread-1", Some(next)).await;
    assert_eq!(through, 260);
    for i in 261..=270 {
        append(&alice, "thread-1", &message_part("run-1", &i.to_string())).await;
    }
    let socket = collect_until(&mut ws, 270).await;

    let mut seen: BTreeMap<u64, Value> = BTreeMap::new();
    for event in history.into_iter().chain(socket) {
        let seq = event["seq"].as_u64().unwrap();
        assert!(seen.insert(seq, event).is_none(), "seq {seq} seen twice");
    }
    assert_eq!(
        seen.keys().copied().collect::<Vec<_>>(),
        (1..=270).collect::<Vec<_>>()
    );
    for (seq, event) in &seen {
        assert_eq!(event["part"]["delta"], seq.to_string());
    }
}

/// A client that subscribes from an older seq than it needs (say, the
/// start of its last HTTP page) dedupes deterministically: whatever has
/// `seq <= throughSeq` was backlog and may overlap what HTTP returned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overlap_is_deduped_with_through_seq() {
    let server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);
    create_thread(&alice, "thread-1").await;
    for i in 1..=30 {
        append(&alice, "thread-1", &message_part("run-1", &i.to_string())).await;
    }
    let (history, next) = page_all(&alice, "thread-1", 7).await;
    assert_eq!(next, 31);
    let last_page_start = 29; // pages of 7: 1-7, …, 22-28, 29-30

    let mut ws = server.ws(ALICE).await;
    let through = subscribe(&mut ws, "thread-1", Some(last_page_start)).await;
    assert_eq!(through, 30);
    append(&alice, "thread-1", &message_part("run-1", "31")).await;
    let socket = collect_until(&mut ws, 31).await;
    let seqs: Vec<u64> = socket.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, vec![29, 30, 31], "backlog from fromSeq, then live");

    let mut processed: Vec<u64> = history.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    let highest_from_http = *processed.last().unwrap();
    for event in &socket {
        let seq = event["seq"].as_u64().unwrap();
        if seq <= through && seq <= highest_from_http {
            continue; // backlog overlapping the HTTP pages
        }
        processed.push(seq);
    }
    assert_eq!(processed, (1..=31).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_rules() {
    let server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);
    create_thread(&alice, "thread-1").await;
    let (status, empty) = alice.get("/v1/threads/thread-1/events").await;
    assert_eq!(status, 200, "{empty}");
    assert_eq!(empty, serde_json::json!({"events": [], "nextSeq": null}));

    for i in 1..=105 {
        append(&alice, "thread-1", &message_part("run-1", &i.to_string())).await;
    }
    // Defaults: fromSeq=1, limit=100.
    let (_, page) = alice.get("/v1/threads/thread-1/events").await;
    assert_eq!(page["events"].as_array().unwrap().len(), 100);
    assert_eq!(page["nextSeq"], 101);
    let (_, page) = alice
        .get("/v1/threads/thread-1/events?fromSeq=101&limit=5")
        .await;
    assert_eq!(page["events"].as_array().unwrap().len(), 5);
    assert_eq!(page["nextSeq"], Value::Null, "the page reached headSeq");
    let (_, page) = alice
        .get("/v1/threads/thread-1/events?fromSeq=100&limit=1")
        .await;
    assert_eq!(page["events"][0]["seq"], 100);
    assert_eq!(page["nextSeq"], 101);
    let (_, page) = alice.get("/v1/threads/thread-1/events?fromSeq=106").await;
    assert_eq!(page, serde_json::json!({"events": [], "nextSeq": null}));
    let (status, page) = alice.get("/v1/threads/thread-1/events?limit=1000").await;
    assert_eq!(status, 200);
    assert_eq!(page["events"].as_array().unwrap().len(), 105);

    for bad in [
        "fromSeq=0",
        "fromSeq=-1",
        "fromSeq=abc",
        "limit=0",
        "limit=1001",
        "limit=x",
    ] {
        let (status, body) = alice
            .get(&format!("/v1/threads/thread-1/events?{bad}"))
            .await;
        assert_eq!(status, 400, "{bad}: {body}");
        bubble_tests::threads::error_code(&body, "invalid_request");
    }
}
