//! What the host itself decides: body and message size bounds, slow
//! consumers, health endpoints, and graceful shutdown.

mod support;

use futures_util::{SinkExt, StreamExt};
use serde_json::json;
use support::{config, http, request, Bubble, HANG_TIMEOUT};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{connect_async, MaybeTlsStream, WebSocketStream};

type Ws = WebSocketStream<MaybeTlsStream<tokio::net::TcpStream>>;

async fn ws_connect(url: &str, token: Option<&str>) -> Ws {
    let mut req = url.into_client_request().expect("request");
    if let Some(token) = token {
        req.headers_mut().insert(
            "authorization",
            format!("Bearer {token}").parse().expect("header"),
        );
    }
    let (ws, _) = tokio::time::timeout(HANG_TIMEOUT, connect_async(req))
        .await
        .expect("connect timed out")
        .expect("connect");
    ws
}

/// Reads until a Close frame and returns its code (None if the stream ends without one).
async fn close_code(ws: &mut Ws) -> Option<u16> {
    loop {
        let next = tokio::time::timeout(HANG_TIMEOUT, ws.next())
            .await
            .expect("no close in time");
        match next {
            Some(Ok(Message::Close(frame))) => return frame.map(|f| u16::from(f.code)),
            Some(Ok(_)) => {}
            Some(Err(e)) => panic!("socket failed before a close frame: {e}"),
            None => return None,
        }
    }
}

fn start(extra: &str) -> (tempfile::TempDir, Bubble) {
    let dir = tempfile::tempdir().expect("temp dir");
    let cfg = config(dir.path(), extra);
    let cfg = cfg.to_string_lossy().into_owned();
    let server = Bubble::start(dir.path(), &["--config", &cfg, "--store", "memory"]);
    (dir, server)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_body_is_413_with_the_error_body() {
    let (_dir, server) = start("[limits]\nmax_event_bytes = 1024\n");
    let body = "x".repeat(2 * 1024 + 64 * 1024 + 1);
    let url = server.url("/v1/threads/t/events");
    let reply = request(&http(), "POST", &url, Some("dev-alice"), body)
        .await
        .expect("request");
    assert_eq!(reply.status, 413);
    assert_eq!(reply.json["error"]["code"], "payload_too_large");
    assert!(reply.json["error"]["message"].is_string());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_ws_messages_close_1009() {
    let (_dir, server) =
        start("[limits]\nmax_ws_frame_bytes = 4096\nmax_channel_message_bytes = 2048\n");
    let cases = [
        (server.ws_url("/v1/ws"), 4097),
        (server.ws_url("/v1/ws"), 300_000),
        (server.ws_url("/socket?appKey=app-key&protocol=2"), 2049),
        (server.ws_url("/socket?appKey=app-key&protocol=2"), 300_000),
    ];
    for (url, size) in cases {
        let mut ws = ws_connect(&url, Some("dev-alice")).await;
        ws.send(Message::text("x".repeat(size)))
            .await
            .expect("send");
        assert_eq!(
            close_code(&mut ws).await,
            Some(1009),
            "{url} with {size} bytes"
        );
    }
    // Messages at the limit are fine, and the server goes on serving.
    let mut ws = ws_connect(&server.ws_url("/v1/ws"), Some("dev-alice")).await;
    ws.send(Message::text(format!("{:<4096}", "{}")))
        .await
        .expect("send");
    let reply = tokio::time::timeout(HANG_TIMEOUT, ws.next())
        .await
        .expect("a reply");
    assert!(matches!(reply, Some(Ok(Message::Text(_)))), "{reply:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_consumer_is_closed_with_1013() {
    let (_dir, server) = start("[limits]\noutbound_queue_frames = 4\nbacklog_page = 1000\n");
    let client = http();
    let created = request(
        &client,
        "POST",
        &server.url("/v1/threads"),
        Some("dev-alice"),
        r#"{"threadId":"t"}"#,
    )
    .await
    .expect("create");
    assert_eq!(created.status, 201, "{}", created.text);
    for i in 0..50 {
        let body = json!({ "type": "run_started", "runId": format!("r{i}") }).to_string();
        let reply = request(
            &client,
            "POST",
            &server.url("/v1/threads/t/events"),
            Some("dev-alice"),
            body,
        )
        .await
        .expect("append");
        assert_eq!(reply.status, 201);
    }
    let mut ws = ws_connect(&server.ws_url("/v1/ws"), Some("dev-alice")).await;
    let subscribe = json!({ "type": "thread.subscribe", "threadId": "t", "fromSeq": 1 });
    ws.send(Message::text(subscribe.to_string()))
        .await
        .expect("send");
    assert_eq!(close_code(&mut ws).await, Some(1013));
    let metrics = request(&client, "GET", &server.url("/metrics"), None, "")
        .await
        .expect("metrics");
    assert!(
        metrics.text.contains("bubble_slow_consumer_closes_total 1"),
        "{}",
        metrics.text
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_readiness_and_metrics() {
    let (_dir, server) = start("");
    let client = http();
    let health = request(&client, "GET", &server.url("/healthz"), None, "")
        .await
        .expect("healthz");
    assert_eq!((health.status, health.text.as_str()), (200, "ok"));
    let ready = request(&client, "GET", &server.url("/readyz"), None, "")
        .await
        .expect("readyz");
    assert_eq!(ready.status, 200, "{}", ready.text);
    let metrics = request(&client, "GET", &server.url("/metrics"), None, "")
        .await
        .expect("metrics");
    assert_eq!(metrics.status, 200);
    for name in [
        "bubble_ws_connections",
        "bubble_events_appended_total",
        "bubble_open_sockets",
    ] {
        assert!(
            metrics.text.contains(name),
            "{name} missing from {}",
            metrics.text
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_closes_sockets_with_1001_and_exits_0() {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = format!("sqlite:{}", dir.path().join("bubble.db").display());
    let mut server = Bubble::start(dir.path(), &["--store", &store]);
    let mut threads = ws_connect(&server.ws_url("/v1/ws"), Some("dev-alice")).await;
    let mut channels = ws_connect(&server.ws_url("/socket?appKey=app-key&protocol=2"), None).await;
    // The channel socket's greeting proves both sockets are registered.
    let hello = tokio::time::timeout(HANG_TIMEOUT, channels.next())
        .await
        .expect("greeting");
    assert!(matches!(hello, Some(Ok(Message::Text(_)))), "{hello:?}");
    let created = request(
        &http(),
        "POST",
        &server.url("/v1/threads"),
        Some("dev-alice"),
        r#"{"threadId":"kept"}"#,
    )
    .await
    .expect("create");
    assert_eq!(created.status, 201);

    server.sigterm();
    assert_eq!(close_code(&mut threads).await, Some(1001));
    assert_eq!(close_code(&mut channels).await, Some(1001));
    drop((threads, channels));
    assert!(server.wait().success(), "exit status after SIGTERM");

    let server = Bubble::start(dir.path(), &["--store", &store]);
    let kept = request(
        &http(),
        "GET",
        &server.url("/v1/threads/kept"),
        Some("dev-alice"),
        "",
    )
    .await
    .expect("get");
    assert_eq!(kept.status, 200, "{}", kept.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_ws_path_takes_the_bearer_from_the_query() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Bubble::start(dir.path(), &["--store", "memory", "--ws-path", "/ws"]);

    let mut ws = ws_connect(&server.ws_url("/ws?access_token=dev-alice"), None).await;
    let subscribe = json!({ "type": "thread.subscribe", "threadId": "missing" });
    ws.send(Message::text(subscribe.to_string()))
        .await
        .expect("send");
    let frame = tokio::time::timeout(HANG_TIMEOUT, ws.next())
        .await
        .expect("a frame");
    let Some(Ok(Message::Text(text))) = frame else {
        panic!("{frame:?}")
    };
    let frame: serde_json::Value = serde_json::from_str(&text).expect("json");
    assert_eq!(frame["code"], "not_found", "{frame}");

    let mut anonymous = ws_connect(&server.ws_url("/ws"), None).await;
    let frame = tokio::time::timeout(HANG_TIMEOUT, anonymous.next())
        .await
        .expect("a frame");
    let Some(Ok(Message::Text(text))) = frame else {
        panic!("{frame:?}")
    };
    let frame: serde_json::Value = serde_json::from_str(&text).expect("json");
    assert_eq!(frame["code"], "unauthorized", "{frame}");
    assert_eq!(close_code(&mut anonymous).await, Some(1008));

    // The default path is not served when another one is configured.
    let plain = request(&http(), "GET", &server.url("/v1/ws"), None, "")
        .await
        .expect("get");
    assert_eq!(plain.status, 404);
}
