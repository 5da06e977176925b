//! Bad input on the Pusher side: protocol versions, unknown keys, client
//! events where they are not allowed, bad signatures, stale timestamps,
//! oversized bodies. Each gets Pusher's code or status, and the server
//! keeps serving the others.

use bubble_tests::pusher::{connect_pusher, signed, unix_now};
use bubble_tests::{hmac_sha256_hex, Server};
use serde_json::{json, Value};

const CONFIG: &str = r#"
[[apps]]
id = "app-1"
key = "app-key"
secret = "app-secret"
client_events = true

[[apps]]
id = "app-2"
key = "key-2"
secret = "secret-2"
"#;

const APP_1: (&str, &str) = ("app-key", "app-secret");

fn private_auth(secret: &str, key: &str, socket_id: &str, channel: &str) -> String {
    format!(
        "{key}:{}",
        hmac_sha256_hex(secret, &format!("{socket_id}:{channel}"))
    )
}

/// The `pusher:error` a socket hears and the close code after it.
async fn refusal(server: &Server, path_and_query: &str) -> (Value, Option<u16>) {
    let url = server.ws_url(path_and_query);
    let mut ws = bubble_tests::WsClient::connect(&url, None)
        .await
        .expect("upgraded");
    let error = ws.recv_json().await;
    assert_eq!(error["event"], "pusher:error", "{path_and_query}");
    (error["data"].clone(), ws.recv_close().await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_versions_and_keys_are_refused_with_pusher_codes() {
    let server = Server::start(CONFIG);
    let mut bystander = connect_pusher(&server, "app-key").await;
    for (path, code, message) in [
        ("/app/app-key", 4008, "No protocol version supplied"),
        (
            "/app/app-key?protocol=6",
            4007,
            "Unsupported protocol version",
        ),
        (
            "/app/app-key?protocol=8",
            4007,
            "Unsupported protocol version",
        ),
        (
            "/app/app-key?protocol=seven",
            4006,
            "Invalid version string format",
        ),
        (
            "/app/no-such-key?protocol=7",
            4001,
            "Application does not exist",
        ),
        ("/app?protocol=7", 4005, "Path not found"),
        ("/app/?protocol=7", 4005, "Path not found"),
        ("/app/app-key/extra?protocol=7", 4005, "Path not found"),
    ] {
        let (data, close) = refusal(&server, path).await;
        assert_eq!(data, json!({ "code": code, "message": message }), "{path}");
        assert_eq!(close, Some(code), "{path}");
    }
    bystander.ping_pong().await;
    connect_pusher(&server, "key-2").await.ping_pong().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_events_only_where_allowed() {
    let server = Server::start(CONFIG);
    let mut a = connect_pusher(&server, "app-key").await;
    let mut b = connect_pusher(&server, "app-key").await;
    let channel = "private-room";
    for s in [&mut a, &mut b] {
        let auth = private_auth("app-secret", "app-key", &s.socket_id, channel);
        let ack = s
            .subscribe(json!({ "channel": channel, "auth": auth }))
            .await;
        assert_eq!(ack["event"], "pusher_internal:subscription_succeeded");
    }
    let public = a.subscribe(json!({ "channel": "news" })).await;
    assert_eq!(public["event"], "pusher_internal:subscription_succeeded");

    let refused = [
        (
            "news",
            "Client events are only supported on private and presence channels",
        ),
        (
            "private-elsewhere",
            "Client event rejected: not subscribed to private-elsewhere",
        ),
    ];
    for (on, message) in refused {
        a.ws.send_json(&json!({ "event": "client-x", "channel": on, "data": {} }))
            .await;
        assert_eq!(
            a.ws.recv_json().await,
            json!({ "event": "pusher:error", "data": { "code": null, "message": message } })
        );
    }

    // Delivered to the other subscriber, not echoed to the sender.
    a.ws.send_json(
        &json!({ "event": "client-typing", "channel": channel, "data": { "on": true } }),
    )
    .await;
    assert_eq!(
        b.ws.recv_json().await,
        json!({ "event": "client-typing", "channel": channel, "data": { "on": true } })
    );
    a.ping_pong().await;

    // Ten per second, then 4301; the socket stays open.
    let mut answers = Vec::new();
    for n in 0..11 {
        a.ws.send_json(&json!({ "event": "client-n", "channel": channel, "data": n }))
            .await;
    }
    a.ws.send_json(&json!({ "event": "pusher:ping", "data": {} }))
        .await;
    answers.extend(
        a.ws.recv_until(|f| f["event"] == "pusher:pong")
            .await
            .into_iter()
            .filter(|f| f["event"] == "pusher:error"),
    );
    assert!(!answers.is_empty(), "the eleventh event is refused");
    for error in answers {
        assert_eq!(
            error["data"],
            json!({ "code": 4301, "message": "Client event rejected due to rate limit" })
        );
    }

    // An app without client_events refuses them.
    let mut other = connect_pusher(&server, "key-2").await;
    let auth = private_auth("secret-2", "key-2", &other.socket_id, channel);
    other
        .subscribe(json!({ "channel": channel, "auth": auth }))
        .await;
    other
        .ws
        .send_json(&json!({ "event": "client-x", "channel": channel, "data": {} }))
        .await;
    assert_eq!(
        other.ws.recv_json().await["data"],
        json!({ "code": null, "message": "Client events are not enabled for this app" })
    );
    other.ping_pong().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_subscriptions_oversized_messages_and_floods() {
    let server = Server::start(CONFIG);
    let mut s = connect_pusher(&server, "app-key").await;
    let forged = format!("app-key:{}", "0".repeat(64));
    let (error, refused) = s
        .subscribe_refused(json!({ "channel": "private-x", "auth": forged }))
        .await;
    assert_eq!(
        error,
        json!({
            "code": null,
            "message": format!(
                "Invalid signature: Expected HMAC SHA256 hex digest of {}:private-x, but got {}",
                s.socket_id,
                "0".repeat(64)
            ),
        })
    );
    assert_eq!(
        refused,
        json!({
            "event": "pusher:subscription_error",
            "channel": "private-x",
            "data": { "type": "AuthError", "error": "Subscription not authorized", "status": 401 },
        })
    );
    let (error, refused) = s
        .subscribe_refused(json!({ "channel": "private-x", "auth": "key-2:abc" }))
        .await;
    assert_eq!(
        error["message"],
        "Invalid key in subscription auth data: 'key-2'"
    );
    assert_eq!(refused["data"]["status"], 401);
    let (error, refused) = s.subscribe_refused(json!({ "channel": "bad name" })).await;
    assert_eq!(error["message"], "Invalid channel name: 'bad name'");
    assert_eq!(refused["data"]["status"], 400);
    // Pusher's channel names: at most 164 characters.
    let long = "c".repeat(165);
    let (error, refused) = s.subscribe_refused(json!({ "channel": long })).await;
    assert_eq!(error["message"], format!("Invalid channel name: '{long}'"));
    assert_eq!(refused["data"]["status"], 400);
    let ack = s.subscribe(json!({ "channel": "c".repeat(164) })).await;
    assert_eq!(ack["event"], "pusher_internal:subscription_succeeded");
    s.ping_pong().await;

    s.ws.send_text(&"x".repeat(17 * 1024)).await;
    assert_eq!(s.ws.recv_close().await, Some(1009));

    let mut flood = connect_pusher(&server, "app-key").await;
    for _ in 0..21 {
        flood
            .ws
            .send_json(&json!({ "event": "pusher:ping", "data": {} }))
            .await;
    }
    let frames = flood.ws.recv_until(|f| f["event"] == "pusher:error").await;
    assert_eq!(
        frames.last().map(|f| f["data"].clone()),
        Some(json!({ "code": 4100, "message": "Over capacity" }))
    );
    assert_eq!(flood.ws.recv_close().await, Some(4100));
    connect_pusher(&server, "app-key").await.ping_pong().await;
}

fn status_and_text(response: bubble_tests::HttpResponse) -> (u16, String) {
    (response.status, response.text())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_api_refuses_bad_signatures_stale_timestamps_and_oversized_bodies() {
    let server = Server::start(CONFIG);
    let mut listener = connect_pusher(&server, "app-key").await;
    listener.subscribe(json!({ "channel": "news" })).await;
    let now = unix_now();
    let path = "/apps/app-1/events";
    let event = |data: &str| json!({ "name": "e", "data": data, "channel": "news" }).to_string();
    let body = event("{}");

    let checks: Vec<(u16, &str, bubble_tests::HttpResponse)> = vec![
        (
            401,
            "Invalid signature: you should have sent HmacSHA256Hex(",
            signed(&server, ("app-key", "wrong"), "POST", path, &[], body.as_bytes(), now).await,
        ),
        (
            401,
            "Timestamp expired: Given timestamp (",
            signed(&server, APP_1, "POST", path, &[], body.as_bytes(), now - 601).await,
        ),
        (
            401,
            "Unknown auth_key",
            signed(&server, ("key-2", "app-secret"), "POST", path, &[], body.as_bytes(), now).await,
        ),
        (
            413,
            "Payload too large: data must be at most 10240 bytes",
            signed(&server, APP_1, "POST", path, &[], event(&"x".repeat(10241)).as_bytes(), now).await,
        ),
        (
            400,
            "Invalid channels: give channel or 1 to 100 channels",
            signed(
                &server,
                APP_1,
                "POST",
                path,
                &[],
                json!({ "name": "e", "data": "x", "channels": (0..101).map(|i| format!("c{i}")).collect::<Vec<_>>() })
                    .to_string()
                    .as_bytes(),
                now,
            )
            .await,
        ),
        (
            400,
            "Batch too large: at most 10 events",
            signed(
                &server,
                APP_1,
                "POST",
                "/apps/app-1/batch_events",
                &[],
                json!({ "batch": vec![json!({"name": "e", "data": "x", "channel": "news"}); 11] })
                    .to_string()
                    .as_bytes(),
                now,
            )
            .await,
        ),
        (
            400,
            "user_count may only be requested with filter_by_prefix=presence-",
            signed(&server, APP_1, "GET", "/apps/app-1/channels", &[("info", "user_count")], b"", now).await,
        ),
        (
            400,
            "Users are only available for presence channels",
            signed(&server, APP_1, "GET", "/apps/app-1/channels/news/users", &[], b"", now).await,
        ),
        (
            404,
            "Unknown app app-9",
            signed(&server, APP_1, "POST", "/apps/app-9/events", &[], body.as_bytes(), now).await,
        ),
        (
            405,
            "Method not allowed",
            signed(&server, APP_1, "GET", path, &[], b"", now).await,
        ),
        (
            400,
            "Invalid socket id: 'abc'",
            signed(
                &server,
                APP_1,
                "POST",
                path,
                &[],
                json!({ "name": "e", "data": "x", "channel": "news", "socket_id": "abc" })
                    .to_string()
                    .as_bytes(),
                now,
            )
            .await,
        ),
        (
            400,
            "Invalid channel name: ",
            signed(
                &server,
                APP_1,
                "POST",
                path,
                &[],
                json!({ "name": "e", "data": "x", "channel": "c".repeat(165) })
                    .to_string()
                    .as_bytes(),
                now,
            )
            .await,
        ),
        (
            413,
            "Payload too large: the request body must be at most 803640 bytes",
            signed(
                &server,
                APP_1,
                "POST",
                path,
                &[],
                json!({ "name": "e", "data": "x".repeat(900 * 1024), "channel": "news" })
                    .to_string()
                    .as_bytes(),
                now,
            )
            .await,
        ),
    ];
    for (status, start, response) in checks {
        let (got_status, text) = status_and_text(response);
        assert_eq!(got_status, status, "{text}");
        assert!(
            text.starts_with(start),
            "{text:?} should start with {start:?}"
        );
    }

    // A body that is not the one body_md5 names.
    let query = bubble_tests::pusher::signed_query(APP_1, "POST", path, &[], body.as_bytes(), now);
    let tampered = bubble_tests::HttpClient::new(&server.base_url(), None)
        .request(
            "POST",
            &format!("{path}?{query}"),
            &[],
            event("{\"x\":1}").into_bytes(),
        )
        .await;
    assert_eq!(
        (tampered.status, tampered.text()),
        (401, "Invalid body_md5".to_owned())
    );

    // Unsigned.
    let unsigned = bubble_tests::HttpClient::new(&server.base_url(), None)
        .request("POST", path, &[], body.clone().into_bytes())
        .await;
    assert_eq!(unsigned.status, 401);

    // Nothing was delivered, and the API still works.
    let ok = signed(&server, APP_1, "POST", path, &[], body.as_bytes(), now).await;
    assert_eq!((ok.status, ok.json()), (200, json!({})));
    assert_eq!(
        listener.ws.recv_json().await,
        json!({ "event": "e", "channel": "news", "data": "{}" })
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminate_connections_closes_the_users_sockets_with_4009() {
    let server = Server::start(CONFIG);
    let channel = "presence-team";
    let mut sockets = Vec::new();
    for user in ["u1", "u2"] {
        let mut s = connect_pusher(&server, "app-key").await;
        let data = json!({ "user_id": user }).to_string();
        let auth = format!(
            "app-key:{}",
            hmac_sha256_hex("app-secret", &format!("{}:{channel}:{data}", s.socket_id))
        );
        let ack = s
            .subscribe(json!({ "channel": channel, "auth": auth, "channel_data": data }))
            .await;
        assert_eq!(ack["event"], "pusher_internal:subscription_succeeded");
        sockets.push(s);
    }
    let mut u2 = sockets.pop().unwrap();
    let mut u1 = sockets.pop().unwrap();
    let added = u1.ws.recv_json().await;
    assert_eq!(added["event"], "pusher_internal:member_added");

    let path = "/apps/app-1/users/u1/terminate_connections";
    let response = signed(&server, APP_1, "POST", path, &[], b"{}", unix_now()).await;
    assert_eq!((response.status, response.json()), (200, json!({})));
    assert_eq!(
        u1.ws.recv_json().await,
        json!({ "event": "pusher:error", "data": { "code": 4009, "message": "You got disconnected by the app" } })
    );
    assert_eq!(u1.ws.recv_close().await, Some(4009));
    let removed = u2.ws.recv_json().await;
    assert_eq!(removed["event"], "pusher_internal:member_removed");
    assert_eq!(removed["data"], json!({ "user_id": "u1" }).to_string());
    u2.ping_pong().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signin_then_terminate_and_a_bad_signin_is_refused_with_4009() {
    let server = Server::start(CONFIG);
    let mut bystander = connect_pusher(&server, "app-key").await;

    let mut signed_in = connect_pusher(&server, "app-key").await;
    let user_data = json!({ "id": "u7", "name": "Seven" }).to_string();
    let auth = format!(
        "app-key:{}",
        hmac_sha256_hex(
            "app-secret",
            &format!("{}::user::{user_data}", signed_in.socket_id)
        )
    );
    signed_in
        .ws
        .send_json(
            &json!({ "event": "pusher:signin", "data": { "auth": auth, "user_data": user_data } }),
        )
        .await;
    assert_eq!(
        signed_in.ws.recv_json().await,
        json!({ "event": "pusher:signin_success", "data": { "user_data": user_data } })
    );
    // Its own user channel only; a socket not signed in has none.
    let (_, other) = signed_in
        .subscribe_refused(json!({ "channel": "#server-to-user-u8" }))
        .await;
    assert_eq!(other["data"]["status"], 400);
    let own = signed_in
        .subscribe(json!({ "channel": "#server-to-user-u7" }))
        .await;
    assert_eq!(own["event"], "pusher_internal:subscription_succeeded");
    let (_, anonymous) = bystander
        .subscribe_refused(json!({ "channel": "#server-to-user-u7" }))
        .await;
    assert_eq!(anonymous["data"]["status"], 400);
    let path = "/apps/app-1/users/u7/terminate_connections";
    let response = signed(&server, APP_1, "POST", path, &[], b"{}", unix_now()).await;
    assert_eq!(response.status, 200);
    assert_eq!(
        signed_in.ws.recv_json().await["data"]["code"],
        4009,
        "a signed-in user is terminated without any presence channel"
    );
    assert_eq!(signed_in.ws.recv_close().await, Some(4009));

    let mut forged = connect_pusher(&server, "app-key").await;
    let bad = format!("app-key:{}", "0".repeat(64));
    forged
        .ws
        .send_json(
            &json!({ "event": "pusher:signin", "data": { "auth": bad, "user_data": user_data } }),
        )
        .await;
    assert_eq!(
        forged.ws.recv_json().await,
        json!({ "event": "pusher:error", "data": { "code": 4009, "message": "Connection not authorized: invalid signin" } })
    );
    assert_eq!(forged.ws.recv_close().await, Some(4009));
    bystander.ping_pong().await;
}

/// The largest batch Pusher's API allows is read whole: ten events of
/// 10 KiB of data that escapes to twice its size (quotes) and to six
/// times (control characters), each to 100 channels of 164 characters.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_batch_of_escaped_data_fits_the_body_limit() {
    let server = Server::start(CONFIG);
    let mut listener = connect_pusher(&server, "app-key").await;
    let news = "n".repeat(164);
    listener.subscribe(json!({ "channel": news })).await;
    for data in ["\"".repeat(10 * 1024), "\u{1}".repeat(10 * 1024)] {
        let channels: Vec<String> = (0..99)
            .map(|i| format!("{i:02}{}", "c".repeat(162)))
            .chain([news.clone()])
            .collect();
        let event = json!({ "name": "e", "data": data, "channels": channels });
        let body = json!({ "batch": vec![event; 10] }).to_string();
        assert!(body.len() > 192 * 1024, "over the other routes' limit");
        let response = signed(
            &server,
            APP_1,
            "POST",
            "/apps/app-1/batch_events",
            &[],
            body.as_bytes(),
            unix_now(),
        )
        .await;
        assert_eq!((response.status, response.json()), (200, json!({})));
        for _ in 0..10 {
            let frame = listener.ws.recv_json().await;
            assert_eq!(
                (&frame["channel"], &frame["data"]),
                (&json!(news), &json!(data))
            );
        }
    }
    listener.ping_pong().await;
}

/// A server that shuts down tells Pusher sockets to reconnect at once
/// (4200, to another node), and pubb sockets that it is going away (1001).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_closes_pusher_sockets_with_4200() {
    let mut server = Server::start(CONFIG);
    let mut pusher = connect_pusher(&server, "app-key").await;
    pusher.subscribe(json!({ "channel": "news" })).await;
    let url = server.ws_url("/socket?appKey=app-key&protocol=2");
    let mut pubb = bubble_tests::WsClient::connect(&url, None)
        .await
        .expect("connect /socket");
    assert_eq!(
        pubb.recv_json().await["event"],
        "pubb:connection_established"
    );
    let status = tokio::task::spawn_blocking(move || server.terminate())
        .await
        .expect("terminate");
    assert!(status.success(), "{status:?}");
    assert_eq!(
        pusher.ws.recv_json().await,
        json!({ "event": "pusher:error", "data": { "code": 4200, "message": "Generic reconnect immediately" } })
    );
    assert_eq!(pusher.ws.recv_close().await, Some(4200));
    assert_eq!(pubb.recv_close().await, Some(1001));
}
