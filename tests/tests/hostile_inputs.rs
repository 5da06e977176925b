//! Hostile inputs: deeply nested and oversized JSON, header and query
//! floods, handshake floods with bad credentials, clients past the rate and
//! connection limits. Each gets its exact answer, and the server goes on
//! serving a well-behaved client within its normal latency: a probe (dave,
//! on his own thread) times its append round trips before, during and
//! after each attack, and the test asserts the generous bound of
//! [`bubble_tests::latency`] (the one place these tests look at time; see
//! that module for why). The tests take turns, so that no attack is
//! another test's baseline noise.

mod channels_common;

use bubble_tests::latency::{self, assert_served, Probe, Via, ROUND_TRIPS};
use bubble_tests::pusher::{signed, unix_now};
use bubble_tests::threads::{
    append, create_thread, error_code, expect_event, run_started, subscribe,
};
use bubble_tests::{
    raw_request, Server, WsClient, ALICE, APP_ID, APP_KEY, APP_SECRET, BOB, DAVE, HANG_TIMEOUT,
};
use channels_common::{backend, config_with, connect, events_path};

fn nested(depth: usize) -> String {
    format!("{}{}", "[".repeat(depth), "]".repeat(depth))
}

/// An event body whose `part` nests `depth` arrays deep.
fn nested_event(depth: usize) -> String {
    format!(
        r#"{{"type":"message_part","runId":"r","version":"ai-sdk-v6","part":{}}}"#,
        nested(depth)
    )
}

/// dave's probe on his thread `probe`, with its baseline measured.
async fn probe(server: &Server, via: Via) -> (Probe, bubble_tests::latency::Samples) {
    let mut probe = Probe::start(server, DAVE, "probe", via).await;
    let baseline = probe.measure(ROUND_TRIPS).await;
    (probe, baseline)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deeply_nested_and_oversized_json() {
    let _turn = latency::turn().await;
    let server = Server::start(&config_with(""));
    create_thread(&server.http(ALICE), "calm").await;
    let (probe, baseline) = probe(&server, Via::Http).await;
    let during = probe.during();
    let alice = server.http(ALICE);
    let json_type = [("content-type", "application/json")];

    // Past serde_json's recursion limit (128), within the body limit.
    for depth in [129, 1_000, 50_000] {
        for (path, body) in [
            (
                "/v1/threads",
                format!(r#"{{"threadId":"n","title":{}}}"#, nested(depth)),
            ),
            ("/v1/threads/calm/events", nested_event(depth)),
        ] {
            let res = alice
                .request("POST", path, &json_type, body.into_bytes())
                .await;
            assert_eq!(res.status, 400, "{path} depth {depth}: {}", res.text());
            error_code(&res.json(), "invalid_request");
        }
        let res = backend(&server)
            .request(
                "POST",
                &events_path(),
                &json_type,
                nested(depth).into_bytes(),
            )
            .await;
        assert_eq!(
            (res.status, res.json()["code"].as_str()),
            (400, Some("invalid_body")),
            "publish depth {depth}: {}",
            res.text()
        );
    }
    // Past the body limit, nested or not.
    for body in [
        nested(150_000),
        format!(r#"{{"x":"{}"}}"#, "y".repeat(300_000)),
    ] {
        let res = alice
            .request(
                "POST",
                "/v1/threads/calm/events",
                &json_type,
                body.into_bytes(),
            )
            .await;
        assert_eq!(res.status, 413, "{}", res.text());
        error_code(&res.json(), "payload_too_large");
    }

    // Over /v1/ws: an unscoped invalid_request, and the socket stays open.
    let mut ws = server.ws(ALICE).await;
    for depth in [129, 100_000] {
        ws.send_text(&nested(depth)).await;
        let frame = ws.recv_json().await;
        bubble_tests::threads::error_frame(&frame, "invalid_request", None);
        let append = format!(
            r#"{{"type":"thread.append","threadId":"calm","event":{}}}"#,
            nested_event(depth)
        );
        ws.send_text(&append).await;
        let frame = ws.recv_json().await;
        bubble_tests::threads::error_frame(&frame, "invalid_request", None);
    }
    subscribe(&mut ws, "calm", None).await;

    // Over /socket: a malformed command is ignored; the socket goes on.
    let mut socket = connect(&server).await;
    socket.ws.send_text(&nested(5_000)).await;
    channels_common::subscribe(&mut socket.ws, "news").await;
    let (mut probe, during) = during.stop().await;
    let after = probe.measure(ROUND_TRIPS).await;
    assert_served("nested and oversized JSON", &baseline, &during, &after);
}

/// Status of a raw request.
async fn raw_status(server: &Server, request: Vec<u8>) -> u16 {
    let addr = server.addr();
    tokio::task::spawn_blocking(move || raw_request(addr, &request).status)
        .await
        .expect("raw request")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_and_query_floods() {
    let _turn = latency::turn().await;
    let server = Server::start(&config_with(""));
    create_thread(&server.http(ALICE), "calm").await;
    append(&server.http(ALICE), "calm", &run_started("r")).await;
    let (probe, baseline) = probe(&server, Via::Http).await;
    let during = probe.during();

    let request = |target: &str, headers: &str| {
        format!(
            "GET {target} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {ALICE}\r\n{headers}Connection: close\r\n\r\n"
        )
        .into_bytes()
    };
    // Too many headers, and one huge header: 431.
    let many: String = (0..500).map(|i| format!("X-Flood-{i}: v\r\n")).collect();
    assert_eq!(
        raw_status(&server, request("/v1/threads/calm", &many)).await,
        431
    );
    let huge = format!("X-Huge: {}\r\n", "h".repeat(512 * 1024));
    assert_eq!(
        raw_status(&server, request("/v1/threads/calm", &huge)).await,
        431
    );

    // A query of 5,000 parameters is read whole (the last value wins).
    let flood: String = (0..5_000).map(|i| format!("&p{i}=v")).collect();
    let target = format!("/v1/threads/calm/events?fromSeq=1{flood}&limit=1");
    let (status, body) = server.http(ALICE).get(&target).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["events"].as_array().map(Vec::len), Some(1), "{body}");
    // A query of malformed escapes is refused.
    let target = format!(
        "/v1/threads/calm/events?fromSeq=1{}",
        "&x=%zz".repeat(2_000)
    );
    let (status, body) = server.http(ALICE).get(&target).await;
    assert_eq!(status, 400, "{body}");
    error_code(&body, "invalid_request");
    // A target longer than the server reads: refused before routing.
    let target = format!("/v1/threads/calm/events?fromSeq=1&p={}", "q".repeat(70_000));
    let status = raw_status(&server, request(&target, "")).await;
    assert!(status == 414 || status == 431, "{status}");
    let (mut probe, during) = during.stop().await;
    let after = probe.measure(ROUND_TRIPS).await;
    assert_served("header and query floods", &baseline, &during, &after);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn handshake_flood_with_bad_credentials() {
    let _turn = latency::turn().await;
    let server = Server::start(&config_with(""));
    let (probe, baseline) = probe(&server, Via::Http).await;
    let during = probe.during();
    let mut floods = Vec::new();
    for i in 0..200 {
        let threads_url = server.ws_url(&format!("/v1/ws?access_token=bad-{i}"));
        let socket_url = server.ws_url(&format!("/socket?appKey=bad-key-{i}&protocol=2"));
        floods.push(tokio::spawn(async move {
            let mut ws = WsClient::connect(&threads_url, Some(&format!("bad-{i}")))
                .await
                .expect("a bad token still upgrades");
            let frame = ws.recv_json().await;
            bubble_tests::threads::error_frame(&frame, "unauthorized", None);
            assert_eq!(ws.recv_close().await, Some(1008));
            match WsClient::connect(&socket_url, None).await {
                Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
                    assert_eq!(response.status().as_u16(), 404, "unknown app key");
                }
                Err(other) => panic!("refused with an HTTP answer, got {other}"),
                Ok(mut ws) => panic!("a bad app key upgraded: {:?}", ws.recv().await),
            }
        }));
    }
    for flood in floods {
        tokio::time::timeout(HANG_TIMEOUT, flood)
            .await
            .expect("no hang")
            .expect("flood client");
    }
    let (mut probe, during) = during.stop().await;
    let after = probe.measure(ROUND_TRIPS).await;
    assert_served("handshake flood", &baseline, &during, &after);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_principal_http_rate_limit_answers_429_with_retry_after() {
    let _turn = latency::turn().await;
    let server = Server::start(&config_with(
        "[limits]\nhttp_rate = 5\nhttp_rate_window_ms = 600000\n",
    ));
    // The probe appends over its socket: the HTTP budget is bob's and alice's.
    let (probe, baseline) = probe(&server, Via::Socket).await;
    let mut calm = {
        let mut ws = server.ws(ALICE).await;
        create_thread(&server.http(BOB), "calm").await;
        bubble_tests::threads::grant(&server.http(BOB), "calm", "alice", "reader").await;
        subscribe(&mut ws, "calm", None).await;
        ws
    };
    let during = probe.during();
    let alice = server.http(ALICE);
    // Within the window: five requests, then every further one is refused.
    for i in 0..5 {
        let (status, body) = alice.get("/v1/threads").await;
        assert_eq!(status, 200, "request {i}: {body}");
    }
    for _ in 0..200 {
        let res = alice.request("GET", "/v1/threads", &[], Vec::new()).await;
        assert_eq!(res.status, 429, "{}", res.text());
        error_code(&res.json(), "rate_limited");
        let retry: u64 = res
            .header("retry-after")
            .and_then(|v| v.parse().ok())
            .expect("Retry-After in seconds");
        assert!((1..=600).contains(&retry), "{retry}");
    }
    // Another principal is served, and alice's socket still gets events.
    let bob = server.http(BOB);
    append(&bob, "calm", &run_started("r")).await;
    expect_event(&mut calm, "calm", 1).await;
    let (mut probe, during) = during.stop().await;
    let after = probe.measure(ROUND_TRIPS).await;
    assert_served("threads API over its rate", &baseline, &during, &after);
}

/// The channels APIs count each app's requests (`/api/apps/:id/…` and
/// Pusher's signed `/apps/:id/…` together), after its secret or signature
/// was checked: the one past `http_rate` gets `429` with `Retry-After`,
/// while another app and the threads API are served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_app_http_rate_limit_answers_429_with_retry_after() {
    let _turn = latency::turn().await;
    let server = Server::start(&config_with(
        "[[apps]]\nid = \"app-2\"\nkey = \"app-key-2\"\nsecret = \"app-secret-2\"\n\n[limits]\nhttp_rate = 4\nhttp_rate_window_ms = 600000\n",
    ));
    let (probe, baseline) = probe(&server, Via::Socket).await;
    let mut subscriber = connect(&server).await;
    channels_common::subscribe(&mut subscriber.ws, "news").await;
    let during = probe.during();
    let publication = serde_json::json!({"channel": "news", "name": "n", "data": "{}"});
    // A wrong secret is refused before it counts.
    let (status, _) = server
        .http("wrong")
        .post(&events_path(), &publication)
        .await;
    assert_eq!(status, 401);
    let app = backend(&server);
    for i in 0..3 {
        let (status, body) = app.post(&events_path(), &publication).await;
        assert_eq!(status, 202, "publish {i}: {body}");
    }
    // The Pusher API shares the app's budget: its fourth request fits.
    let pusher_path = format!("/apps/{APP_ID}/events");
    let pusher_body = br#"{"name":"n","channel":"news","data":"{}"}"#;
    let res = signed(
        &server,
        (APP_KEY, APP_SECRET),
        "POST",
        &pusher_path,
        &[],
        pusher_body,
        unix_now(),
    )
    .await;
    assert_eq!(res.status, 200, "{}", res.text());
    for _ in 0..100 {
        let res = app
            .request(
                "POST",
                &events_path(),
                &[("content-type", "application/json")],
                publication.to_string().into_bytes(),
            )
            .await;
        assert_eq!(res.status, 429, "{}", res.text());
        assert_eq!(
            res.json(),
            serde_json::json!({"error": "Workspace throughput is busy. Retry after the indicated delay.",
                               "code": "rate_limit_exceeded"})
        );
        let retry: u64 = res
            .header("retry-after")
            .and_then(|v| v.parse().ok())
            .expect("Retry-After in seconds");
        assert!((1..=600).contains(&retry), "{retry}");
    }
    let res = signed(
        &server,
        (APP_KEY, APP_SECRET),
        "POST",
        &pusher_path,
        &[],
        pusher_body,
        unix_now(),
    )
    .await;
    assert_eq!(res.status, 429, "{}", res.text());
    assert_eq!(
        res.text(),
        "Too many requests: at most 4 per 600000 ms for one app."
    );
    assert!(res.header("retry-after").is_some(), "Retry-After");
    // Another app is served, and the subscriber got the four accepted ones.
    let (status, body) = server
        .http("app-secret-2")
        .post("/api/apps/app-2/events", &publication)
        .await;
    assert_eq!(status, 202, "{body}");
    for _ in 0..4 {
        let (channel, name, _) = channels_common::recv_event(&mut subscriber.ws).await;
        assert_eq!((channel.as_str(), name.as_str()), ("news", "n"));
    }
    let (mut probe, during) = during.stop().await;
    let after = probe.measure(ROUND_TRIPS).await;
    assert_served("channels API over its rate", &baseline, &during, &after);
}

/// Opens `/v1/ws` as `token` and tells whether it was admitted: a refused
/// socket gets an unscoped `rate_limited` error and close 1013.
async fn admitted(server: &Server, token: &str) -> Option<WsClient> {
    let mut ws = server.ws(token).await;
    ws.send_json(&serde_json::json!({"type": "thread.subscribe", "threadId": "calm"}))
        .await;
    let frame = ws.recv_json().await;
    if frame["type"] == "thread.subscription_opened" {
        return Some(ws);
    }
    bubble_tests::threads::error_frame(&frame, "rate_limited", None);
    assert_eq!(ws.recv_close().await, Some(1013));
    None
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_limits_per_principal_and_global() {
    let _turn = latency::turn().await;
    // Five sockets in all: the probe's, and four for the test.
    let server = Server::start(&config_with(
        "[limits]\nmax_connections_per_principal = 2\nmax_connections = 5\n",
    ));
    let (probe, baseline) = probe(&server, Via::Http).await;
    create_thread(&server.http(BOB), "calm").await;
    bubble_tests::threads::grant(&server.http(BOB), "calm", "alice", "reader").await;
    let during = probe.during();

    // Per principal: alice's third socket is refused, bob still gets his.
    let first = admitted(&server, ALICE).await.expect("alice 1");
    let _second = admitted(&server, ALICE).await.expect("alice 2");
    for _ in 0..50 {
        assert!(admitted(&server, ALICE).await.is_none(), "alice 3");
    }
    let mut bob = admitted(&server, BOB).await.expect("bob 1");

    // Global, both protocols: a fifth socket fits, a sixth is refused.
    let _socket = connect(&server).await;
    let url = server.ws_url(&format!(
        "/socket?appKey={}&protocol=2",
        bubble_tests::APP_KEY
    ));
    for _ in 0..50 {
        match WsClient::connect(&url, None).await {
            Err(tokio_tungstenite::tungstenite::Error::Http(response)) => {
                assert_eq!(response.status().as_u16(), 503);
                assert!(response.headers().contains_key("retry-after"));
            }
            other => panic!("expected 503, got {:?}", other.map(|_| "a socket")),
        }
    }
    assert!(admitted(&server, BOB).await.is_none(), "bob 2, the sixth");

    // The admitted go on being served.
    append(&server.http(BOB), "calm", &run_started("r")).await;
    expect_event(&mut bob, "calm", 1).await;
    let (mut probe, during) = during.stop().await;
    let after = probe.measure(ROUND_TRIPS).await;
    assert_served("connections over the limits", &baseline, &during, &after);

    // A closed socket frees its place.
    first.close(1000).await;
    let deadline = tokio::time::Instant::now() + HANG_TIMEOUT;
    while admitted(&server, ALICE).await.is_none() {
        assert!(tokio::time::Instant::now() < deadline, "the place is freed");
    }
}
