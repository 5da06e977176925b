//! Pusher's HTTP API in a cluster: `terminate_connections` asked on one
//! node closes the user's sockets on the others too, and the channel
//! queries answer for every node's subscribers on any node.

use bubble_tests::pusher::{connect_pusher, signed, unix_now, PusherSocket};
use bubble_tests::{hmac_sha256_hex, Deployment, Server, APP_KEY, APP_SECRET, TEST_CONFIG};
use serde_json::json;

async fn join(node: &Server, channel: &str, user: &str) -> PusherSocket {
    let mut s = connect_pusher(node, APP_KEY).await;
    let data = json!({ "user_id": user }).to_string();
    let auth = format!(
        "{APP_KEY}:{}",
        hmac_sha256_hex(APP_SECRET, &format!("{}:{channel}:{data}", s.socket_id))
    );
    let ack = s
        .subscribe(json!({ "channel": channel, "auth": auth, "channel_data": data }))
        .await;
    assert_eq!(ack["event"], "pusher_internal:subscription_succeeded");
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminate_connections_reaches_every_node() {
    let mut deployment = Deployment::new();
    let (a, b) = (deployment.node(TEST_CONFIG), deployment.node(TEST_CONFIG));
    let mut doomed = join(&b, "presence-ops", "u1").await;
    let mut bystander = join(&b, "presence-ops", "u2").await;

    let path = "/apps/app-1/users/u1/terminate_connections";
    let response = signed(
        &a,
        (APP_KEY, APP_SECRET),
        "POST",
        path,
        &[],
        b"{}",
        unix_now(),
    )
    .await;
    assert_eq!((response.status, response.json()), (200, json!({})));
    let frames = doomed.ws.recv_until(|f| f["event"] == "pusher:error").await;
    assert_eq!(
        frames.last().map(|f| f["data"]["code"].clone()),
        Some(json!(4009))
    );
    assert_eq!(doomed.ws.recv_close().await, Some(4009));
    let left = bystander
        .ws
        .recv_until(|f| f["event"] == "pusher_internal:member_removed")
        .await;
    assert_eq!(
        left.last().map(|f| f["data"].clone()),
        Some(json!(json!({ "user_id": "u1" }).to_string()))
    );
    bystander.ping_pong().await;
}

/// Asks `node` for `path` until `done` holds for its JSON answer (the
/// other node's counts arrive over the broker); returns that answer.
async fn query_until(
    node: &Server,
    path: &str,
    params: &[(&str, &str)],
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = std::time::Instant::now() + bubble_tests::HANG_TIMEOUT;
    loop {
        let response = signed(
            node,
            (APP_KEY, APP_SECRET),
            "GET",
            path,
            params,
            b"",
            unix_now(),
        )
        .await;
        assert_eq!(response.status, 200, "{}", response.text());
        let body = response.json();
        if done(&body) {
            return body;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{path} never satisfied the check: {body}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn channel_queries_count_every_nodes_subscribers() {
    let mut deployment = Deployment::new();
    let (a, b) = (deployment.node(TEST_CONFIG), deployment.node(TEST_CONFIG));
    let mut on_a = Vec::new();
    for _ in 0..2 {
        let mut s = connect_pusher(&a, APP_KEY).await;
        s.subscribe(json!({ "channel": "news" })).await;
        on_a.push(s);
    }
    let _member = join(&a, "presence-ops", "u1").await;
    let mut on_b = connect_pusher(&b, APP_KEY).await;
    on_b.subscribe(json!({ "channel": "news" })).await;

    let info = [("info", "subscription_count")];
    let news = query_until(&b, "/apps/app-1/channels/news", &info, |body| {
        body["subscription_count"] == 3
    })
    .await;
    assert_eq!(news, json!({ "occupied": true, "subscription_count": 3 }));
    let all = query_until(&b, "/apps/app-1/channels", &info, |body| {
        body["channels"]["presence-ops"]["subscription_count"] == 1
    })
    .await;
    assert_eq!(
        all,
        json!({ "channels": {
            "news": { "subscription_count": 3 },
            "presence-ops": { "subscription_count": 1 },
        } })
    );
    let ops = query_until(
        &b,
        "/apps/app-1/channels/presence-ops",
        &[("info", "user_count,subscription_count")],
        |body| body["user_count"] == 1,
    )
    .await;
    assert_eq!(
        ops,
        json!({ "occupied": true, "user_count": 1, "subscription_count": 1 })
    );

    // Node a's subscribers leave: b sees the channel held by its own alone,
    // then not at all.
    for s in on_a.drain(..) {
        s.ws.close(1000).await;
    }
    query_until(&b, "/apps/app-1/channels/news", &info, |body| {
        body["subscription_count"] == 1
    })
    .await;
    on_b.ws.close(1000).await;
    let gone = query_until(&a, "/apps/app-1/channels/news", &[], |body| {
        body["occupied"] == false
    })
    .await;
    assert_eq!(gone, json!({ "occupied": false }));
}
