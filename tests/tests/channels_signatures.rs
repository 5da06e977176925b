//! Private and presence signatures: right, wrong, for another socket id,
//! for another channel, with reformatted channel_data. A rejected
//! subscription leaves the connection open.

mod channels_common;

use std::time::Duration;

use bubble_tests::{hmac_sha256_hex, Server, APP_KEY, TEST_CONFIG};
use channels_common::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_signatures() {
    let server = Server::start(TEST_CONFIG);
    let mut s = connect(&server).await;
    let other = connect(&server).await;
    let channel = "private-user-42";
    let right = sign(&s.socket_id, channel, None);
    let mut flipped = right.clone().into_bytes();
    let last = flipped.len() - 1;
    flipped[last] = if flipped[last] == b'0' { b'1' } else { b'0' };
    let wrong_hex = String::from_utf8(flipped).unwrap();
    let other_secret = format!(
        "{APP_KEY}:{}",
        hmac_sha256_hex("not-the-secret", &format!("{}:{channel}", s.socket_id))
    );
    let rejected = [
        wrong_hex,
        sign(&other.socket_id, channel, None),
        sign(&s.socket_id, "private-user-43", None),
        other_secret,
        right.replacen(APP_KEY, "other-key", 1),
        right.to_uppercase(),
        right.split_once(':').unwrap().1.to_owned(),
        String::new(),
    ];
    for auth in rejected {
        s.ws.send_json(&json!({"action": "subscribe", "channel": channel, "auth": auth}))
            .await;
        expect_not_authorized(&mut s.ws, channel).await;
    }
    s.ws.send_json(&json!({"action": "subscribe", "channel": channel}))
        .await;
    expect_not_authorized(&mut s.ws, channel).await;

    // The connection is still open, and the right signature works.
    s.ws.send_json(&json!({"action": "subscribe", "channel": channel, "auth": right}))
        .await;
    expect_ack(&mut s.ws, channel).await;
    publish(&server, &json!({"channel": channel, "name": "e"})).await;
    assert_eq!(s.ws.recv_json().await, envelope(channel, "e", &json!(null)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn presence_signatures_cover_the_exact_channel_data() {
    let server = Server::start(TEST_CONFIG);
    let mut s = connect(&server).await;
    let other = connect(&server).await;
    let channel = "presence-team-42";
    let compact = r#"{"user_id":"42","user_info":{"name":"Alex"}}"#;
    let reformatted = r#"{ "user_id": "42", "user_info": { "name": "Alex" } }"#;
    let attempts = [
        // Signed compact, sent reformatted.
        (sign(&s.socket_id, channel, Some(compact)), reformatted),
        (sign(&other.socket_id, channel, Some(compact)), compact),
        (
            sign(&s.socket_id, "presence-team-43", Some(compact)),
            compact,
        ),
        // A private-style signature without channel_data.
        (sign(&s.socket_id, channel, None), compact),
    ];
    for (auth, data) in attempts {
        s.ws.send_json(
            &json!({"action": "subscribe", "channel": channel, "auth": auth, "channel_data": data}),
        )
        .await;
        expect_not_authorized(&mut s.ws, channel).await;
    }
    // Missing channel_data.
    let auth = sign(&s.socket_id, channel, Some(compact));
    s.ws.send_json(&json!({"action": "subscribe", "channel": channel, "auth": auth}))
        .await;
    expect_not_authorized(&mut s.ws, channel).await;
    // Signed channel_data that is not a valid identity.
    for data in [
        r#"{"user_info":{"name":"Alex"}}"#,
        r#"{"user_id":""}"#,
        r#"{"user_id":42}"#,
        "[]",
    ] {
        let auth = sign(&s.socket_id, channel, Some(data));
        s.ws.send_json(
            &json!({"action": "subscribe", "channel": channel, "auth": auth, "channel_data": data}),
        )
        .await;
        expect_not_authorized(&mut s.ws, channel).await;
    }
    // channel_data as an object is an invalid field type: ignored, no response.
    s.ws
        .send_json(&json!({"action": "subscribe", "channel": channel, "auth": auth, "channel_data": {"user_id": "42"}}))
        .await;
    s.ws.expect_no_frame_within(Duration::from_millis(300))
        .await;

    // Signing the exact reformatted string that is sent is valid.
    let auth = sign(&s.socket_id, channel, Some(reformatted));
    s.ws
        .send_json(&json!({"action": "subscribe", "channel": channel, "auth": auth, "channel_data": reformatted}))
        .await;
    let ack = s.ws.recv_json().await;
    assert_eq!(ack["event"], "pubb:subscription_succeeded");
    assert_eq!(
        ack["data"]["presence"]["hash"]["42"],
        json!({"name": "Alex"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn authorization_endpoint_signs_for_that_socket_and_channel_only() {
    let server = Server::start(TEST_CONFIG);
    let mut s = connect(&server).await;
    let other = connect(&server).await;
    let auth_for = |socket_id: String, channel: &'static str| {
        let server = &server;
        async move {
            let (status, body) = backend(server)
                .post(
                    &auth_path(),
                    &json!({"socket_id": socket_id, "channel_name": channel}),
                )
                .await;
            assert_eq!(status, 200, "{body}");
            body["auth"].as_str().unwrap().to_owned()
        }
    };
    let for_other_socket = auth_for(other.socket_id.clone(), "private-a").await;
    let for_other_channel = auth_for(s.socket_id.clone(), "private-b").await;
    for auth in [for_other_socket, for_other_channel] {
        s.ws.send_json(&json!({"action": "subscribe", "channel": "private-a", "auth": auth}))
            .await;
        expect_not_authorized(&mut s.ws, "private-a").await;
    }
    let right = auth_for(s.socket_id.clone(), "private-a").await;
    s.ws.send_json(&json!({"action": "subscribe", "channel": "private-a", "auth": right}))
        .await;
    expect_ack(&mut s.ws, "private-a").await;

    // Presence without user_info: channel_data carries only user_id.
    let (status, body) = backend(&server)
        .post(
            &auth_path(),
            &json!({"socket_id": s.socket_id, "channel_name": "presence-x", "user_id": "7"}),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(body["channel_data"], r#"{"user_id":"7"}"#);
    s.ws.send_json(&json!({
        "action": "subscribe",
        "channel": "presence-x",
        "auth": body["auth"],
        "channel_data": body["channel_data"]
    }))
    .await;
    let ack = s.ws.recv_json().await;
    assert_eq!(
        ack["data"]["presence"],
        json!({"ids": ["7"], "hash": {"7": null}, "count": 1})
    );
}
