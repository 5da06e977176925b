//! Tokens and secrets never reach the logs: the server runs at
//! `RUST_LOG=debug` while clients use static tokens (header and
//! `?access_token=`), JWTs (valid, expired, forged), wrong guesses, the
//! channel app's secret, and subscription signatures (good and bad); then
//! none of those strings appears in what it wrote to stderr.

mod channels_common;

use bubble_tests::threads::{append, create_thread, run_started, subscribe};
use bubble_tests::{
    sign_jwt, unix_now, Server, WsClient, ALICE, APP_KEY, APP_SECRET, JWT_SECRET, TEST_CONFIG,
};
use channels_common::{auth_path, backend, connect, events_path, expect_ack, sign};
use serde_json::json;

const WRONG_TOKEN: &str = "token-wrong-guess-7f3a";
const WRONG_SECRET: &str = "app-secret-wrong-guess-91c2";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_token_secret_or_signature_is_logged_at_debug() {
    let mut server = Server::start_logging(TEST_CONFIG, "debug");
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
