//! Every example of pubb-websocket-protocol.txt, against the real server.

mod channels_common;

use std::time::Duration;

use bubble_tests::{Server, APP_KEY, TEST_CONFIG};
use channels_common::*;
use serde_json::{json, Value};

const QUIET: Duration = Duration::from_millis(300);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_established_carries_a_fresh_socket_id() {
    let server = Server::start(TEST_CONFIG);
    let url = server.ws_url(&format!("/socket?appKey={APP_KEY}&protocol=2"));
    let mut ids = Vec::new();
    for _ in 0..2 {
        let mut ws = bubble_tests::WsClient::connect(&url, None).await.unwrap();
        let bubble_tests::WsMessage::Text(text) = ws.recv().await else {
            panic!("expected a text frame")
        };
        let prefix = r#"{"event":"pubb:connection_established","data":"{\"socket_id\":\""#;
        assert!(text.starts_with(prefix), "{text}");
        assert!(text.ends_with(r#"\",\"activity_timeout\":60}"}"#), "{text}");
        let frame: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(frame["event"], "pubb:connection_established");
        let data: Value = serde_json::from_str(frame["data"].as_str().unwrap()).unwrap();
        assert_eq!(data["activity_timeout"], 60);
        let id = data["socket_id"].as_str().unwrap().to_owned();
        assert_eq!(id.len(), 32);
        assert!(
            id.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
            "{id}"
        );
        ids.push(id);
    }
    assert_ne!(ids[0], ids[1], "each connection receives a new socket ID");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn public_subscribe_publish_and_unsubscribe() {
    let server = Server::start(TEST_CONFIG);
    let mut s = connect(&server).await;
    // {"action":"subscribe","channel":"notifications"}
    s.ws.send_json(&json!({"action": "subscribe", "channel": "notifications"}))
        .await;
    assert_eq!(
        s.ws.recv_json().await,
        json!({"event": "pubb:subscription_succeeded", "channel": "notifications", "data": "{}"})
    );

    let body =
        json!({"channel": "notifications", "name": "order.created", "data": {"orderId": "1042"}});
    let (status, response) = backend(&server)
        .post_idempotent(&events_path(), &body, "order-1042-created")
        .await;
    assert_eq!(status, 202);
    let publication_id = response["publicationId"].as_str().unwrap().to_owned();
    assert_eq!(
        response,
        json!({
            "success": true,
            "accepted": true,
            "channels": ["notifications"],
            "publicationId": publication_id,
            "duplicate": false
        })
    );
    let bytes = publication_id.as_bytes();
    assert_eq!(publication_id.len(), 36);
    assert_eq!(
        (bytes[8], bytes[13], bytes[14], bytes[18], bytes[23]),
        (b'-', b'-', b'4', b'-', b'-')
    );

    // {"channel":"notifications","data":"{\"name\":\"order.created\",\"data\":{\"orderId\":\"1042\"}}"}
    let frame = s.ws.recv_json().await;
    assert_eq!(
        frame,
        json!({"channel": "notifications", "data": "{\"name\":\"order.created\",\"data\":{\"orderId\":\"1042\"}}"})
    );

    // A repeat returns duplicate: true and the original publication ID, and delivers nothing.
    let (status, repeat) = backend(&server)
        .post_idempotent(&events_path(), &body, "order-1042-created")
        .await;
    assert_eq!(status, 202);
    assert_eq!(repeat["duplicate"], true);
    assert_eq!(repeat["publicationId"], publication_id.as_str());
    s.ws.expect_no_frame_within(QUIET).await;

    // Unsubscribe has no acknowledgement; nothing is delivered afterwards.
    s.ws.send_json(&json!({"action": "unsubscribe", "channel": "notifications"}))
        .await;
    s.ws.expect_no_frame_within(QUIET).await;
    publish(
        &server,
        &json!({"channel": "notifications", "name": "later"}),
    )
    .await;
    s.ws.expect_no_frame_within(QUIET).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_channel_via_the_authorization_endpoint() {
    let server = Server::start(TEST_CONFIG);
    let mut s = connect(&server).await;
    let channel = "private-user-42";

    // Without auth: the seed's subscription_error; the connection stays open.
    s.ws.send_json(&json!({"action": "subscribe", "channel": channel}))
        .await;
    assert_eq!(
        s.ws.recv_json().await,
        json!({"event": "subscription_error", "channel": "private-user-42", "data": "Subscription not authorized"})
    );

    let (status, body) = backend(&server)
        .post(
            &auth_path(),
            &json!({"socket_id": s.socket_id, "channel_name": channel}),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(body, json!({"auth": sign(&s.socket_id, channel, None)}));
    let auth = body["auth"].as_str().unwrap();
    let hex = auth.strip_prefix(&format!("{APP_KEY}:")).unwrap();
    assert_eq!(hex.len(), 64);
    assert!(hex
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));

    s.ws.send_json(&json!({"action": "subscribe", "channel": channel, "auth": auth}))
        .await;
    expect_ack(&mut s.ws, channel).await;
    publish(
        &server,
        &json!({"channel": channel, "name": "secret", "data": 1}),
    )
    .await;
    assert_eq!(
        s.ws.recv_json().await,
        envelope(channel, "secret", &json!(1))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn presence_channel_snapshot_and_member_events() {
    let server = Server::start(TEST_CONFIG);
    let channel = "presence-team-42";
    let mut alex = connect(&server).await;

    let (status, body) = backend(&server)
        .post(
            &auth_path(),
            &json!({
                "socket_id": alex.socket_id,
                "channel_name": channel,
                "user_id": "42",
                "user_info": {"name": "Alex"}
            }),
        )
        .await;
    assert_eq!(status, 200);
    let alex_data = "{\"user_id\":\"42\",\"user_info\":{\"name\":\"Alex\"}}";
    assert_eq!(
        body,
        json!({"auth": sign(&alex.socket_id, channel, Some(alex_data)), "channel_data": alex_data})
    );
    alex.ws
        .send_json(&json!({
            "action": "subscribe",
            "channel": channel,
            "auth": body["auth"],
            "channel_data": body["channel_data"]
        }))
        .await;
    assert_eq!(
        alex.ws.recv_json().await,
        json!({
            "event": "pubb:subscription_succeeded",
            "channel": "presence-team-42",
            "data": {"presence": {"ids": ["42"], "hash": {"42": {"name": "Alex"}}, "count": 1}}
        })
    );

    let mut sam = connect(&server).await;
    let snapshot = join_presence(&mut sam, channel, "43", "Sam").await;
    assert_eq!(snapshot["count"], 2);
    assert_eq!(
        alex.ws.recv_json().await,
        json!({
            "event": "pubb:member_added",
            "channel": "presence-team-42",
            "data": {"user_id": "43", "user_info": {"name": "Sam"}}
        })
    );

    // Repeating a valid subscription: the same acknowledgement with "{}", no snapshot.
    let data = channel_data("43", "Sam");
    let auth = sign(&sam.socket_id, channel, Some(&data));
    sam.ws
        .send_json(
            &json!({"action": "subscribe", "channel": channel, "auth": auth, "channel_data": data}),
        )
        .await;
    expect_ack(&mut sam.ws, channel).await;
    alex.ws.expect_no_frame_within(QUIET).await;

    sam.ws
        .send_json(&json!({"action": "unsubscribe", "channel": channel}))
        .await;
    assert_eq!(
        alex.ws.recv_json().await,
        json!({"event": "pubb:member_removed", "channel": "presence-team-42", "data": {"user_id": "43"}})
    );
    sam.ws.expect_no_frame_within(QUIET).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_acknowledgement_without_protocol_2() {
    let server = Server::start(TEST_CONFIG);
    let mut s = connect_query(&server, &format!("appKey={APP_KEY}")).await;
    s.ws.send_json(&json!({"action": "subscribe", "channel": "notifications"}))
        .await;
    assert_eq!(
        s.ws.recv_json().await,
        json!({"event": "pubb_internal:subscription_succeeded", "channel": "notifications", "data": "{}"})
    );
    let data = channel_data("42", "Alex");
    let auth = sign(&s.socket_id, "presence-team-42", Some(&data));
    s.ws
        .send_json(&json!({"action": "subscribe", "channel": "presence-team-42", "auth": auth, "channel_data": data}))
        .await;
    let ack = s.ws.recv_json().await;
    assert_eq!(ack["event"], "pubb_internal:subscription_succeeded");
    assert_eq!(
        ack["data"]["presence"]["ids"],
        json!(["42"]),
        "same payload in either mode"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_errors_of_both_endpoints() {
    let server = Server::start(TEST_CONFIG);
    let body = json!({"channel": "notifications", "name": "e"});
    for path in [events_path(), auth_path()] {
        let wrong = server.http("not-the-secret");
        assert_eq!(
            wrong.post(&path, &body).await,
            (
                401,
                json!({"error": "A valid application secret is required"})
            )
        );
        assert_eq!(
            server.http_anonymous().post(&path, &body).await,
            (
                401,
                json!({"error": "A valid application secret is required"})
            )
        );
        let unknown = path.replace("app-1", "no-such-app");
        assert_eq!(
            backend(&server).post(&unknown, &body).await,
            (404, json!({"error": "Application not found"}))
        );
    }

    let auth = |body: Value| {
        let server = &server;
        async move { backend(server).post(&auth_path(), &body).await }
    };
    let required = (
        400,
        json!({"error": "socket_id and channel_name are required"}),
    );
    assert_eq!(auth(json!({})).await, required);
    assert_eq!(auth(json!({"socket_id": "1.2"})).await, required);
    assert_eq!(auth(json!({"channel_name": "private-a"})).await, required);
    assert_eq!(
        auth(json!({"socket_id": "1.2", "channel_name": "notifications"})).await,
        (
            400,
            json!({"error": "Channel does not require authentication"})
        )
    );
    let no_user = (
        400,
        json!({"error": "user_id is required for presence channels"}),
    );
    assert_eq!(
        auth(json!({"socket_id": "1.2", "channel_name": "presence-a"})).await,
        no_user
    );
    assert_eq!(
        auth(json!({"socket_id": "1.2", "channel_name": "presence-a", "user_id": ""})).await,
        no_user
    );
    assert_eq!(
        auth(json!({"socket_id": "1.2", "channel_name": "presence-a", "user_id": 42})).await,
        no_user
    );
}
