//! Pusher's side of the server: signed `/apps/:id/…` requests, written the
//! way Pusher's server libraries write them, and `/app/:key` sockets.

use std::time::{SystemTime, UNIX_EPOCH};

use md5::{Digest, Md5};
use serde_json::{json, Value};

use crate::http::{HttpClient, HttpResponse};
use crate::ws::WsClient;
use crate::{hmac_sha256_hex, Server};

/// Seconds since the Unix epoch on this machine's clock.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or_default()
}

/// The signed query of a request, as Pusher's libraries build it: the
/// `auth_` parameters (and `body_md5` for a body) with `params`, sorted,
/// signed over `METHOD\npath\nquery` with `secret`.
pub fn signed_query(
    (key, secret): (&str, &str),
    method: &str,
    path: &str,
    params: &[(&str, &str)],
    body: &[u8],
    timestamp: u64,
) -> String {
    let timestamp = timestamp.to_string();
    let md5: String = Md5::digest(body)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let mut pairs: Vec<(&str, &str)> = vec![
        ("auth_key", key),
        ("auth_timestamp", &timestamp),
        ("auth_version", "1.0"),
    ];
    if !body.is_empty() {
        pairs.push(("body_md5", &md5));
    }
    pairs.extend_from_slice(params);
    pairs.sort();
    let query: Vec<String> = pairs.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let query = query.join("&");
    let signature = hmac_sha256_hex(secret, &format!("{method}\n{path}\n{query}"));
    format!("{query}&auth_signature={signature}")
}

/// Sends a signed request with `credentials` at `timestamp`.
pub async fn signed(
    server: &Server,
    credentials: (&str, &str),
    method: &str,
    path: &str,
    params: &[(&str, &str)],
    body: &[u8],
    timestamp: u64,
) -> HttpResponse {
    let query = signed_query(credentials, method, path, params, body, timestamp);
    HttpClient::new(&server.base_url(), None)
        .request(
            method,
            &format!("{path}?{query}"),
            &[("content-type", "application/json")],
            body.to_vec(),
        )
        .await
}

/// A Pusher socket after its `pusher:connection_established`.
pub struct PusherSocket {
    /// The connection.
    pub ws: WsClient,
    /// Its `socket_id`.
    pub socket_id: String,
}

/// Opens `/app/:key?protocol=7` and reads the connection event.
pub async fn connect_pusher(server: &Server, key: &str) -> PusherSocket {
    let url = server.ws_url(&format!("/app/{key}?protocol=7&client=rust&version=1.0"));
    let mut ws = WsClient::connect(&url, None).await.expect("connect");
    let established = ws.recv_json().await;
    assert_eq!(established["event"], "pusher:connection_established");
    let data: Value = serde_json::from_str(established["data"].as_str().expect("data string"))
        .expect("data JSON");
    let socket_id = data["socket_id"].as_str().expect("socket_id").to_owned();
    PusherSocket { ws, socket_id }
}

impl PusherSocket {
    /// Sends `pusher:subscribe` and returns the next frame (the answer).
    pub async fn subscribe(&mut self, data: Value) -> Value {
        self.ws
            .send_json(&json!({ "event": "pusher:subscribe", "data": data }))
            .await;
        self.ws.recv_json().await
    }

    /// Sends a `pusher:subscribe` the server refuses: returns the data of
    /// its `pusher:error` (what was wrong, as Pusher says it) and the
    /// channel's `pusher:subscription_error` that follows.
    pub async fn subscribe_refused(&mut self, data: Value) -> (Value, Value) {
        let error = self.subscribe(data).await;
        assert_eq!(error["event"], "pusher:error", "{error}");
        (error["data"].clone(), self.ws.recv_json().await)
    }

    /// Sends `pusher:ping` and expects `pusher:pong` as the next frame: the
    /// socket is open and nothing else was queued before it.
    pub async fn ping_pong(&mut self) {
        self.ws
            .send_json(&json!({ "event": "pusher:ping", "data": {} }))
            .await;
        assert_eq!(self.ws.recv_json().await["event"], "pusher:pong");
    }
}
