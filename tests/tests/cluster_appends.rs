//! Three nodes on one PostgreSQL schema and one Redis: 30 subscribers
//! spread over the nodes, 4 appenders on different nodes appending to the
//! same threads at once. Every subscriber sees each thread's events exactly
//! once, in order, with no gap; the final head is the number of
//! acknowledged appends; a retried idempotency key never stores twice.

use std::collections::BTreeMap;

use bubble_tests::threads::{create_thread, message_part, page_all, subscribe};
use bubble_tests::{Deployment, HttpClient, WsClient, ALICE, HANG_TIMEOUT, TEST_CONFIG};

const THREADS: [&str; 3] = ["hot-1", "hot-2", "hot-3"];
const SUBSCRIBERS: usize = 30;
const APPENDERS: usize = 4;
const APPENDS_EACH: usize = 60;

/// Receives until every thread reached `heads`; returns seqs per thread.
async fn collect(mut ws: WsClient, heads: BTreeMap<String, u64>) -> BTreeMap<String, Vec<u64>> {
    let mut seen: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let done = |seen: &BTreeMap<String, Vec<u64>>| {
        heads
            .iter()
            .all(|(t, h)| seen.get(t).and_then(|s| s.last()).copied().unwrap_or(0) >= *h)
    };
    while !done(&seen) {
        let frame = ws.recv_json().await;
        assert_eq!(frame["type"], "thread.event", "{frame}");
        let thread = frame["threadId"].as_str().expect("threadId").to_owned();
        seen.entry(thread)
            .or_default()
            .push(frame["event"]["seq"].as_u64().expect("seq"));
    }
    seen
}

async fn append_all(client: HttpClient, writer: usize) -> Vec<(String, u64, String)> {
    let mut acked = Vec::new();
    for i in 0..APPENDS_EACH {
        let thread = THREADS[(writer + i) % THREADS.len()];
        let key = format!("w{writer}-{i}");
        let path = format!("/v1/threads/{thread}/events");
        let event = message_part(&format!("w{writer}"), &key);
        let (status, body) = client.post_idempotent(&path, &event, &key).await;
        assert_eq!(status, 201, "{body}");
        let seq = body["event"]["seq"].as_u64().expect("seq");
        acked.push((thread.to_owned(), seq, key));
    }
    acked
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn appends_on_every_node_reach_every_subscriber_once_in_order() {
    let mut deployment = Deployment::new();
    let nodes: Vec<_> = (0..3).map(|_| deployment.node(TEST_CONFIG)).collect();
    for t in THREADS {
        create_thread(&nodes[0].http(ALICE), t).await;
    }
    let mut subscribers = Vec::new();
    for s in 0..SUBSCRIBERS {
        let mut ws = nodes[s % nodes.len()].ws(ALICE).await;
        for t in THREADS {
            assert_eq!(subscribe(&mut ws, t, Some(1)).await, 0);
        }
        subscribers.push(ws);
    }

    let appenders: Vec<_> = (0..APPENDERS)
        .map(|w| tokio::spawn(append_all(nodes[w % nodes.len()].http(ALICE), w)))
        .collect();
    let mut acked = Vec::new();
    for a in appenders {
        acked.extend(a.await.expect("appender"));
    }
    let mut heads: BTreeMap<String, u64> = BTreeMap::new();
    for (thread, _, _) in &acked {
        *heads.entry(thread.clone()).or_default() += 1;
    }

    let watchers: Vec<_> = subscribers
        .into_iter()
        .map(|ws| tokio::spawn(collect(ws, heads.clone())))
        .collect();
    for (i, watcher) in watchers.into_iter().enumerate() {
        let seen = tokio::time::timeout(HANG_TIMEOUT, watcher)
            .await
            .unwrap_or_else(|_| panic!("subscriber {i} did not see every event"))
            .expect("watcher");
        for (thread, head) in &heads {
            assert_eq!(
                seen[thread],
                (1..=*head).collect::<Vec<_>>(),
                "subscriber {i} on node {} saw {thread} out of order, twice or with a gap",
                i % 3
            );
        }
    }

    for (n, node) in nodes.iter().enumerate() {
        let alice = node.http(ALICE);
        for (thread, head) in &heads {
            let (events, next) = page_all(&alice, thread, 100).await;
            assert_eq!(next, head + 1, "node {n}: {thread}");
            let seqs: Vec<u64> = events
                .iter()
                .map(|e| e["seq"].as_u64().unwrap_or(0))
                .collect();
            assert_eq!(seqs, (1..=*head).collect::<Vec<_>>(), "node {n}: {thread}");
        }
    }

    // Retrying every acknowledged append on another node finds the stored
    // event: no key holds two events.
    for (i, (thread, seq, key)) in acked.iter().enumerate() {
        let node = &nodes[(i + 1) % nodes.len()];
        let path = format!("/v1/threads/{thread}/events");
        let writer = key.split('-').next().unwrap_or_default();
        let event = message_part(writer, key);
        let (status, body) = node.http(ALICE).post_idempotent(&path, &event, key).await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["duplicate"], true);
        assert_eq!(body["event"]["seq"], *seq);
    }
    let duplicates = deployment.sql(
        "SELECT count(*) FROM (SELECT 1 FROM events WHERE idempotency_key IS NOT NULL \
         GROUP BY thread_id, idempotency_key HAVING count(*) > 1) d",
    );
    assert_eq!(duplicates, ["0"]);
    let total: u64 = heads.values().sum();
    assert_eq!(total as usize, APPENDERS * APPENDS_EACH);
}
