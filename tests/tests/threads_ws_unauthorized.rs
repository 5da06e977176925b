//! A `/v1/ws` upgrade with a bad or missing bearer is accepted, gets
//! exactly one unscoped `unauthorized` error frame, then close 1008.
//! `?access_token=` is the browser path.

use bubble_tests::threads::{create_thread, error_frame, subscribe};
use bubble_tests::{Message, Server, WsClient, WsMessage, ALICE, TEST_CONFIG};

async fn expect_refused(mut ws: WsClient) {
    let frame = ws.recv_json().await;
    error_frame(&frame, "unauthorized", None);
    assert_eq!(ws.recv_close().await, Some(1008));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_or_missing_bearer_is_one_error_then_1008() {
    let server = Server::start(TEST_CONFIG);
    let url = server.ws_url("/v1/ws");
    expect_refused(
        WsClient::connect(&url, Some("wrong-token"))
            .await
            .expect("upgrade"),
    )
    .await;
    expect_refused(WsClient::connect(&url, None).await.expect("upgrade")).await;
    let bad_query = server.ws_url("/v1/ws?access_token=wrong-token");
    expect_refused(WsClient::connect(&bad_query, None).await.expect("upgrade")).await;

    // A refused socket ignores whatever it sends before the close.
    let mut ws = WsClient::connect(&url, Some("wrong-token"))
        .await
        .expect("upgrade");
    // The server may already have closed: a failed send is fine here.
    let _ = ws
        .send(Message::text(
            r#"{"type":"thread.subscribe","threadId":"x"}"#,
        ))
        .await;
    let frame = ws.recv_json().await;
    error_frame(&frame, "unauthorized", None);
    match ws.recv().await {
        WsMessage::Close(code, _) => assert_eq!(code, Some(1008)),
        other => panic!("expected close 1008, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_token_query_parameter_authenticates() {
    let server = Server::start(TEST_CONFIG);
    create_thread(&server.http(ALICE), "thread-1").await;
    let url = server.ws_url(&format!("/v1/ws?access_token={ALICE}"));
    let mut ws = WsClient::connect(&url, None).await.expect("upgrade");
    assert_eq!(subscribe(&mut ws, "thread-1", None).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ws_path_is_configurable() {
    let config = format!("ws_path = \"/live\"\n{TEST_CONFIG}");
    let server = Server::start(&config);
    create_thread(&server.http(ALICE), "thread-1").await;
    let mut ws = WsClient::connect(&server.ws_url("/live"), Some(ALICE))
        .await
        .expect("upgrade");
    assert_eq!(subscribe(&mut ws, "thread-1", None).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_token_works_on_a_configured_path_and_the_default_path_is_gone() {
    let config = format!("ws_path = \"/live\"\n{TEST_CONFIG}");
    let server = Server::start(&config);
    create_thread(&server.http(ALICE), "thread-1").await;
    let url = server.ws_url(&format!("/live?access_token={ALICE}"));
    let mut ws = WsClient::connect(&url, None).await.expect("upgrade");
    assert_eq!(subscribe(&mut ws, "thread-1", None).await, 0);
    expect_refused(
        WsClient::connect(&server.ws_url("/live"), None)
            .await
            .expect("upgrade"),
    )
    .await;

    let plain = server
        .http_anonymous()
        .request("GET", "/v1/ws", &[], Vec::new())
        .await;
    assert_eq!(plain.status, 404);
}
