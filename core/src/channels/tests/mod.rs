//! The pubb protocol driven through the public engine API.

use serde_json::{json, Value};

use crate::config::{AppConfig, Config};
use crate::edge::ChannelsUpgrade;
use crate::http::{HttpRequest, Method};
use crate::ids::{ConnId, Millis, RequestId};
use crate::{ChannelProtocol, Engine, Input, Output, SharedFrame, WsFrame};

use super::signature::auth_string;

mod arbitrary_frames;
mod cluster;
mod cluster_webhooks;
mod presence_model;
mod pusher;

struct Harness {
    engine: Engine,
    now: Millis,
    sent: Vec<(ConnId, Value)>,
    closed: Vec<(ConnId, u16)>,
    next_req: u64,
    /// What a clustered engine told the other nodes.
    broadcasts: Vec<crate::cluster::ClusterMessage>,
    /// The events of every webhook batch sent, in order.
    hooks: Vec<Value>,
}

fn app(n: u32, max_connections: Option<usize>) -> AppConfig {
    AppConfig {
        id: format!("app-{n}"),
        key: format!("key-{n}"),
        secret: format!("secret-{n}"),
        max_connections,
        client_events: true,
        webhooks: Vec::new(),
    }
}

/// Every frame `outs` send, one per recipient, in order.
fn sends(outs: &[Output]) -> Vec<(ConnId, SharedFrame)> {
    let mut sent = Vec::new();
    for out in outs {
        match out {
            Output::Send { conn, frame } => sent.push((*conn, frame.clone())),
            Output::SendAll { conns, frame } => {
                sent.extend(conns.iter().map(|&conn| (conn, frame.clone())));
            }
            _ => {}
        }
    }
    sent
}

impl Harness {
    fn new() -> Harness {
        Harness::with(Config {
            apps: vec![app(1, None), app(2, Some(1))],
            ..Config::default()
        })
    }

    fn with(config: Config) -> Harness {
        let engine = Engine::new(config, 7);
        Harness {
            engine,
            now: Millis(1_000_000),
            sent: Vec::new(),
            closed: Vec::new(),
            next_req: 0,
            broadcasts: Vec::new(),
            hooks: Vec::new(),
        }
    }

    fn handle(&mut self, input: Input<'_>) -> Vec<Output> {
        self.engine.handle(self.now, input).unwrap();
        let mut outs = Vec::new();
        while let Some(out) = self.engine.poll_output() {
            match &out {
                Output::Send { .. } | Output::SendAll { .. } => {
                    for (conn, frame) in sends(std::slice::from_ref(&out)) {
                        self.sent
                            .push((conn, serde_json::from_str(&frame).unwrap()));
                    }
                }
                Output::Close { conn, reason } => {
                    self.closed.push((*conn, reason.code().unwrap_or(1006)));
                }
                Output::Broadcast { message } => self.broadcasts.push(message.clone()),
                Output::Webhook { body, .. } => {
                    let body: Value = serde_json::from_str(body).unwrap();
                    if let Value::Array(events) = &body["events"] {
                        self.hooks.extend(events.iter().cloned());
                    }
                }
                _ => {}
            }
            outs.push(out);
        }
        outs
    }

    /// Opens a socket and returns its `socket_id`.
    fn open(&mut self, conn: u64, app: u32, protocol: ChannelProtocol) -> String {
        let handshake = self
            .engine
            .channel_handshake(&upgrade(Some(&format!("key-{app}")), protocol))
            .unwrap();
        assert_eq!(handshake.protocol(), protocol);
        self.handle(Input::OpenChannels {
            conn: ConnId(conn),
            handshake: &handshake,
        });
        let (to, frame) = self.sent.pop().unwrap();
        assert_eq!(to, ConnId(conn));
        assert_eq!(frame["event"], "pubb:connection_established");
        let data: Value = serde_json::from_str(frame["data"].as_str().unwrap()).unwrap();
        assert_eq!(data["activity_timeout"], 60);
        data["socket_id"].as_str().unwrap().to_owned()
    }

    fn send(&mut self, conn: u64, message: Value) {
        let text = message.to_string();
        self.handle(Input::Frame {
            conn: ConnId(conn),
            frame: WsFrame::Text(&text),
        });
    }

    fn close(&mut self, conn: u64) {
        self.handle(Input::Closed { conn: ConnId(conn) });
    }

    fn take(&mut self) -> Vec<(u64, Value)> {
        self.sent.drain(..).map(|(c, v)| (c.0, v)).collect()
    }

    fn post(&mut self, path: &str, secret: &str, key: Option<&str>, body: Value) -> (u16, Value) {
        let outs = self.request(path, secret, key, body);
        for out in outs {
            if let Output::Respond { response, .. } = out {
                return (
                    response.status,
                    serde_json::from_str(&response.body).unwrap(),
                );
            }
        }
        panic!("no response");
    }

    /// Sends a `POST` and returns every output it caused.
    fn request(&mut self, path: &str, secret: &str, key: Option<&str>, body: Value) -> Vec<Output> {
        self.next_req += 1;
        let authorization = format!("Bearer {secret}");
        let body = body.to_string();
        let request = HttpRequest {
            method: Method::Post,
            path,
            query: "",
            authorization: Some(&authorization),
            idempotency_key: key,
            body: body.as_bytes(),
        };
        self.handle(Input::Http {
            req: RequestId(self.next_req),
            request,
        })
    }

    fn publish(&mut self, body: Value) -> (u16, Value) {
        self.post("/api/apps/app-1/events", "secret-1", None, body)
    }
}

fn upgrade(app_key: Option<&str>, protocol: ChannelProtocol) -> ChannelsUpgrade {
    ChannelsUpgrade {
        app_key: app_key.map(str::to_owned),
        protocol,
        version: (protocol == ChannelProtocol::Pusher).then(|| "7".to_owned()),
    }
}

fn handshake(h: &Harness, app_key: Option<&str>) -> Result<(), crate::http::HttpResponse> {
    h.engine
        .channel_handshake(&upgrade(app_key, ChannelProtocol::V2))
        .map(drop)
}

fn subscribe(channel: &str) -> Value {
    json!({ "action": "subscribe", "channel": channel })
}

#[test]
fn handshake_errors() {
    let h = Harness::new();
    let missing = handshake(&h, None).unwrap_err();
    assert_eq!(missing.status, 400);
    assert_eq!(handshake(&h, Some("")).unwrap_err().status, 400);
    let unknown = handshake(&h, Some("nope")).unwrap_err();
    assert_eq!(
        (unknown.status, unknown.body.as_str()),
        (404, "Application not found")
    );
    let mut h = Harness::new();
    h.open(1, 2, ChannelProtocol::V2);
    let full = handshake(&h, Some("key-2")).unwrap_err();
    assert_eq!(full.status, 503);
    assert!(full.retry_after.is_some());
    h.close(1);
    assert!(handshake(&h, Some("key-2")).is_ok());
}

#[test]
fn public_subscribe_publish_and_acks() {
    let mut h = Harness::new();
    h.open(1, 1, ChannelProtocol::V2);
    h.open(2, 1, ChannelProtocol::Legacy);
    h.send(1, subscribe("notifications"));
    h.send(2, subscribe("notifications"));
    h.send(1, subscribe("notifications"));
    assert_eq!(
        h.take(),
        vec![
            (
                1,
                json!({"event":"pubb:subscription_succeeded","channel":"notifications","data":"{}"})
            ),
            (
                2,
                json!({"event":"pubb_internal:subscription_succeeded","channel":"notifications","data":"{}"})
            ),
            (
                1,
                json!({"event":"pubb:subscription_succeeded","channel":"notifications","data":"{}"})
            ),
        ]
    );
    let (status, body) = h.publish(
        json!({"channel":"notifications","name":"order.created","data":{"orderId":"1042"}}),
    );
    assert_eq!(status, 202);
    assert_eq!(body["success"], true);
    assert_eq!(body["accepted"], true);
    assert_eq!(body["duplicate"], false);
    assert_eq!(body["channels"], json!(["notifications"]));
    let envelope = json!({"channel":"notifications","data":"{\"name\":\"order.created\",\"data\":{\"orderId\":\"1042\"}}"});
    assert_eq!(
        h.take(),
        vec![(1, envelope.clone()), (2, envelope)],
        "one delivery each despite the repeat"
    );
    h.send(1, json!({"action":"unsubscribe","channel":"notifications"}));
    h.publish(json!({"channel":"notifications","name":"e"}));
    assert_eq!(
        h.take(),
        vec![(
            2,
            json!({"channel":"notifications","data":"{\"name\":\"e\",\"data\":null}"})
        )]
    );
    assert_eq!(h.engine.metrics().deliveries, 3);
    assert_eq!(h.engine.metrics().publishes, 2);
    assert_eq!(h.engine.metrics().channel_subscriptions, 1);
}

#[test]
fn private_channels_need_the_right_signature() {
    let mut h = Harness::new();
    let socket_id = h.open(1, 1, ChannelProtocol::V2);
    let other = h.open(2, 1, ChannelProtocol::V2);
    let channel = "private-user-42";
    let error = json!({"event":"subscription_error","channel":channel,"data":"Subscription not authorized"});
    for auth in [
        None,
        Some("key-1:00".to_owned()),
        Some(auth_string("key-1", "secret-1", &other, channel, None)),
        Some(auth_string(
            "key-1",
            "secret-1",
            &socket_id,
            "private-user-43",
            None,
        )),
        Some(auth_string("key-1", "secret-2", &socket_id, channel, None)),
    ] {
        h.send(
            1,
            json!({"action":"subscribe","channel":channel,"auth":auth}),
        );
        assert_eq!(h.take(), vec![(1, error.clone())]);
    }
    let good = auth_string("key-1", "secret-1", &socket_id, channel, None);
    h.send(
        1,
        json!({"action":"subscribe","channel":channel,"auth":good}),
    );
    assert_eq!(h.take()[0].1["event"], "pubb:subscription_succeeded");
    let (status, body) = h.post(
        "/api/apps/app-1/auth",
        "secret-1",
        None,
        json!({"socket_id":socket_id,"channel_name":channel}),
    );
    assert_eq!((status, body), (200, json!({"auth": good})));
}

#[test]
fn presence_members_across_sockets() {
    let mut h = Harness::new();
    let channel = "presence-team-42";
    let join = |h: &mut Harness, conn: u64, user: &str, name: &str| {
        let socket_id = h.open(conn, 1, ChannelProtocol::V2);
        let (status, body) = h.post(
            "/api/apps/app-1/auth",
            "secret-1",
            None,
            json!({"socket_id":socket_id,"channel_name":channel,"user_id":user,"user_info":{"name":name}}),
        );
        assert_eq!(status, 200);
        h.send(conn, json!({"action":"subscribe","channel":channel,"auth":body["auth"],"channel_data":body["channel_data"]}));
    };
    join(&mut h, 1, "42", "Alex");
    assert_eq!(
        h.take(),
        vec![(
            1,
            json!({"event":"pubb:subscription_succeeded","channel":channel,
            "data":{"presence":{"ids":["42"],"hash":{"42":{"name":"Alex"}},"count":1}}})
        )]
    );
    join(&mut h, 2, "43", "Sam");
    let added = json!({"event":"pubb:member_added","channel":channel,"data":{"user_id":"43","user_info":{"name":"Sam"}}});
    let frames = h.take();
    assert_eq!(frames[0].1["data"]["presence"]["count"], 2);
    assert_eq!(frames[1..], [(1, added)]);
    join(&mut h, 3, "43", "Sam again");
    let frames = h.take();
    assert_eq!(frames.len(), 1, "a second socket of 43 is no new member");
    assert_eq!(
        frames[0].1["data"]["presence"]["hash"]["43"],
        json!({"name":"Sam"})
    );
    h.send(3, subscribe(channel));
    assert_eq!(
        h.take()[0].1["event"],
        "subscription_error",
        "a repeat is checked like a new one"
    );
    h.close(2);
    assert!(h.take().is_empty(), "43 still has socket 3");
    h.send(3, json!({"action":"unsubscribe","channel":channel}));
    let removed = json!({"event":"pubb:member_removed","channel":channel,"data":{"user_id":"43"}});
    assert_eq!(h.take(), vec![(1, removed)]);
}

#[test]
fn limits_and_rate() {
    let mut config = Config {
        apps: vec![app(1, None)],
        ..Config::default()
    };
    config.limits.max_channels = 2;
    let mut h = Harness::with(config);
    h.open(1, 1, ChannelProtocol::V2);
    h.send(1, subscribe("a"));
    h.send(1, subscribe("b"));
    h.send(1, subscribe("c"));
    h.send(1, subscribe("bad name"));
    let frames = h.take();
    assert_eq!(
        frames[2].1,
        json!({"event":"subscription_error","channel":"c","data":"Channel limit exceeded (2)"})
    );
    assert_eq!(
        frames[3].1,
        json!({"event":"subscription_error","channel":"bad name","data":"Invalid channel name"})
    );
    let big = "x".repeat(16 * 1024 + 1);
    h.open(2, 1, ChannelProtocol::V2);
    h.handle(Input::Frame {
        conn: ConnId(2),
        frame: WsFrame::Text(&big),
    });
    assert_eq!(h.closed, vec![(ConnId(2), 1009)]);
    // Socket 1 used 4 commands; 16 ignored messages, one binary, fill the window.
    for _ in 0..15 {
        h.handle(Input::Frame {
            conn: ConnId(1),
            frame: WsFrame::Text("{not json"),
        });
    }
    h.handle(Input::Frame {
        conn: ConnId(1),
        frame: WsFrame::Binary(b"\x00"),
    });
    assert!(h.take().is_empty());
    h.send(1, json!({"action":"ping"}));
    assert_eq!(
        h.take(),
        vec![(
            1,
            json!({"event":"error","data":"Command rate exceeded (20/s)"})
        )]
    );
    assert_eq!(h.closed[1], (ConnId(1), 1008));
}

#[test]
fn apps_are_isolated_and_exclusion_works() {
    let mut h = Harness::new();
    let first = h.open(1, 1, ChannelProtocol::V2);
    h.open(2, 1, ChannelProtocol::V2);
    h.open(3, 2, ChannelProtocol::V2);
    for conn in [1, 2, 3] {
        h.send(conn, subscribe("news"));
    }
    h.take();
    h.publish(json!({"channel":"news","name":"e","socket_id":first}));
    let frames = h.take();
    assert_eq!(frames.iter().map(|(c, _)| *c).collect::<Vec<_>>(), vec![2]);
    let (status, body) = h.post(
        "/api/apps/app-1/events",
        "secret-2",
        None,
        json!({"channel":"news","name":"e"}),
    );
    assert_eq!(
        (status, body),
        (
            401,
            json!({"error":"A valid application secret is required"})
        )
    );
    let (status, body) = h.post(
        "/api/apps/app-9/events",
        "secret-1",
        None,
        json!({"channel":"news","name":"e"}),
    );
    assert_eq!(
        (status, body),
        (404, json!({"error":"Application not found"}))
    );
}

#[test]
fn idempotency_keys_repeat_then_expire() {
    let mut h = Harness::new();
    h.open(1, 1, ChannelProtocol::V2);
    h.send(1, subscribe("news"));
    h.take();
    let body = json!({"channel":"news","name":"e"});
    let (_, first) = h.post(
        "/api/apps/app-1/events",
        "secret-1",
        Some("order-1042-created"),
        body.clone(),
    );
    assert_eq!(h.take().len(), 1);
    let (status, repeat) = h.post(
        "/api/apps/app-1/events",
        "secret-1",
        Some("order-1042-created"),
        body.clone(),
    );
    assert_eq!(status, 202);
    assert_eq!(repeat["duplicate"], true);
    assert_eq!(repeat["publicationId"], first["publicationId"]);
    assert!(h.take().is_empty(), "a duplicate delivers nothing");
    let (status, err) = h.post(
        "/api/apps/app-1/events",
        "secret-1",
        Some("has space"),
        body.clone(),
    );
    assert_eq!(
        (status, err["code"].as_str()),
        (400, Some("invalid_idempotency_key"))
    );

    h.close(1);
    let deadline = h.engine.poll_timeout().unwrap();
    assert_eq!(deadline, h.now.plus(24 * 60 * 60 * 1000));
    h.now = deadline;
    h.handle(Input::Tick);
    assert_eq!(h.engine.poll_timeout(), None, "the expired key is dropped");
    let (_, fresh) = h.post(
        "/api/apps/app-1/events",
        "secret-1",
        Some("order-1042-created"),
        body,
    );
    assert_eq!(fresh["duplicate"], false);
    assert_ne!(fresh["publicationId"], first["publicationId"]);
}

/// `limits.http_rate` counts each app's channels API requests apart, only
/// once the secret was checked, and answers the one past it with `429
/// rate_limited` and `Retry-After`.
#[test]
fn the_channels_api_is_rate_limited_per_app() {
    let mut config = Config {
        apps: vec![app(1, None), app(2, None)],
        ..Config::default()
    };
    config.limits.http_rate = 2;
    config.limits.http_rate_window_ms = 10_000;
    let mut h = Harness::with(config);
    let event = || json!({"channel": "news", "name": "n"});
    // A wrong secret is refused before it is counted.
    let (status, _) = h.post("/api/apps/app-1/events", "secret-2", None, event());
    assert_eq!(status, 401);
    for _ in 0..2 {
        assert_eq!(h.publish(event()).0, 202);
    }
    h.now = h.now.plus(1_500);
    let outs = h.request("/api/apps/app-1/events", "secret-1", None, event());
    let Some(Output::Respond { response, .. }) = outs.into_iter().next() else {
        panic!("no response");
    };
    assert_eq!(response.status, 429);
    // The first request leaves the window 8.5 s later: 9 s, rounded up.
    assert_eq!(response.retry_after, Some(9));
    let body: Value = serde_json::from_str(&response.body).unwrap();
    assert_eq!(body["code"], "rate_limit_exceeded");
    assert_eq!(
        body["error"],
        "Workspace throughput is busy. Retry after the indicated delay."
    );
    // Another app has its own budget.
    let (status, _) = h.post("/api/apps/app-2/events", "secret-2", None, event());
    assert_eq!(status, 202);
    // Once the window moved on, app-1 is served again.
    h.now = h.now.plus(8_500);
    assert_eq!(h.publish(event()).0, 202);
}
