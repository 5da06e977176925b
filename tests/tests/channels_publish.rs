//! HTTP publish: each validation rule, idempotency, socket exclusion, one
//! and 100 channels, and delivery to 1,000 subscribers of one channel.

mod channels_common;

use std::time::Duration;

use bubble_tests::{
    metric_sample, raw_post, raw_request, HttpClient, HttpResponse, Server, APP_SECRET, TEST_CONFIG,
};
use channels_common::*;
use serde_json::{json, Value};

const QUIET: Duration = Duration::from_millis(300);

async fn refused(client: &HttpClient, body: Value, status: u16, code: &str) {
    let (got, response) = client.post(&events_path(), &body).await;
    assert_eq!(
        (got, response["code"].as_str()),
        (status, Some(code)),
        "{body} -> {response}"
    );
    assert!(
        response["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{response}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validation_rules() {
    let server = Server::start(TEST_CONFIG);
    let c = backend(&server);
    let hundred: Vec<String> = (0..100).map(|i| format!("c-{i}")).collect();
    let hundred_one: Vec<String> = (0..101).map(|i| format!("c-{i}")).collect();
    let long = "x".repeat(200);
    let too_long = "x".repeat(201);

    // channel: a string or an array of 1-100 strings.
    refused(&c, json!({"name": "e"}), 400, "invalid_channels").await;
    refused(
        &c,
        json!({"channel": 7, "name": "e"}),
        400,
        "invalid_channels",
    )
    .await;
    refused(
        &c,
        json!({"channel": null, "name": "e"}),
        400,
        "invalid_channels",
    )
    .await;
    refused(
        &c,
        json!({"channel": [], "name": "e"}),
        400,
        "invalid_channels",
    )
    .await;
    refused(
        &c,
        json!({"channel": hundred_one, "name": "e"}),
        400,
        "invalid_channels",
    )
    .await;
    refused(
        &c,
        json!({"channel": ["a", 1], "name": "e"}),
        400,
        "invalid_channels",
    )
    .await;
    // Channel names: nonblank, at most 200 characters, not debug- or _.
    refused(
        &c,
        json!({"channel": "", "name": "e"}),
        400,
        "invalid_channel_name",
    )
    .await;
    refused(
        &c,
        json!({"channel": "   ", "name": "e"}),
        400,
        "invalid_channel_name",
    )
    .await;
    refused(
        &c,
        json!({"channel": ["ok", too_long], "name": "e"}),
        400,
        "invalid_channel_name",
    )
    .await;
    refused(
        &c,
        json!({"channel": "debug-x", "name": "e"}),
        400,
        "reserved_channel",
    )
    .await;
    refused(
        &c,
        json!({"channel": ["ok", "_internal"], "name": "e"}),
        400,
        "reserved_channel",
    )
    .await;
    // Event names: nonblank, at most 200 characters.
    refused(&c, json!({"channel": "a"}), 400, "invalid_event_name").await;
    refused(
        &c,
        json!({"channel": "a", "name": " "}),
        400,
        "invalid_event_name",
    )
    .await;
    refused(
        &c,
        json!({"channel": "a", "name": 5}),
        400,
        "invalid_event_name",
    )
    .await;
    refused(
        &c,
        json!({"channel": "a", "name": too_long}),
        400,
        "invalid_event_name",
    )
    .await;
    // data: at most 10 KiB of JSON (a string of n ASCII letters is n + 2 bytes).
    let fits = "x".repeat(10 * 1024 - 2);
    let over = "x".repeat(10 * 1024 - 1);
    refused(
        &c,
        json!({"channel": "a", "name": "e", "data": over}),
        413,
        "data_too_large",
    )
    .await;
    refused(
        &c,
        json!({"channel": "a", "name": "e", "socket_id": 5}),
        400,
        "invalid_socket_id",
    )
    .await;
    // A body past what the server reads (twice `max_event_bytes` plus 64
    // KiB): this API's error shape, on both endpoints.
    let huge = json!({"channel": "a", "name": "e", "data": "x".repeat(200_000)});
    for path in [events_path(), auth_path()] {
        let res = c
            .request(
                "POST",
                &path,
                &[("content-type", "application/json")],
                huge.to_string().into_bytes(),
            )
            .await;
        assert_eq!(res.status, 413, "{path}: {}", res.text());
        assert_eq!(
            res.json(),
            json!({"error": "Request body exceeds 196608 bytes.", "code": "payload_too_large"}),
            "{path}"
        );
    }
    // A body that is not a JSON object.
    for body in [&b"not json"[..], b"[1,2]", b""] {
        let res = c
            .request(
                "POST",
                &events_path(),
                &[("content-type", "application/json")],
                body.to_vec(),
            )
            .await;
        assert_eq!(
            (res.status, res.json()["code"].as_str()),
            (400, Some("invalid_body")),
            "{}",
            res.text()
        );
    }

    // The accepted edges.
    for body in [
        json!({"channel": long, "name": long}),
        json!({"channel": "a", "name": "e", "data": fits}),
        json!({"channel": hundred, "name": "e"}),
        json!({"channel": "a", "name": "e", "data": null}),
        json!({"channel": "a", "name": "e", "socket_id": "unknown"}),
    ] {
        let (status, response) = c.post(&events_path(), &body).await;
        assert_eq!(status, 202, "{body} -> {response}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_of_any_json_type_and_null_when_omitted() {
    let server = Server::start(TEST_CONFIG);
    let mut s = connect(&server).await;
    subscribe(&mut s.ws, "notifications").await;
    for data in [
        json!(null),
        json!(1.5),
        json!("text"),
        json!([1, {"a": true}]),
        json!({"nested": {"x": [null]}}),
    ] {
        publish(
            &server,
            &json!({"channel": "notifications", "name": "e", "data": data}),
        )
        .await;
        assert_eq!(
            s.ws.recv_json().await,
            envelope("notifications", "e", &data)
        );
    }
    publish(&server, &json!({"channel": "notifications", "name": "e"})).await;
    assert_eq!(
        s.ws.recv_json().await,
        json!({"channel": "notifications", "data": "{\"name\":\"e\",\"data\":null}"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_keys() {
    let server = Server::start(&config_with(
        "[[apps]]\nid = \"app-2\"\nkey = \"app-key-2\"\nsecret = \"app-secret-2\"\n",
    ));
    let c = backend(&server);
    let mut s = connect(&server).await;
    subscribe(&mut s.ws, "news").await;
    let body = json!({"channel": "news", "name": "e", "data": 1});

    let (status, first) = c.post_idempotent(&events_path(), &body, "k-1").await;
    assert_eq!((status, &first["duplicate"]), (202, &json!(false)));
    assert_eq!(s.ws.recv_json().await, envelope("news", "e", &json!(1)));
    for _ in 0..3 {
        let (status, again) = c.post_idempotent(&events_path(), &body, "k-1").await;
        assert_eq!(status, 202);
        assert_eq!(again["duplicate"], true);
        assert_eq!(again["publicationId"], first["publicationId"]);
        assert_eq!(again["channels"], json!(["news"]));
    }
    s.ws.expect_no_frame_within(QUIET).await;

    // Another key, or no key, is another publication.
    let (_, second) = c.post_idempotent(&events_path(), &body, "k-2").await;
    assert_eq!(second["duplicate"], false);
    assert_ne!(second["publicationId"], first["publicationId"]);
    assert_eq!(s.ws.recv_json().await, envelope("news", "e", &json!(1)));
    let (_, third) = c.post(&events_path(), &body).await;
    assert_ne!(third["publicationId"], first["publicationId"]);
    assert_eq!(s.ws.recv_json().await, envelope("news", "e", &json!(1)));

    // Keys belong to one app.
    let (status, other_app) = server
        .http("app-secret-2")
        .post_idempotent("/api/apps/app-2/events", &body, "k-1")
        .await;
    assert_eq!((status, &other_app["duplicate"]), (202, &json!(false)));

    // Key format: 1-128 printable, nonspace ASCII.
    let long_ok = "k".repeat(128);
    let (status, _) = c.post_idempotent(&events_path(), &body, &long_ok).await;
    assert_eq!(status, 202);
    assert_eq!(s.ws.recv_json().await, envelope("news", "e", &json!(1)));
    for bad in ["k".repeat(129), "has space".to_owned(), String::new()] {
        let res = c
            .request(
                "POST",
                &events_path(),
                &[
                    ("content-type", "application/json"),
                    ("idempotency-key", &bad),
                ],
                body.to_string().into_bytes(),
            )
            .await;
        assert_eq!(res.status, 400, "key {bad:?}: {}", res.text());
        assert_eq!(res.json()["code"], "invalid_idempotency_key");
    }
    s.ws.expect_no_frame_within(QUIET).await;
}

/// `Idempotency-Key` bytes as written on the wire, past any HTTP client's
/// own header checks; the publish answer.
async fn publish_with_raw_key(server: &Server, key: &[u8], body: &Value) -> HttpResponse {
    let request = raw_post(
        &events_path(),
        APP_SECRET,
        &[("Idempotency-Key", key)],
        body.to_string().as_bytes(),
    );
    let addr = server.addr();
    tokio::task::spawn_blocking(move || raw_request(addr, &request))
        .await
        .expect("raw request task")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idempotency_keys_that_are_not_ascii_are_refused() {
    let server = Server::start(TEST_CONFIG);
    let mut s = connect(&server).await;
    subscribe(&mut s.ws, "news").await;
    let body = json!({"channel": "news", "name": "e", "data": 1});

    // UTF-8 "café", Latin-1 "café" (not UTF-8), a tab inside the key: each
    // reaches the engine and is refused like any other malformed key.
    for key in [&b"caf\xc3\xa9"[..], b"caf\xe9", b"\xff", b"a\tb"] {
        let res = publish_with_raw_key(&server, key, &body).await;
        assert_eq!(res.status, 400, "key {key:?}: {}", res.text());
        let answer = res.json();
        assert_eq!(answer["code"], "invalid_idempotency_key", "{answer}");
        assert!(
            answer["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{answer}"
        );
    }
    // Other control bytes never reach the engine: the HTTP parser refuses
    // the request itself.
    for key in [&b"a\x01b"[..], b"a\x7fb"] {
        let res = publish_with_raw_key(&server, key, &body).await;
        assert_eq!(res.status, 400, "key {key:?}: {}", res.text());
    }
    s.ws.expect_no_frame_within(QUIET).await;

    // The server still publishes, with a key and without.
    let res = publish_with_raw_key(&server, b"order-1042-created", &body).await;
    assert_eq!(res.status, 202, "{}", res.text());
    assert_eq!(res.json()["duplicate"], false);
    assert_eq!(s.ws.recv_json().await, envelope("news", "e", &json!(1)));
    publish(&server, &body).await;
    assert_eq!(s.ws.recv_json().await, envelope("news", "e", &json!(1)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socket_id_excludes_one_connection() {
    let server = Server::start(TEST_CONFIG);
    let mut a = connect(&server).await;
    let mut b = connect(&server).await;
    subscribe(&mut a.ws, "room").await;
    subscribe(&mut b.ws, "room").await;
    publish(
        &server,
        &json!({"channel": "room", "name": "e", "socket_id": a.socket_id}),
    )
    .await;
    assert_eq!(b.ws.recv_json().await, envelope("room", "e", &json!(null)));
    a.ws.expect_no_frame_within(QUIET).await;
    publish(&server, &json!({"channel": "room", "name": "f"})).await;
    assert_eq!(a.ws.recv_json().await, envelope("room", "f", &json!(null)));
    assert_eq!(b.ws.recv_json().await, envelope("room", "f", &json!(null)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_and_one_hundred_channels() {
    let server = Server::start(&config_with("[limits]\ncommand_rate = 1000\n"));
    let mut s = connect(&server).await;
    let channels: Vec<String> = (0..100).map(|i| format!("ch-{i}")).collect();
    for channel in &channels {
        subscribe(&mut s.ws, channel).await;
    }
    let response = publish(&server, &json!({"channel": "ch-7", "name": "one"})).await;
    assert_eq!(response["channels"], json!(["ch-7"]));
    assert_eq!(
        s.ws.recv_json().await,
        envelope("ch-7", "one", &json!(null))
    );

    let response = publish(
        &server,
        &json!({"channel": channels, "name": "all", "data": {"n": 1}}),
    )
    .await;
    assert_eq!(response["channels"], json!(channels));
    let mut got = Vec::new();
    for _ in 0..100 {
        let (channel, name, data) = recv_event(&mut s.ws).await;
        assert_eq!((name.as_str(), &data), ("all", &json!({"n": 1})));
        got.push(channel);
    }
    got.sort_by_key(|c| c[3..].parse::<u32>().unwrap());
    assert_eq!(got, channels, "one delivery per channel");
    s.ws.expect_no_frame_within(QUIET).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delivery_to_one_thousand_subscribers() {
    let server = std::sync::Arc::new(Server::start(TEST_CONFIG));
    let mut tasks = tokio::task::JoinSet::new();
    let (ready_tx, mut ready_rx) = tokio::sync::mpsc::channel::<()>(1000);
    for _ in 0..1000 {
        let server = server.clone();
        let ready = ready_tx.clone();
        tasks.spawn(async move {
            let mut s = connect(&server).await;
            subscribe(&mut s.ws, "crowd").await;
            ready.send(()).await.unwrap();
            let frame = s.ws.recv_json().await;
            (frame, s)
        });
    }
    for _ in 0..1000 {
        ready_rx.recv().await.unwrap();
    }
    let body = json!({"channel": "crowd", "name": "hello", "data": [1, 2]});
    let response = publish(&server, &body).await;
    assert_eq!(response["channels"], json!(["crowd"]));
    let want = envelope("crowd", "hello", &json!([1, 2]));
    let mut sockets = Vec::new();
    while let Some(done) = tasks.join_next().await {
        let (frame, socket) = done.unwrap();
        assert_eq!(frame, want);
        sockets.push(socket);
    }
    assert_eq!(sockets.len(), 1000);

    let text = server
        .http_anonymous()
        .request("GET", "/metrics", &[], Vec::new())
        .await
        .text();
    assert_eq!(
        metric_sample(&text, "bubble_deliveries_total"),
        Some(1000.0),
        "{text}"
    );
    assert_eq!(
        metric_sample(&text, "bubble_publishes_total"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        metric_sample(&text, "bubble_channel_subscriptions"),
        Some(1000.0),
        "{text}"
    );
    assert_eq!(
        metric_sample(&text, "bubble_channel_connections{app=\"app-1\"}"),
        Some(1000.0),
        "{text}"
    );
}
