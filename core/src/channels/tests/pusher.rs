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
    Config {
        apps: vec![first],
        ..Config::default()
    }
}

/// Opens a Pusher socket of app `n`; returns its `socket_id`.
fn open_pusher(h: &mut Harness, conn: u64, n: u32) -> String {
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
fn occupancy_is_reported_once_for_the_cluster() {
    let mut h = Harness::with(Config {
        cluster: true,
        ..harness_with_webhooks_config()
    });
    let occupancy =
        |occupied: bool, reported: bool| crate::cluster::ClusterMessage::ChannelOccupancy {
            app_id: "app-1".into(),
            channel: "news".into(),
            occupied,
            reported,
        };
    let remote = |h: &mut Harness, message| {
        h.handle(Input::Remote {
            node: "n2",
            message,
        })
    };
    open_pusher(&mut h, 1, 1);
    remote(&mut h, occupancy(true, true));
    let text = json!({ "event": "pusher:subscribe", "data": { "channel": "news" } }).to_string();
    let subscribed = h.handle(Input::Frame {
        conn: ConnId(1),
        frame: crate::WsFrame::Text(&text),
    });
    assert!(
        webhooks(&subscribed).is_empty(),
        "n2 holds news: not occupied anew"
    );
    assert!(h.broadcasts.contains(&occupancy(true, false)));
    let left = h.handle(Input::Closed { conn: ConnId(1) });
    assert!(webhooks(&left).is_empty(), "n2 still holds news");
    assert!(h.broadcasts.contains(&occupancy(false, false)));
    // n2 left at the same time without reporting it: this node does.
    let outs = remote(&mut h, occupancy(false, false));
    assert_eq!(
        webhooks(&outs)[0].2["events"],
        json!([{ "name": "channel_vacated", "channel": "news" }])
    );
    // A vacancy n2 reported is not reported again.
    remote(&mut h, occupancy(true, true));
    assert!(webhooks(&remote(&mut h, occupancy(false, true))).is_empty());
}
