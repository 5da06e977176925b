//! Presence against a reference model: random joins, unsubscribes,
//! disconnects and reconnects of four sockets shared by two users.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use serde_json::json;

use super::{Harness, Input};
use crate::channels::signature::auth_string;
use crate::ids::ConnId;
use crate::io::ChannelProtocol;

const CHANNEL: &str = "presence-model";
const SOCKETS: u64 = 4;

#[derive(Debug, Clone)]
enum Op {
    Join(u64, u8),
    Unsubscribe(u64),
    Disconnect(u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..SOCKETS, 0u8..2).prop_map(|(s, u)| Op::Join(s, u)),
        (0..SOCKETS).prop_map(Op::Unsubscribe),
        (0..SOCKETS).prop_map(Op::Disconnect),
    ]
}

/// The model: which user each subscribed socket joined as.
#[derive(Default)]
struct Model {
    members: BTreeMap<u64, String>,
}

impl Model {
    fn users(&self) -> BTreeSet<&str> {
        self.members.values().map(String::as_str).collect()
    }

    fn has_user(&self, user: &str) -> bool {
        self.members.values().any(|u| u == user)
    }
}

/// Conn ids change on reconnect so an id is never reused while open.
struct Sockets {
    conn: [u64; SOCKETS as usize],
    socket_id: [String; SOCKETS as usize],
    next: u64,
}

fn run(ops: Vec<Op>) {
    let mut h = Harness::new();
    let mut model = Model::default();
    let mut sockets = Sockets {
        conn: [0; 4],
        socket_id: Default::default(),
        next: 0,
    };
    for s in 0..SOCKETS {
        sockets.next += 1;
        sockets.conn[s as usize] = sockets.next;
        sockets.socket_id[s as usize] = h.open(sockets.next, 1, ChannelProtocol::V2);
    }
    for op in ops {
        // Keeps every socket well inside the command rate.
        h.now = h.now.plus(100);
        match op {
            Op::Join(s, u) => {
                let user = format!("u{u}");
                let conn = sockets.conn[s as usize];
                let data = json!({ "user_id": user }).to_string();
                let auth = auth_string(
                    "key-1",
                    "secret-1",
                    &sockets.socket_id[s as usize],
                    CHANNEL,
                    Some(&data),
                );
                h.send(
                    conn,
                    json!({"action":"subscribe","channel":CHANNEL,"auth":auth,"channel_data":data}),
                );
                let frames = h.take();
                let (to, ack) = &frames[0];
                assert_eq!(*to, conn);
                assert_eq!(ack["event"], "pubb:subscription_succeeded");
                if model.members.contains_key(&conn) {
                    assert_eq!(ack["data"], "{}", "a repeat gets no snapshot");
                    assert_eq!(frames.len(), 1);
                    continue;
                }
                let is_new = !model.has_user(&user);
                let others: Vec<u64> = model.members.keys().copied().collect();
                model.members.insert(conn, user.clone());
                let ids: Vec<&str> = model.users().into_iter().collect();
                assert_eq!(ack["data"]["presence"]["ids"], json!(ids));
                assert_eq!(ack["data"]["presence"]["count"], ids.len());
                let expected: Vec<(u64, serde_json::Value)> = if is_new {
                    let added = json!({"event":"pubb:member_added","channel":CHANNEL,"data":{"user_id":user}});
                    others.into_iter().map(|c| (c, added.clone())).collect()
                } else {
                    Vec::new()
                };
                assert_eq!(frames[1..], expected[..]);
            }
            Op::Unsubscribe(s) | Op::Disconnect(s) => {
                let conn = sockets.conn[s as usize];
                let left = model.members.remove(&conn);
                if matches!(op, Op::Unsubscribe(_)) {
                    h.send(conn, json!({"action":"unsubscribe","channel":CHANNEL}));
                } else {
                    h.close(conn);
                    sockets.next += 1;
                    sockets.conn[s as usize] = sockets.next;
                    sockets.socket_id[s as usize] = h.open(sockets.next, 1, ChannelProtocol::V2);
                }
                let frames = h.take();
                let expected: Vec<(u64, serde_json::Value)> = match left {
                    Some(user) if !model.has_user(&user) => {
                        let removed = json!({"event":"pubb:member_removed","channel":CHANNEL,"data":{"user_id":user}});
                        model
                            .members
                            .keys()
                            .map(|&c| (c, removed.clone()))
                            .collect()
                    }
                    _ => Vec::new(),
                };
                assert_eq!(frames, expected);
            }
        }
    }
    for conn in sockets.conn {
        h.handle(Input::Closed { conn: ConnId(conn) });
    }
    assert_eq!(h.engine.metrics().channel_subscriptions, 0);
    assert_eq!(
        h.engine.metrics().channel_connections.get("app-1"),
        Some(&0)
    );
}

proptest! {
    #[test]
    fn presence_matches_the_model(ops in proptest::collection::vec(op(), 1..40)) {
        run(ops);
    }
}
