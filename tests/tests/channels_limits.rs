//! Connection limits: handshake errors, 100 channels, 16 KiB messages,
//! 20 commands per second, ignored malformed commands, app isolation.

mod channels_common;

use std::time::Duration;

use bubble_tests::{Server, WsClient, WsMessage, APP_KEY, TEST_CONFIG};
use channels_common::*;
use serde_json::json;
use tokio_tungstenite::tungstenite::Error;

const QUIET: Duration = Duration::from_millis(300);

/// The plain-text HTTP response refusing an upgrade: (status, Retry-After, body).
async fn refused_upgrade(server: &Server, query: &str) -> (u16, Option<String>, String) {
    let url = server.ws_url(&format!("/socket{query}"));
    match WsClient::connect(&url, None).await {
        Err(Error::Http(response)) => {
            let retry = response
                .headers()
                .get("retry-after")
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let content_type = response
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok());
            assert!(
                content_type.is_some_and(|t| t.starts_with("text/plain")),
                "{content_type:?}"
            );
            let body = String::from_utf8_lossy(response.body().as_deref().unwrap_or_default())
                .into_owned();
            (response.status().as_u16(), retry, body)
        }
        Err(other) => panic!("expected an HTTP refusal, got {other}"),
        Ok(_) => panic!("the upgrade to /socket{query} was accepted"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshake_errors_are_plain_text_http() {
    let server = Server::start(&config_with(
        "[[apps]]\nid = \"small\"\nkey = \"small-key\"\nsecret = \"small-secret\"\nmax_connections = 2\n",
    ));
    let (status, _, body) = refused_upgrade(&server, "").await;
    assert_eq!(status, 400);
    assert!(!body.is_empty());
    let (status, _, _) = refused_upgrade(&server, "?appKey=&protocol=2").await;
    assert_eq!(status, 400);
    let (status, _, body) = refused_upgrade(&server, "?appKey=nope&protocol=2").await;
    assert_eq!((status, body.as_str()), (404, "Application not found"));

    let first = connect_query(&server, "appKey=small-key&protocol=2").await;
    let _second = connect_query(&server, "appKey=small-key&protocol=2").await;
    let (status, retry, _) = refused_upgrade(&server, "?appKey=small-key&protocol=2").await;
    assert_eq!(status, 503);
    assert!(
        retry.is_some_and(|r| r.parse::<u64>().is_ok()),
        "Retry-After in seconds"
    );
    // Another app is not affected, and a freed slot can be used again.
    connect(&server).await;
    first.ws.close(1000).await;
    let mut again = None;
    for _ in 0..100 {
        let url = server.ws_url("/socket?appKey=small-key&protocol=2");
        if let Ok(ws) = WsClient::connect(&url, None).await {
            again = Some(ws);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut again = again.expect("the slot freed by closing is reusable");
    assert_eq!(
        again.recv_json().await["event"],
        "pubb:connection_established"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_hundred_channels_per_connection() {
    let server = Server::start(&config_with("[limits]\ncommand_rate = 1000\n"));
    let mut s = connect(&server).await;
    for i in 0..100 {
        subscribe(&mut s.ws, &format!("c-{i}")).await;
    }
    // A repeat of a held channel is still acknowledged.
    subscribe(&mut s.ws, "c-0").await;
    s.ws.send_json(&json!({"action": "subscribe", "channel": "c-100"}))
        .await;
    assert_eq!(
        s.ws.recv_json().await,
        json!({"event": "subscription_error", "channel": "c-100", "data": "Channel limit exceeded (100)"})
    );
    // The connection stays open; unsubscribing frees a slot.
    s.ws.send_json(&json!({"action": "unsubscribe", "channel": "c-5"}))
        .await;
    subscribe(&mut s.ws, "c-100").await;
    publish(&server, &json!({"channel": "c-100", "name": "e"})).await;
    assert_eq!(s.ws.recv_json().await, envelope("c-100", "e", &json!(null)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_channel_names() {
    let server = Server::start(TEST_CONFIG);
    let mut s = connect(&server).await;
    let ok = "aZ0_-=@,.;".to_owned() + &"x".repeat(190);
    subscribe(&mut s.ws, &ok).await;
    for bad in ["", "has space", "slash/no", "é", &"x".repeat(201)] {
        s.ws.send_json(&json!({"action": "subscribe", "channel": bad}))
            .await;
        assert_eq!(
            s.ws.recv_json().await,
            json!({"event": "subscription_error", "channel": bad, "data": "Invalid channel name"})
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_over_16_kib_close_1009() {
    let server = Server::start(TEST_CONFIG);
    let mut s = connect(&server).await;
    let prefix = r#"{"action":"subscribe","channel":"big","pad":""#;
    let fill = 16 * 1024 - prefix.len() - 2;
    let exact = format!("{prefix}{}\"}}", "x".repeat(fill));
    assert_eq!(exact.len(), 16 * 1024);
    s.ws.send_text(&exact).await;
    expect_ack(&mut s.ws, "big").await;

    let over = format!("{prefix}{}\"}}", "x".repeat(fill + 1));
    s.ws.send_text(&over).await;
    assert_eq!(s.ws.recv_close().await, Some(1009));

    let mut b = connect(&server).await;
    b.ws.send_binary(vec![0; 16 * 1024 + 1]).await;
    assert_eq!(b.ws.recv_close().await, Some(1009));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_than_twenty_commands_a_second_disconnects() {
    let server = Server::start(TEST_CONFIG);
    let mut s = connect(&server).await;
    for i in 0..21 {
        s.ws.send_json(&json!({"action": "subscribe", "channel": format!("r-{i}")}))
            .await;
    }
    for i in 0..20 {
        expect_ack(&mut s.ws, &format!("r-{i}")).await;
    }
    assert_eq!(
        s.ws.recv_json().await,
        json!({"event": "error", "data": "Command rate exceeded (20/s)"})
    );
    assert_eq!(s.ws.recv_close().await, Some(1008));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignored_messages_still_count_toward_the_rate() {
    let server = Server::start(TEST_CONFIG);
    let mut s = connect(&server).await;
    let junk = [
        "{not json".to_owned(),
        "[]".to_owned(),
        "\"text\"".to_owned(),
        json!({"channel": "a"}).to_string(),
        json!({"action": "publish", "channel": "a", "data": 1}).to_string(),
        json!({"action": "ping"}).to_string(),
        json!({"event": "pubb:ping"}).to_string(),
        json!({"action": 5, "channel": "a"}).to_string(),
        json!({"action": "subscribe", "channel": 5}).to_string(),
    ];
    for text in &junk {
        s.ws.send_text(text).await;
    }
    s.ws.send_binary(vec![1, 2, 3]).await;
    s.ws.expect_no_frame_within(QUIET).await;
    // Ten ignored so far; ten more commands fill the window.
    for i in 0..10 {
        s.ws.send_json(&json!({"action": "subscribe", "channel": format!("ok-{i}")}))
            .await;
    }
    s.ws.send_text("{}").await;
    for i in 0..10 {
        expect_ack(&mut s.ws, &format!("ok-{i}")).await;
    }
    assert_eq!(s.ws.recv_json().await["event"], "error");
    assert!(matches!(s.ws.recv().await, WsMessage::Close(Some(1008), _)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apps_are_isolated() {
    let server = Server::start(&config_with(
        "[[apps]]\nid = \"app-2\"\nkey = \"app-key-2\"\nsecret = \"app-secret-2\"\n",
    ));
    let mut one = connect(&server).await;
    let mut two = connect_query(&server, "appKey=app-key-2&protocol=2").await;
    subscribe(&mut one.ws, "news").await;
    subscribe(&mut two.ws, "news").await;

    publish(&server, &json!({"channel": "news", "name": "for-one"})).await;
    assert_eq!(
        one.ws.recv_json().await,
        envelope("news", "for-one", &json!(null))
    );
    let (status, _) = server
        .http("app-secret-2")
        .post(
            "/api/apps/app-2/events",
            &json!({"channel": "news", "name": "for-two"}),
        )
        .await;
    assert_eq!(status, 202);
    assert_eq!(
        two.ws.recv_json().await,
        envelope("news", "for-two", &json!(null))
    );
    one.ws.expect_no_frame_within(QUIET).await;
    two.ws.expect_no_frame_within(QUIET).await;

    // One app's secret neither publishes to nor signs for another app.
    let (status, _) = server
        .http("app-secret-2")
        .post(&events_path(), &json!({"channel": "news", "name": "x"}))
        .await;
    assert_eq!(status, 401);
    let foreign = format!(
        "{APP_KEY}:{}",
        bubble_tests::hmac_sha256_hex("app-secret-2", &format!("{}:private-a", one.socket_id))
    );
    one.ws
        .send_json(&json!({"action": "subscribe", "channel": "private-a", "auth": foreign}))
        .await;
    expect_not_authorized(&mut one.ws, "private-a").await;
    // Excluding a socket id of another app excludes nobody here.
    publish(
        &server,
        &json!({"channel": "news", "name": "all", "socket_id": two.socket_id}),
    )
    .await;
    assert_eq!(
        one.ws.recv_json().await,
        envelope("news", "all", &json!(null))
    );
}
