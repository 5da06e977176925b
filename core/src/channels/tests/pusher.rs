//! The Pusher wire format over the same channels: one publication reaches
//! both formats with one frame per format, client events leave out their
//! sender, and webhooks are batched per input and signed.

use std::sync::Arc;

use hmac::{Hmac, Mac};
use serde_json::{json, Value};
use sha2::Sha256;

use super::{app, upgrade, Harness};
use crate::config::{Config, WebhookConfig};
use crate::ids::ConnId;
use crate::{ChannelProtocol, Input, Output};

const HOOK: &str = "http://hooks.test/pusher";

fn harness_with_webhooks() -> Harness {
    Harness::with(harness_with_webhooks_config())
}

fn harness_with_webhooks_config() -> Config {
    let mut first = app(1, None);
    first.webhooks = vec![WebhookConfig {
        url: HOOK.into(),
        event_types: vec![
            "channel_occupied".into(),
            "channel_vacated".into(),
            "member_removed".into(),
            "client_event".into(),
        ],
    }];
    let mut config = Config {
        apps: vec![first],
        ..Config::default()
    };
    config.limits.webhook_batch_ms = 0;
    config
}

/// A signed `GET` of Pusher's HTTP API (app 1): `(status, JSON body)`.
pub(super) fn signed_get(h: &mut Harness, path: &str, params: &str) -> (u16, Value) {
    let seconds = h.now.0 / 1000;
    let mut query = format!("auth_key=key-1&auth_timestamp={seconds}&auth_version=1.0");
    if !params.is_empty() {
        query = format!("{query}&{params}");
    }
    let parsed = crate::edge::Query::parse(&query).unwrap();
    let signed = crate::channels::pusher::signing_for_tests(path, &parsed);
    let mut mac = Hmac::<Sha256>::new_from_slice(b"secret-1").unwrap();
    mac.update(signed.as_bytes());
    let signature: String = mac
        .finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let query = format!("{query}&auth_signature={signature}");
    h.next_req += 1;
    let request = crate::http::HttpRequest {
        method: crate::http::Method::Get,
        path,
        query: &query,
        authorization: None,
        idempotency_key: None,
        body: b"",
    };
    let outs = h.handle(Input::Http {
        req: crate::ids::RequestId(h.next_req),
        request,
    });
    for out in outs {
        if let Output::Respond { response, .. } = out {
            let body = serde_json::from_str(&response.body).unwrap_or(Value::Null);
            return (response.status, body);
        }
    }
    panic!("no response");
}

/// Opens a Pusher socket of app `n`; returns its `socket_id`.
pub(super) fn open_pusher(h: &mut Harness, conn: u64, n: u32) -> String {
    let handshake = h
        .engine
        .channel_handshake(&upgrade(Some(&format!("key-{n}")), ChannelProtocol::Pusher))
        .unwrap();
    h.handle(Input::OpenChannels {
        conn: ConnId(conn),
        handshake: &handshake,
    });
    let (_, frame) = h.sent.pop().unwrap();
    assert_eq!(frame["event"], "pusher:connection_established");
    let data: Value = serde_json::from_str(frame["data"].as_str().unwrap()).unwrap();
    data["socket_id"].as_str().unwrap().to_owned()
}

fn pusher_subscribe(h: &mut Harness, conn: u64, channel: &str, auth: Option<String>) {
    h.send(
        conn,
        json!({ "event": "pusher:subscribe", "data": { "channel": channel, "auth": auth } }),
    );
}

fn private_auth(socket_id: &str, channel: &str) -> String {
    super::auth_string("key-1", "secret-1", socket_id, channel, None)
}

fn webhooks(outs: &[Output]) -> Vec<(String, String, Value)> {
    outs.iter()
        .filter_map(|out| match out {
            Output::Webhook {
                url,
                key,
                signature,
                body,
            } => {
                let mut mac = Hmac::<Sha256>::new_from_slice(b"secret-1").unwrap();
                mac.update(body.as_bytes());
                let expected: String = mac
                    .finalize()
                    .into_bytes()
                    .iter()
                    .map(|b| format!("{b:02x}"))
                    .collect();
                assert_eq!(signature, &expected, "signed with the app secret");
                Some((
                    url.clone(),
                    key.clone(),
                    serde_json::from_str(body).unwrap(),
                ))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn one_publication_reaches_both_formats_one_frame_per_format() {
    let mut h = Harness::new();
    h.open(1, 1, ChannelProtocol::V2);
    h.open(2, 1, ChannelProtocol::Legacy);
    open_pusher(&mut h, 3, 1);
    open_pusher(&mut h, 4, 1);
    for conn in [1, 2] {
        h.send(conn, super::subscribe("news"));
    }
    for conn in [3, 4] {
        pusher_subscribe(&mut h, conn, "news", None);
    }
    h.take();
    let outs = h.request(
        "/api/apps/app-1/events",
        "secret-1",
        None,
        json!({ "channel": "news", "name": "e", "data": { "n": 1 } }),
    );
    let frames: Vec<(u64, Arc<str>)> = super::sends(&outs)
        .into_iter()
        .map(|(conn, frame)| (conn.0, frame))
        .collect();
    assert_eq!(frames.len(), 4);
    let frame_of = |c: u64| {
        frames
            .iter()
            .find(|(conn, _)| *conn == c)
            .unwrap()
            .1
            .clone()
    };
    assert!(
        Arc::ptr_eq(&frame_of(1), &frame_of(2)),
        "pubb frame built once"
    );
    assert!(
        Arc::ptr_eq(&frame_of(3), &frame_of(4)),
        "Pusher frame built once"
    );
    assert_eq!(
        &*frame_of(3),
        r#"{"event":"e","channel":"news","data":{"n":1}}"#
    );
    assert_eq!(
        &*frame_of(1),
        r#"{"channel":"news","data":"{\"name\":\"e\",\"data\":{\"n\":1}}"}"#
    );
}

#[test]
fn refusals_after_the_upgrade() {
    let mut h = Harness::new();
    for (version, code) in [(None, 4008), (Some("6"), 4007), (Some("x"), 4006)] {
        let mut request = upgrade(Some("key-1"), ChannelProtocol::Pusher);
        request.version = version.map(str::to_owned);
        let handshake = h.engine.channel_handshake(&request).unwrap();
        h.handle(Input::OpenChannels {
            conn: ConnId(u64::from(code)),
            handshake: &handshake,
        });
        let (_, frame) = h.sent.pop().unwrap();
        assert_eq!(frame["data"]["code"], code);
        assert_eq!(h.closed.pop(), Some((ConnId(u64::from(code)), code)));
    }
    open_pusher(&mut h, 10, 2);
    let handshake = h
        .engine
        .channel_handshake(&upgrade(Some("key-2"), ChannelProtocol::Pusher))
        .unwrap();
    h.handle(Input::OpenChannels {
        conn: ConnId(11),
        handshake: &handshake,
    });
    assert_eq!(
        h.sent.pop().unwrap().1["data"]["code"],
        4004,
        "app-2 is full"
    );
    assert_eq!(h.closed.pop(), Some((ConnId(11), 4004)));
}

#[test]
fn client_events_leave_out_the_sender_and_reach_pubb_and_webhooks() {
    let mut h = harness_with_webhooks();
    let channel = "private-room";
    let a = open_pusher(&mut h, 1, 1);
    let b = open_pusher(&mut h, 2, 1);
    pusher_subscribe(&mut h, 1, channel, Some(private_auth(&a, channel)));
    pusher_subscribe(&mut h, 2, channel, Some(private_auth(&b, channel)));
    let c = h.open(3, 1, ChannelProtocol::V2);
    let auth = private_auth(&c, channel);
    h.send(
        3,
        json!({ "action": "subscribe", "channel": channel, "auth": auth }),
    );
    h.take();
    let text =
        json!({ "event": "client-typing", "channel": channel, "data": { "on": true } }).to_string();
    let outs = h.handle(Input::Frame {
        conn: ConnId(1),
        frame: crate::WsFrame::Text(&text),
    });
    // One output per wire format: frames to different sockets need not
    // interleave by socket.
    let mut sent = h.take();
    sent.sort_by_key(|(conn, _)| *conn);
    assert_eq!(
        sent,
        vec![
            (
                2,
                json!({ "event": "client-typing", "channel": channel, "data": { "on": true } })
            ),
            (
                3,
                json!({ "channel": channel, "data": r#"{"name":"client-typing","data":{"on":true}}"# })
            ),
        ],
        "never echoed to the sender"
    );
    let hooks = webhooks(&outs);
    assert_eq!(hooks.len(), 1);
    let (url, key, body) = &hooks[0];
    assert_eq!((url.as_str(), key.as_str()), (HOOK, "key-1"));
    assert_eq!(body["time_ms"], h.now.0);
    assert_eq!(
        body["events"],
        json!([{
            "name": "client_event",
            "channel": channel,
            "event": "client-typing",
            "data": r#"{"on":true}"#,
            "socket_id": a,
        }])
    );
}

#[test]
fn a_closing_socket_makes_one_batch_in_order() {
    let mut h = harness_with_webhooks();
    let a = open_pusher(&mut h, 1, 1);
    pusher_subscribe(&mut h, 1, "news", None);
    let data = r#"{"user_id":7}"#;
    let auth = super::auth_string("key-1", "secret-1", &a, "presence-team", Some(data));
    let outs = h.handle(Input::Frame {
        conn: ConnId(1),
        frame: crate::WsFrame::Text(
            &json!({ "event": "pusher:subscribe", "data": { "channel": "presence-team", "auth": auth, "channel_data": data } })
                .to_string(),
        ),
    });
    assert_eq!(
        webhooks(&outs)[0].2["events"],
        json!([{ "name": "channel_occupied", "channel": "presence-team" }]),
        "member_added is not among this endpoint's event types"
    );
    let outs = h.handle(Input::Closed { conn: ConnId(1) });
    let hooks = webhooks(&outs);
    assert_eq!(hooks.len(), 1, "one batch for the whole close");
    assert_eq!(
        hooks[0].2["events"],
        json!([
            { "name": "channel_vacated", "channel": "news" },
            { "name": "member_removed", "channel": "presence-team", "user_id": "7" },
            { "name": "channel_vacated", "channel": "presence-team" },
        ])
    );
}

#[test]
fn webhook_batches_collect_over_their_window() {
    let mut config = harness_with_webhooks_config();
    config.limits.webhook_batch_ms = 100;
    config.limits.webhook_batch_events = 3;
    let mut h = Harness::with(config);
    open_pusher(&mut h, 1, 1);
    let start = h.now;
    let outs = h.handle(Input::Frame {
        conn: ConnId(1),
        frame: crate::WsFrame::Text(r#"{"event":"pusher:subscribe","data":{"channel":"a"}}"#),
    });
    assert!(webhooks(&outs).is_empty(), "the batch waits for its window");
    assert_eq!(h.engine.poll_timeout(), Some(start.plus(100)));
    h.now = start.plus(60);
    pusher_subscribe(&mut h, 1, "b", None);
    h.now = start.plus(99);
    assert!(
        webhooks(&h.handle(Input::Tick)).is_empty(),
        "early ticks are harmless"
    );
    h.now = start.plus(100);
    let sent = webhooks(&h.handle(Input::Tick));
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].2["time_ms"], start.plus(100).0);
    assert_eq!(
        sent[0].2["events"],
        json!([
            { "name": "channel_occupied", "channel": "a" },
            { "name": "channel_occupied", "channel": "b" },
        ])
    );
    for channel in ["c", "d"] {
        pusher_subscribe(&mut h, 1, channel, None);
    }
    let outs = h.handle(Input::Frame {
        conn: ConnId(1),
        frame: crate::WsFrame::Text(r#"{"event":"pusher:subscribe","data":{"channel":"e"}}"#),
    });
    let full = webhooks(&outs);
    assert_eq!(full.len(), 1, "a full batch goes at once");
    assert_eq!(full[0].2["events"].as_array().map(Vec::len), Some(3));
    assert_eq!(h.engine.poll_timeout().map(|t| t > h.now), Some(true));
}

/// The `pusher:error` and close codes a Pusher socket got, in order.
fn refusals(h: &mut Harness, conn: u64) -> (Vec<Value>, Vec<u16>) {
    let errors = h
        .take()
        .into_iter()
        .filter(|(c, f)| *c == conn && f["event"] == "pusher:error")
        .map(|(_, f)| f["data"].clone())
        .collect();
    let closes = h
        .closed
        .drain(..)
        .filter(|(c, _)| *c == ConnId(conn))
        .map(|(_, code)| code)
        .collect();
    (errors, closes)
}

#[test]
fn subscriptions_have_their_own_allowance_on_pusher_sockets() {
    let mut h = Harness::new();
    open_pusher(&mut h, 1, 1);
    for i in 0..100 {
        pusher_subscribe(&mut h, 1, &format!("c{i}"), None);
    }
    for i in 0..20 {
        h.send(
            1,
            json!({ "event": "pusher:unsubscribe", "data": { "channel": format!("c{i}") } }),
        );
    }
    let acks = h.take();
    assert_eq!(acks.len(), 100, "every subscription acknowledged");
    assert!(h.closed.is_empty());
    for _ in 0..20 {
        h.send(1, json!({ "event": "pusher:pong", "data": {} }));
        h.send(1, json!({ "event": "pusher:ping", "data": {} }));
    }
    assert_eq!(h.take().len(), 20, "pongs are not counted; 20 pings are");
    h.send(1, json!({ "event": "pusher:ping", "data": {} }));
    let (errors, closes) = refusals(&mut h, 1);
    assert_eq!(
        errors,
        [json!({ "code": 4100, "message": "Over capacity" })]
    );
    assert_eq!(closes, [4100]);

    open_pusher(&mut h, 2, 1);
    for i in 0..121 {
        pusher_subscribe(&mut h, 2, &format!("c{}", i % 50), None);
    }
    let (errors, closes) = refusals(&mut h, 2);
    assert_eq!(errors.len(), 1, "over max_channels + command_rate");
    assert_eq!(closes, [4100]);
}

#[test]
fn a_silent_pusher_socket_is_pinged_then_closed_with_4201() {
    let mut h = Harness::new();
    open_pusher(&mut h, 1, 1);
    open_pusher(&mut h, 2, 1);
    let start = h.now;
    h.now = start.plus(19_000);
    h.send(
        2,
        json!({ "event": "pusher:subscribe", "data": { "channel": "news" } }),
    );
    h.take();
    h.now = start.plus(20_000);
    let outs = h.handle(Input::Tick);
    assert_eq!(
        h.take(),
        [(1, json!({ "event": "pusher:ping", "data": "{}" }))],
        "socket 2 was heard at 19 s"
    );
    assert!(outs.contains(&Output::Ping { conn: ConnId(1) }));
    h.now = start.plus(39_000);
    h.handle(Input::Tick);
    assert_eq!(
        h.take(),
        [(2, json!({ "event": "pusher:ping", "data": "{}" }))]
    );
    h.send(2, json!({ "event": "pusher:pong", "data": "{}" }));
    h.now = start.plus(60_000);
    h.handle(Input::Tick);
    let (errors, closes) = refusals(&mut h, 1);
    assert_eq!(
        errors,
        [json!({ "code": 4201, "message": "Pong reply not received" })]
    );
    assert_eq!(closes, [4201]);
    assert!(h.closed.is_empty(), "socket 2 answered");
}

#[test]
fn shutdown_tells_pusher_sockets_to_reconnect_at_once() {
    let mut h = Harness::new();
    open_pusher(&mut h, 1, 1);
    h.open(2, 1, ChannelProtocol::V2);
    h.handle(Input::Shutdown);
    assert_eq!(h.closed, [(ConnId(1), 4200), (ConnId(2), 1001)]);
    let (errors, closes) = refusals(&mut h, 1);
    assert_eq!(
        errors,
        [json!({ "code": 4200, "message": "Generic reconnect immediately" })]
    );
    assert_eq!(closes, [4200]);
}

#[test]
fn refused_subscriptions_say_what_pusher_says() {
    let mut h = Harness::new();
    let socket_id = open_pusher(&mut h, 1, 1);
    let forged = format!("key-1:{}", "0".repeat(64));
    pusher_subscribe(&mut h, 1, "private-a", Some(forged));
    pusher_subscribe(&mut h, 1, "private-b", Some("other-key:abc".into()));
    pusher_subscribe(&mut h, 1, "private-c", None);
    pusher_subscribe(&mut h, 1, &"x".repeat(165), None);
    let frames: Vec<Value> = h.take().into_iter().map(|(_, f)| f).collect();
    let errors: Vec<&Value> = frames
        .iter()
        .filter(|f| f["event"] == "pusher:error")
        .map(|f| &f["data"])
        .collect();
    assert_eq!(
        errors,
        [
            &json!({ "code": null, "message": format!(
                "Invalid signature: Expected HMAC SHA256 hex digest of {socket_id}:private-a, but got {}",
                "0".repeat(64)
            ) }),
            &json!({ "code": null, "message": "Invalid key in subscription auth data: 'other-key'" }),
            &json!({ "code": null, "message": "Invalid key in subscription auth data: ''" }),
            &json!({ "code": null, "message": format!("Invalid channel name: '{}'", "x".repeat(165)) }),
        ]
    );
    let channel_errors = frames
        .iter()
        .filter(|f| f["event"] == "pusher:subscription_error")
        .count();
    assert_eq!(
        channel_errors, 4,
        "each channel hears its subscription_error"
    );
    assert!(h.closed.is_empty());
    pusher_subscribe(&mut h, 1, &"x".repeat(164), None);
    assert_eq!(
        h.take()[0].1["event"],
        "pusher_internal:subscription_succeeded"
    );
}
