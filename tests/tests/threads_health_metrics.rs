//! `/healthz`, `/readyz` and `/metrics` (Prometheus text).

use bubble_tests::threads::{append, create_thread, run_started, subscribe};
use bubble_tests::{metric_sample, Server, ALICE, TEST_CONFIG};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_and_readiness() {
    let server = Server::start(TEST_CONFIG);
    let client = server.http_anonymous();
    let healthz = client.request("GET", "/healthz", &[], Vec::new()).await;
    assert_eq!(healthz.status, 200, "{}", healthz.text());
    let readyz = client.request("GET", "/readyz", &[], Vec::new()).await;
    assert_eq!(readyz.status, 200, "{}", readyz.text());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_what_happened() {
    let server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);
    create_thread(&alice, "thread-1").await;
    for i in 0..3 {
        append(&alice, "thread-1", &run_started(&format!("r{i}"))).await;
    }
    let mut ws = server.ws(ALICE).await;
    subscribe(&mut ws, "thread-1", Some(4)).await;
    ws.send_text("not json").await;
    ws.recv_json().await;
    let (status, _) = alice.get("/v1/threads/missing").await;
    assert_eq!(status, 404);

    let res = server
        .http_anonymous()
        .request("GET", "/metrics", &[], Vec::new())
        .await;
    assert_eq!(res.status, 200);
    let content_type = res.header("content-type").unwrap_or_default();
    assert!(content_type.starts_with("text/plain"), "{content_type}");
    let text = res.text();
    for name in [
        "bubble_ws_connections",
        "bubble_subscriptions",
        "bubble_events_appended_total",
        "bubble_frames_in_total",
        "bubble_frames_out_total",
        "bubble_errors_total",
    ] {
        assert!(
            text.contains(&format!("# TYPE {name} ")),
            "{name} missing:\n{text}"
        );
    }
    assert_eq!(
        metric_sample(&text, "bubble_ws_connections"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        metric_sample(&text, "bubble_subscriptions"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        metric_sample(&text, "bubble_events_appended_total"),
        Some(3.0),
        "{text}"
    );
    assert!(
        metric_sample(&text, "bubble_frames_in_total").unwrap_or(0.0) >= 2.0,
        "{text}"
    );
    assert!(
        metric_sample(&text, "bubble_frames_out_total").unwrap_or(0.0) >= 2.0,
        "{text}"
    );
    assert!(
        metric_sample(&text, "bubble_errors_total{code=\"invalid_request\"}").unwrap_or(0.0) >= 1.0,
        "{text}"
    );
    assert!(
        metric_sample(&text, "bubble_errors_total{code=\"not_found\"}").unwrap_or(0.0) >= 1.0,
        "{text}"
    );
}
