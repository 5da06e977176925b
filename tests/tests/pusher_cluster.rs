//! Pusher's `terminate_connections` in a cluster: asked on one node, it
//! closes the user's sockets on the others too.

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
