//! Failures of the services a cluster runs on, mid-load: Redis restarted,
//! its pub/sub connection cut, the broker wedged, PostgreSQL unreachable.
//! Delivery resumes and nothing acknowledged is lost; `/readyz` is unready
//! while the service is gone.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bubble_tests::threads::{append_until, create_thread, error_code, message_part, subscribe};
use bubble_tests::{
    readyz, wait_readyz, Deployment, OwnRedis, Proxy, Server, WsClient, ALICE, HANG_TIMEOUT,
    TEST_CONFIG,
};
use serde_json::Value;

/// Reads `thread`'s events until seq `head`; asserts 1..=head, once, in order.
async fn expect_all(ws: &mut WsClient, thread: &str, head: u64) {
    let mut seqs = Vec::new();
    while seqs.last().copied() != Some(head) {
        let frame = tokio::time::timeout(HANG_TIMEOUT, ws.recv_json())
            .await
            .unwrap_or_else(|_| panic!("stuck after {:?}", seqs.last()));
        assert_eq!(frame["type"], "thread.event", "{frame}");
        assert_eq!(frame["threadId"], thread);
        seqs.push(frame["event"]["seq"].as_u64().expect("seq"));
    }
    assert_eq!(seqs, (1..=head).collect::<Vec<_>>());
}

fn metric(server: &Server, name: &str) -> u64 {
    let response = bubble_tests::raw_request(
        server.addr(),
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    bubble_tests::metric_sample(&response.text(), name)
        .unwrap_or_else(|| panic!("no metric {name}")) as u64
}

/// Two nodes on `redis`; appends on `a`, a subscriber on `b`; `disturb`
/// runs mid-load; afterwards `b`'s subscriber has every event once.
async fn survives(redis: &mut OwnRedis, disturb: impl FnOnce(&mut OwnRedis, &Server, &Server)) {
    let mut deployment = Deployment::with_broker(Some(redis.url()));
    let (a, b) = (deployment.node(TEST_CONFIG), deployment.node(TEST_CONFIG));
    create_thread(&a.http(ALICE), "live").await;
    let mut ws = b.ws(ALICE).await;
    subscribe(&mut ws, "live", Some(1)).await;
    let stop = Arc::new(AtomicBool::new(false));
    let appends = append_until(a.http(ALICE), "live", stop.clone());
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    disturb(redis, &a, &b);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    stop.store(true, Ordering::SeqCst);
    let head = appends.await.expect("writer");
    assert!(head > 0);
    expect_all(&mut ws, "live", head).await;
    wait_readyz(&a, 200);
    wait_readyz(&b, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_restart_loses_nothing() {
    let mut redis = OwnRedis::start();
    survives(&mut redis, |redis, a, b| {
        redis.stop();
        wait_readyz(a, 503);
        wait_readyz(b, 503);
        redis.restart();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_pubsub_connection_loses_nothing() {
    let mut redis = OwnRedis::start();
    survives(&mut redis, |redis, _, b| {
        let before = metric(b, "bubble_broker_reconnects_total");
        let killed = redis.cli(&["CLIENT", "KILL", "TYPE", "pubsub"]);
        assert!(
            killed.is_some_and(|n| n != "0"),
            "no pub/sub client to kill"
        );
        let deadline = std::time::Instant::now() + HANG_TIMEOUT;
        while metric(b, "bubble_broker_reconnects_total") == before {
            assert!(std::time::Instant::now() < deadline, "b never resubscribed");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wedged_broker_makes_the_node_unready_until_it_answers() {
    let redis = OwnRedis::start();
    let proxy = Proxy::start(redis.addr()).await;
    let mut deployment = Deployment::with_broker(Some(format!("redis://{}", proxy.addr())));
    let (a, b) = (deployment.node(TEST_CONFIG), deployment.node(TEST_CONFIG));
    create_thread(&a.http(ALICE), "quiet").await;
    let mut ws = b.ws(ALICE).await;
    subscribe(&mut ws, "quiet", Some(1)).await;
    proxy.freeze();
    wait_readyz(&b, 503);
    // Appends go on while the broker hangs.
    for i in 0..5 {
        let (status, body) = a
            .http(ALICE)
            .post(
                "/v1/threads/quiet/events",
                &message_part("r", &format!("{i}")),
            )
            .await;
        assert_eq!(status, 201, "{body}");
    }
    proxy.restore();
    wait_readyz(&b, 200);
    expect_all(&mut ws, "quiet", 5).await;
    assert_eq!(readyz(&a), 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losing_postgres_answers_unavailable_and_recovers_without_a_restart() {
    let postgres: std::net::SocketAddr = ([127, 0, 0, 1], 5432).into();
    let proxy = Proxy::start(postgres).await;
    let mut deployment = Deployment::new().postgres_via(proxy.addr());
    let node = deployment.node(TEST_CONFIG);
    let alice = node.http(ALICE);
    create_thread(&alice, "durable").await;
    let mut ws = node.ws(ALICE).await;
    subscribe(&mut ws, "durable", Some(1)).await;

    proxy.cut();
    let (status, body) = alice
        .post("/v1/threads/durable/events", &message_part("r", "lost"))
        .await;
    assert_eq!(status, 503, "{body}");
    error_code(&body, "unavailable");
    let (status, body) = alice.get("/v1/threads/other-thread").await;
    assert_eq!(status, 503, "{body}");
    wait_readyz(&node, 503);

    proxy.restore();
    wait_readyz(&node, 200);
    let (status, body) = alice
        .post("/v1/threads/durable/events", &message_part("r", "kept"))
        .await;
    assert_eq!(status, 201, "{body}");
    let stored: Value = body["event"].clone();
    let seq = stored["seq"].as_u64().expect("seq");
    // The refused append was not stored: the next one got seq 1.
    assert_eq!(seq, 1);
    let frame = tokio::time::timeout(HANG_TIMEOUT, ws.recv_json())
        .await
        .expect("delivered");
    assert_eq!(frame["event"]["seq"], 1, "{frame}");
}
