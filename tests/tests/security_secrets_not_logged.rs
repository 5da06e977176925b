//! Tokens and secrets never reach the logs: the server runs at
//! `RUST_LOG=debug` while clients use static tokens (header and
//! `?access_token=`), JWTs (valid, expired, forged), wrong guesses, the
//! channel app's secret, subscription signatures (good and bad), Pusher's
//! signed HTTP API (`auth_signature`, good and bad) and webhooks (the
//! `X-Pusher-Signature` of each batch); a cluster node runs with the
//! password of its PostgreSQL role in its `--store` URL. Then none of
//! those strings appears in what the server wrote to stderr.

mod channels_common;

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use bubble_tests::pusher::{signed, signed_query};
use bubble_tests::threads::{append, create_thread, run_started, subscribe};
use bubble_tests::{
    sign_jwt, unix_now, Deployment, Server, WsClient, ALICE, APP_ID, APP_KEY, APP_SECRET,
    HANG_TIMEOUT, JWT_SECRET, TEST_CONFIG,
};
use channels_common::{auth_path, backend, connect, events_path, expect_ack, sign};
use serde_json::json;

const WRONG_TOKEN: &str = "token-wrong-guess-7f3a";
const WRONG_SECRET: &str = "app-secret-wrong-guess-91c2";

/// An HTTP endpoint that answers `200` to every request and keeps each
/// request's `X-Pusher-Signature` (a webhook receiver).
fn webhook_receiver() -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/hooks", listener.local_addr().expect("addr"));
    let signatures = Arc::new(Mutex::new(Vec::new()));
    let kept = signatures.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut length = 0usize;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                let lower = line.to_ascii_lowercase();
                if let Some(v) = lower.strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                if let Some(v) = lower.strip_prefix("x-pusher-signature:") {
                    kept.lock().expect("lock").push(v.trim().to_owned());
                }
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let _ = stream
                .write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        }
    });
    (url, signatures)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_token_secret_or_signature_is_logged_at_debug() {
    let (hooks, webhook_signatures) = webhook_receiver();
    let config = TEST_CONFIG.replace(
        "secret = \"app-secret\"\n",
        &format!(
            "secret = \"app-secret\"\n\n[[apps.webhooks]]\nurl = \"{hooks}\"\nevent_types = [\"channel_occupied\", \"channel_vacated\"]\n"
        ),
    );
    assert_ne!(config, TEST_CONFIG, "the webhook is configured");
    let mut server = Server::start_logging(&config, "debug");
    let mut secrets: Vec<String> = vec![
        ALICE.into(),
        APP_SECRET.into(),
        JWT_SECRET.into(),
        WRONG_TOKEN.into(),
        WRONG_SECRET.into(),
    ];

    // Static tokens over HTTP, a wrong one too.
    let alice = server.http(ALICE);
    create_thread(&alice, "t-1").await;
    append(&alice, "t-1", &run_started("r")).await;
    let (status, _) = server.http(WRONG_TOKEN).get("/v1/threads/t-1").await;
    assert_eq!(status, 401);

    // JWTs: valid, expired and signed with another secret.
    let valid = sign_jwt(JWT_SECRET, &json!({"sub": "zoe", "exp": unix_now() + 3600}));
    let expired = sign_jwt(JWT_SECRET, &json!({"sub": "zoe", "exp": unix_now() - 60}));
    let forged = sign_jwt("not-the-secret", &json!({"sub": "zoe"}));
    create_thread(&server.http(&valid), "t-zoe").await;
    for bad in [&expired, &forged] {
        let (status, _) = server.http(bad).get("/v1/threads/t-zoe").await;
        assert_eq!(status, 401);
    }
    for jwt in [&valid, &expired, &forged] {
        secrets.push(jwt.clone());
        // The signature alone, and the payload (it carries no secret, but
        // a log of the whole token would show it).
        secrets.push(jwt.rsplit('.').next().expect("signature").to_owned());
    }

    // The socket: bearer header, `?access_token=`, and a wrong token.
    let mut ws = server.ws(ALICE).await;
    subscribe(&mut ws, "t-1", None).await;
    let url = server.ws_url(&format!("/v1/ws?access_token={valid}"));
    let mut ws = WsClient::connect(&url, None).await.expect("upgrade");
    subscribe(&mut ws, "t-zoe", None).await;
    let url = server.ws_url(&format!("/v1/ws?access_token={WRONG_TOKEN}"));
    let mut ws = WsClient::connect(&url, None).await.expect("upgrade");
    assert_eq!(ws.recv_json().await["code"], "unauthorized");

    // The channel app: publish and auth with its secret, a wrong secret,
    // a private subscription signed well and one signed badly.
    let (status, body) = backend(&server)
        .post(
            &events_path(),
            &json!({"channel": "news", "name": "n", "data": {}}),
        )
        .await;
    assert_eq!(status, 202, "{body}");
    let (status, _) = server
        .http(WRONG_SECRET)
        .post(
            &events_path(),
            &json!({"channel": "news", "name": "n", "data": {}}),
        )
        .await;
    assert_eq!(status, 401);
    let mut socket = connect(&server).await;
    let (status, body) = backend(&server)
        .post(
            &auth_path(),
            &json!({"socket_id": socket.socket_id, "channel_name": "private-room"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let auth = body["auth"].as_str().expect("auth").to_owned();
    assert_eq!(auth, sign(&socket.socket_id, "private-room", None));
    socket
        .ws
        .send_json(&json!({"action": "subscribe", "channel": "private-room", "auth": auth}))
        .await;
    expect_ack(&mut socket.ws, "private-room").await;
    let bad_signature = format!("{APP_KEY}:{}", "ab".repeat(32));
    socket
        .ws
        .send_json(
            &json!({"action": "subscribe", "channel": "private-other", "auth": bad_signature}),
        )
        .await;
    assert_eq!(socket.ws.recv_json().await["event"], "subscription_error");
    secrets.push(auth.split_once(':').expect("key:signature").1.to_owned());
    secrets.push("ab".repeat(32));

    // Pusher's signed HTTP API: a good `auth_signature` and a bad one.
    let path = format!("/apps/{APP_ID}/events");
    let body = br#"{"name":"n","channel":"news","data":"{}"}"#;
    let now = unix_now();
    let query = signed_query((APP_KEY, APP_SECRET), "POST", &path, &[], body, now);
    let good = query
        .rsplit_once("auth_signature=")
        .expect("auth_signature")
        .1
        .to_owned();
    let res = signed(
        &server,
        (APP_KEY, APP_SECRET),
        "POST",
        &path,
        &[],
        body,
        now,
    )
    .await;
    assert_eq!(res.status, 200, "{}", res.text());
    let forged = signed_query((APP_KEY, WRONG_SECRET), "POST", &path, &[], body, now);
    let res = server
        .http_anonymous()
        .request(
            "POST",
            &format!("{path}?{forged}"),
            &[("content-type", "application/json")],
            body.to_vec(),
        )
        .await;
    assert_eq!(res.status, 401, "{}", res.text());
    secrets.push(good);
    secrets.push(
        forged
            .rsplit_once("auth_signature=")
            .expect("signature")
            .1
            .to_owned(),
    );

    // Webhooks: the channel became occupied; its batch was signed.
    let deadline = std::time::Instant::now() + HANG_TIMEOUT;
    while webhook_signatures.lock().expect("lock").is_empty() {
        assert!(std::time::Instant::now() < deadline, "a webhook arrives");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    secrets.extend(webhook_signatures.lock().expect("lock").iter().cloned());

    server.terminate();
    let logs = server.logs();
    assert!(
        logs.contains("DEBUG"),
        "the server logged at debug:\n{logs}"
    );
    for secret in &secrets {
        assert!(
            !logs.contains(secret.as_str()),
            "the logs contain the secret {secret:?}:\n{logs}"
        );
    }
}

/// A cluster node whose `--store` URL carries its role's password logs the
/// URL without it (at debug, from start to stop).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_postgres_password_is_never_logged() {
    const PASSWORD: &str = "pg-password-6e1f3c9a";
    let mut deployment = Deployment::with_broker(None).with_own_role(PASSWORD);
    assert!(deployment.store_url().contains(PASSWORD));
    let mut node = deployment.node_logging(TEST_CONFIG, "debug");
    let alice = node.http(ALICE);
    create_thread(&alice, "t-pg").await;
    append(&alice, "t-pg", &run_started("r")).await;
    node.terminate();
    let logs = node.logs();
    assert!(logs.contains("store opened"), "{logs}");
    assert!(
        !logs.contains(PASSWORD),
        "the logs contain the PostgreSQL password:\n{logs}"
    );
}
