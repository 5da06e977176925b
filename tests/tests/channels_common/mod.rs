//! Helpers shared by the `channels_*` tests: pubb sockets, signatures and
//! the HTTP publish/auth endpoints of the test app.

#![allow(dead_code)]

use bubble_tests::{hmac_sha256_hex, HttpClient, Server, WsClient, APP_ID, APP_KEY, APP_SECRET};
use serde_json::{json, Value};

/// A pubb socket and the `socket_id` from its connection event.
pub struct Socket {
    pub ws: WsClient,
    pub socket_id: String,
}

/// Opens `/socket?appKey=app-key&protocol=2` and reads the connection event.
pub async fn connect(server: &Server) -> Socket {
    connect_query(server, &format!("appKey={APP_KEY}&protocol=2")).await
}

/// Opens `/socket?<query>` and reads `pubb:connection_established`.
pub async fn connect_query(server: &Server, query: &str) -> Socket {
    let url = server.ws_url(&format!("/socket?{query}"));
    let mut ws = WsClient::connect(&url, None)
        .await
        .expect("connect /socket");
    let frame = ws.recv_json().await;
    assert_eq!(frame["event"], "pubb:connection_established", "{frame}");
    let data: Value = serde_json::from_str(frame["data"].as_str().expect("data is a string"))
        .expect("data is JSON");
    let socket_id = data["socket_id"].as_str().expect("socket_id").to_owned();
    Socket { ws, socket_id }
}

/// The app's backend: `Authorization: Bearer app-secret`.
pub fn backend(server: &Server) -> HttpClient {
    server.http(APP_SECRET)
}

/// `/api/apps/app-1/events`.
pub fn events_path() -> String {
    format!("/api/apps/{APP_ID}/events")
}

/// `/api/apps/app-1/auth`.
pub fn auth_path() -> String {
    format!("/api/apps/{APP_ID}/auth")
}

/// Publishes `body`, expecting 202; returns the response body.
pub async fn publish(server: &Server, body: &Value) -> Value {
    let (status, response) = backend(server).post(&events_path(), body).await;
    assert_eq!(status, 202, "{response}");
    response
}

/// `subscribe` to a public channel and expect the protocol=2 acknowledgement.
pub async fn subscribe(ws: &mut WsClient, channel: &str) {
    ws.send_json(&json!({"action": "subscribe", "channel": channel}))
        .await;
    expect_ack(ws, channel).await;
}

/// Expects `pubb:subscription_succeeded` for `channel` with data `"{}"`.
pub async fn expect_ack(ws: &mut WsClient, channel: &str) {
    let ack = ws.recv_json().await;
    assert_eq!(
        ack,
        json!({"event": "pubb:subscription_succeeded", "channel": channel, "data": "{}"})
    );
}

/// Expects `subscription_error` "Subscription not authorized" for `channel`.
pub async fn expect_not_authorized(ws: &mut WsClient, channel: &str) {
    let frame = ws.recv_json().await;
    assert_eq!(
        frame,
        json!({"event": "subscription_error", "channel": channel, "data": "Subscription not authorized"})
    );
}

/// `APP_KEY:hex(HMAC_SHA256(secret, socket_id:channel[:channel_data]))`, computed locally.
pub fn sign(socket_id: &str, channel: &str, channel_data: Option<&str>) -> String {
    let message = match channel_data {
        Some(data) => format!("{socket_id}:{channel}:{data}"),
        None => format!("{socket_id}:{channel}"),
    };
    format!("{APP_KEY}:{}", hmac_sha256_hex(APP_SECRET, &message))
}

/// The `channel_data` string for a user named `name`.
pub fn channel_data(user_id: &str, name: &str) -> String {
    json!({"user_id": user_id, "user_info": {"name": name}}).to_string()
}

/// Subscribes to presence `channel` as `user_id`, signing locally; returns
/// the acknowledgement's `data.presence`.
pub async fn join_presence(socket: &mut Socket, channel: &str, user_id: &str, name: &str) -> Value {
    let data = channel_data(user_id, name);
    let auth = sign(&socket.socket_id, channel, Some(&data));
    socket
        .ws
        .send_json(
            &json!({"action": "subscribe", "channel": channel, "auth": auth, "channel_data": data}),
        )
        .await;
    let ack = socket.ws.recv_json().await;
    assert_eq!(ack["event"], "pubb:subscription_succeeded", "{ack}");
    assert_eq!(ack["channel"], channel);
    ack["data"]["presence"].clone()
}

/// The `{channel, data}` envelope of a published event: `data` is the
/// string `{"name":…,"data":…}`, in that order (objects inside `data` must
/// have at most one key per level, as key order is kept by the server).
pub fn envelope(channel: &str, name: &str, data: &Value) -> Value {
    let payload = format!("{{\"name\":{},\"data\":{data}}}", Value::from(name));
    json!({"channel": channel, "data": payload})
}

/// Reads one delivery and decodes it to `(channel, name, data)`.
pub async fn recv_event(ws: &mut WsClient) -> (String, String, Value) {
    let frame = ws.recv_json().await;
    assert!(
        frame.get("event").is_none(),
        "a delivery has no event: {frame}"
    );
    let inner: Value =
        serde_json::from_str(frame["data"].as_str().expect("data string")).expect("data is JSON");
    (
        frame["channel"].as_str().expect("channel").to_owned(),
        inner["name"].as_str().expect("name").to_owned(),
        inner["data"].clone(),
    )
}

/// Opens `sockets` pubb sockets, socket `i` subscribed to `news-{i % channels}`;
/// returns each with its channel's name.
pub async fn subscribe_spread(
    server: &Server,
    sockets: usize,
    channels: usize,
) -> Vec<(String, Socket)> {
    let mut subscribed = Vec::with_capacity(sockets);
    for i in 0..sockets {
        let mut socket = connect(server).await;
        let channel = format!("news-{}", i % channels);
        subscribe(&mut socket.ws, &channel).await;
        subscribed.push((channel, socket));
    }
    subscribed
}

/// Starts one publisher per channel `news-0`…, each publishing `count`
/// events named `tick` with data `{"n": 0}`, `{"n": 1}`, … over HTTP, one
/// at a time, and asserting each is accepted.
pub fn spawn_tick_publishers(
    server: &Server,
    channels: usize,
    count: usize,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..channels)
        .map(|channel| {
            let client = backend(server);
            tokio::spawn(async move {
                for n in 0..count {
                    let body = json!({"channel": format!("news-{channel}"), "name": "tick", "data": {"n": n}});
                    let (status, response) = client.post(&events_path(), &body).await;
                    assert_eq!(status, 202, "{response}");
                }
            })
        })
        .collect()
}

/// Waits for `publishers` (see [`spawn_tick_publishers`]), then reads each
/// socket's `count` ticks in order (see [`expect_ticks`]).
pub async fn expect_published_ticks(
    publishers: Vec<tokio::task::JoinHandle<()>>,
    sockets: &mut [(String, Socket)],
    count: usize,
) {
    for publisher in publishers {
        publisher.await.expect("publisher");
    }
    for (channel, socket) in sockets {
        expect_ticks(&mut socket.ws, channel, count).await;
    }
}

/// Reads `count` publications named `tick` on `channel`, with data
/// `{"n": 0}`, `{"n": 1}`, … in that order, then asserts nothing follows.
pub async fn expect_ticks(ws: &mut WsClient, channel: &str, count: usize) {
    for n in 0..count {
        let event = recv_event(ws).await;
        assert_eq!(
            event,
            (channel.to_owned(), "tick".to_owned(), json!({"n": n}))
        );
    }
    ws.expect_no_frame_within(std::time::Duration::from_millis(50))
        .await;
}

/// A config with the test app plus `extra` TOML appended.
pub fn config_with(extra: &str) -> String {
    format!("{}\n{extra}\n", bubble_tests::TEST_CONFIG)
}
