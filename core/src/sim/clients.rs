//! The simulated clients of both protocols: what each one asked for, what
//! it therefore expects, and the checks on every frame it receives.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{json, Value};

use crate::edge::ChannelsUpgrade;
use crate::http::Method;
use crate::ids::ConnId;
use crate::io::{ChannelProtocol, Input, WsFrame};

use super::check::head;
use super::world::{
    thread_id, thread_index, Call, Owner, World, APP, APP_KEY, APP_SECRET, PRINCIPALS,
};

/// The public channels clients subscribe to.
pub(crate) const CHANNELS: [&str; 2] = ["news", "sports"];
/// The presence channel.
pub(crate) const PRESENCE: &str = "presence-room";

/// Where one `/v1/ws` client stands with one thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sub {
    /// `thread.subscribe` sent, no `thread.subscription_opened` yet;
    /// `stale`: an unsubscribed episode's frames may still arrive first.
    /// `lo`: the highest head the node had been told of when it was sent;
    /// `durable`: the store's head then.
    Subscribing {
        from: u64,
        stale: bool,
        lo: u64,
        durable: u64,
    },
    /// Registered; `next` is the seq the next event must carry.
    Open { next: u64 },
    /// Opened at a `throughSeq` below a `fromSeq` that named durable
    /// events (`from` with `durable` durable when sent): only a
    /// subscription decided on writes that did not stand, and ended before
    /// they were refused, is opened so, and it must end before it sends
    /// anything.
    Doomed {
        from: u64,
        durable: u64,
        through: u64,
    },
    /// Unsubscribed; frames in flight may still arrive and are ignored.
    Leftover,
}

/// A `/v1/ws` client.
pub(crate) struct WsClient {
    pub(crate) node: usize,
    pub(crate) conn: ConnId,
    pub(crate) who: usize,
    pub(crate) stalled: bool,
    pub(crate) subs: BTreeMap<u8, Sub>,
}

/// A `thread.subscription_opened` to check once its node's outputs are out:
/// `throughSeq` is no lower than a head the node had seen (`lo`) and no
/// higher than any seq assigned so far.
pub(crate) struct Opened {
    pub(crate) thread: u8,
    pub(crate) through: u64,
    pub(crate) lo: u64,
    pub(crate) node: usize,
}

/// A `/socket` client's presence subscription.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Presence {
    Out,
    Joining,
    /// Subscribed; the members as the client has been told them.
    In(BTreeSet<String>),
}

/// A `/socket` client.
pub(crate) struct ChannelClient {
    pub(crate) node: usize,
    pub(crate) conn: ConnId,
    pub(crate) socket_id: Option<String>,
    pub(crate) user: String,
    pub(crate) public: BTreeSet<String>,
    pub(crate) presence: Presence,
    /// Publications received, by their data (unique per request).
    pub(crate) delivered: BTreeSet<String>,
}

fn token(who: usize) -> String {
    format!("token-{}", PRINCIPALS[who])
}

impl World {
    // --- `/v1/ws` clients ----------------------------------------------------

    pub(crate) fn ws_open(&mut self, slot: u8, node: usize, who: usize) {
        if self.ws.contains_key(&slot) {
            return;
        }
        let conn = self.conn_id();
        self.ws.insert(
            slot,
            WsClient {
                node,
                conn,
                who,
                stalled: false,
                subs: BTreeMap::new(),
            },
        );
        self.owners.insert(conn, Owner::Ws(slot));
        let token = token(who);
        self.feed(
            node,
            Input::OpenThreads {
                conn,
                token: Some(&token),
            },
        );
    }

    pub(crate) fn ws_close(&mut self, slot: u8) {
        let Some((node, conn)) = self.ws.get(&slot).map(|c| (c.node, c.conn)) else {
            return;
        };
        self.forget_conn(conn);
        self.feed(node, Input::Closed { conn });
    }

    fn ws_send(&mut self, slot: u8, frame: &Value) {
        let Some((node, conn)) = self.ws.get(&slot).map(|c| (c.node, c.conn)) else {
            return;
        };
        let text = frame.to_string();
        self.feed(
            node,
            Input::Frame {
                conn,
                frame: WsFrame::Text(&text),
            },
        );
    }

    pub(crate) fn ws_subscribe(&mut self, slot: u8, thread: u8, from: u8) {
        let Some(client) = self.ws.get_mut(&slot) else {
            return;
        };
        let stale = match client.subs.get(&thread) {
            None => false,
            Some(Sub::Leftover) => true,
            Some(_) => return,
        };
        let mut frame = json!({ "type": "thread.subscribe", "threadId": thread_id(thread) });
        if from > 0 {
            frame["fromSeq"] = json!(from);
        }
        let from = u64::from(from.max(1));
        let node = client.node;
        let lo = self.nodes[node]
            .known_head
            .get(&thread_id(thread))
            .copied()
            .unwrap_or(0);
        let durable = head(&self.store, &thread_id(thread));
        if let Some(client) = self.ws.get_mut(&slot) {
            let sub = Sub::Subscribing {
                from,
                stale,
                lo,
                durable,
            };
            client.subs.insert(thread, sub);
        }
        self.ws_send(slot, &frame);
    }

    pub(crate) fn ws_unsubscribe(&mut self, slot: u8, thread: u8) {
        let Some(client) = self.ws.get_mut(&slot) else {
            return;
        };
        if !matches!(client.subs.get(&thread), Some(Sub::Open { .. })) {
            return;
        }
        client.subs.insert(thread, Sub::Leftover);
        let frame = json!({ "type": "thread.unsubscribe", "threadId": thread_id(thread) });
        self.ws_send(slot, &frame);
    }

    pub(crate) fn ws_append(&mut self, slot: u8, thread: u8) {
        self.counter += 1;
        let frame = json!({
            "type": "thread.append",
            "threadId": thread_id(thread),
            "event": { "type": "run_started", "runId": format!("ws-{}", self.counter) },
        });
        self.ws_send(slot, &frame);
    }

    pub(crate) fn ws_stall(&mut self, slot: u8) {
        if let Some(client) = self.ws.get_mut(&slot) {
            client.stalled = !client.stalled;
        }
    }

    /// Checks one frame a `/v1/ws` client received from node `n`.
    pub(crate) fn ws_frame(&mut self, n: usize, slot: u8, frame: &Value) {
        let Some(client) = self.ws.get(&slot) else {
            return;
        };
        let who = client.who;
        let kind = frame["type"].as_str().unwrap_or("");
        if kind == "error" {
            if frame["code"] == "internal" {
                self.fail(format!("slot {slot} got an internal error: {frame}"));
            }
            return;
        }
        let Some(thread) = frame["threadId"].as_str().and_then(thread_index) else {
            self.fail(format!(
                "slot {slot} got a frame for no thread of the run: {frame}"
            ));
            return;
        };
        let state = client.subs.get(&thread).copied();
        match kind {
            "thread.subscription_opened" => {
                let through = frame["throughSeq"].as_u64().unwrap_or(u64::MAX);
                let Some(Sub::Subscribing {
                    from, lo, durable, ..
                }) = state
                else {
                    self.fail(format!("slot {slot} ({state:?}) got an unasked {frame}"));
                    return;
                };
                // A fromSeq that named durable events was no sentinel.
                let sub = if from <= durable + 1 && through.saturating_add(1) < from {
                    Sub::Doomed {
                        from,
                        durable,
                        through,
                    }
                } else {
                    Sub::Open {
                        next: from.min(through.saturating_add(1)),
                    }
                };
                self.set_sub(slot, thread, Some(sub));
                self.deferred.push(Opened {
                    thread,
                    through,
                    lo,
                    node: n,
                });
            }
            "thread.event" => {
                let event = &frame["event"];
                self.check_event(thread, event, Some((n, who)), "a thread.event frame");
                let seq = event["seq"].as_u64().unwrap_or(0);
                match state {
                    Some(Sub::Open { next }) if seq == next => {
                        self.set_sub(slot, thread, Some(Sub::Open { next: next + 1 }));
                    }
                    Some(Sub::Open { next, .. }) => self.fail(format!(
                        "slot {slot} expected t{thread}#{next} and got #{seq} (a gap, a repeat or disorder)"
                    )),
                    Some(Sub::Leftover | Sub::Subscribing { stale: true, .. }) => {}
                    Some(Sub::Doomed {
                        from,
                        durable,
                        through,
                    }) => self.fail(format!(
                        "slot {slot} subscribed to t{thread} from #{from} with #{durable} durable, was opened at throughSeq {through} and got #{seq}"
                    )),
                    _ => self.fail(format!(
                        "slot {slot} ({state:?}) got t{thread}#{seq} without a subscription"
                    )),
                }
            }
            "thread.subscription_closed" => match state {
                Some(Sub::Subscribing {
                    stale: true,
                    from,
                    lo,
                    durable,
                }) => {
                    let sub = Sub::Subscribing {
                        from,
                        stale: false,
                        lo,
                        durable,
                    };
                    self.set_sub(slot, thread, Some(sub));
                }
                Some(_) => self.set_sub(slot, thread, None),
                None => self.fail(format!("slot {slot} got {frame} without a subscription")),
            },
            _ => self.fail(format!("slot {slot} got an unknown frame {frame}")),
        }
    }

    fn set_sub(&mut self, slot: u8, thread: u8, sub: Option<Sub>) {
        if let Some(client) = self.ws.get_mut(&slot) {
            match sub {
                Some(sub) => client.subs.insert(thread, sub),
                None => client.subs.remove(&thread),
            };
        }
    }

    // --- `/socket` clients -----------------------------------------------------

    pub(crate) fn channel_open(&mut self, slot: u8, node: usize, legacy: bool) {
        if self.channels.contains_key(&slot) {
            return;
        }
        let protocol = if legacy {
            ChannelProtocol::Legacy
        } else {
            ChannelProtocol::V2
        };
        let upgrade = ChannelsUpgrade {
            app_key: Some(APP_KEY.into()),
            protocol,
            version: None,
        };
        let handshake = match self.nodes[node].engine.channel_handshake(&upgrade) {
            Ok(handshake) => handshake,
            Err(refused) => {
                self.fail(format!(
                    "node {node} refused a valid handshake: {}",
                    refused.body
                ));
                return;
            }
        };
        let conn = self.conn_id();
        self.channels.insert(
            slot,
            ChannelClient {
                node,
                conn,
                socket_id: None,
                user: format!("u{}", slot % 3),
                public: BTreeSet::new(),
                presence: Presence::Out,
                delivered: BTreeSet::new(),
            },
        );
        self.owners.insert(conn, Owner::Channel(slot));
        self.feed(
            node,
            Input::OpenChannels {
                conn,
                handshake: &handshake,
            },
        );
    }

    pub(crate) fn channel_close(&mut self, slot: u8) {
        let Some((node, conn)) = self.channels.get(&slot).map(|c| (c.node, c.conn)) else {
            return;
        };
        self.forget_conn(conn);
        self.feed(node, Input::Closed { conn });
    }

    fn channel_send(&mut self, slot: u8, command: &Value) {
        let Some((node, conn)) = self.channels.get(&slot).map(|c| (c.node, c.conn)) else {
            return;
        };
        let text = command.to_string();
        self.feed(
            node,
            Input::Frame {
                conn,
                frame: WsFrame::Text(&text),
            },
        );
    }

    pub(crate) fn channel_subscribe(&mut self, slot: u8, channel: u8) {
        let name = CHANNELS[usize::from(channel) % CHANNELS.len()];
        self.channel_send(slot, &json!({ "action": "subscribe", "channel": name }));
    }

    pub(crate) fn presence_join(&mut self, slot: u8) {
        let Some(client) = self.channels.get(&slot) else {
            return;
        };
        let (Some(socket_id), Presence::Out) = (client.socket_id.clone(), &client.presence) else {
            return;
        };
        let (node, user) = (client.node, client.user.clone());
        let body = json!({
            "socket_id": socket_id,
            "channel_name": PRESENCE,
            "user_id": user,
            "user_info": { "name": user },
        });
        self.auth_answer = None;
        self.http(
            node,
            Method::Post,
            &format!("Bearer {APP_SECRET}"),
            &format!("/api/apps/{APP}/auth"),
            &body.to_string(),
            None,
            Call::Auth,
        );
        let Some(auth) = self.auth_answer.take() else {
            self.fail(format!("node {node} did not sign a presence subscription"));
            return;
        };
        if let Some(client) = self.channels.get_mut(&slot) {
            client.presence = Presence::Joining;
        }
        let command = json!({
            "action": "subscribe",
            "channel": PRESENCE,
            "auth": auth["auth"],
            "channel_data": auth["channel_data"],
        });
        self.channel_send(slot, &command);
    }

    pub(crate) fn presence_leave(&mut self, slot: u8) {
        let Some(client) = self.channels.get_mut(&slot) else {
            return;
        };
        if client.presence == Presence::Out {
            return;
        }
        client.presence = Presence::Out;
        self.channel_send(
            slot,
            &json!({ "action": "unsubscribe", "channel": PRESENCE }),
        );
    }

    pub(crate) fn publish(&mut self, node: usize, channel: u8, key: u8) {
        let name = CHANNELS[usize::from(channel) % CHANNELS.len()];
        self.counter += 1;
        let data = format!("p{}", self.counter);
        let header = (key > 0).then(|| format!("pub-key-{key}"));
        let body = json!({ "channel": name, "name": "n", "data": data });
        self.http(
            node,
            Method::Post,
            &format!("Bearer {APP_SECRET}"),
            &format!("/api/apps/{APP}/events"),
            &body.to_string(),
            header.as_deref(),
            Call::Publish {
                key: (key > 0).then_some(key),
                data,
            },
        );
    }

    /// Checks one message a `/socket` client received.
    pub(crate) fn channel_frame(&mut self, slot: u8, frame: &Value) {
        let Some(client) = self.channels.get_mut(&slot) else {
            return;
        };
        let event = frame["event"].as_str();
        let channel = frame["channel"].as_str().unwrap_or("");
        let problem = match event {
            Some("pubb:connection_established") => {
                let data: Value = frame["data"]
                    .as_str()
                    .and_then(|d| serde_json::from_str(d).ok())
                    .unwrap_or_default();
                client.socket_id = data["socket_id"].as_str().map(str::to_owned);
                None
            }
            Some("pubb:subscription_succeeded" | "pubb_internal:subscription_succeeded")
                if channel == PRESENCE =>
            {
                let ids: BTreeSet<String> = frame["data"]["presence"]["ids"]
                    .as_array()
                    .map(|ids| {
                        ids.iter()
                            .filter_map(|i| i.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default();
                let count = frame["data"]["presence"]["count"].as_u64();
                if client.presence != Presence::Joining {
                    Some("a presence snapshot it did not ask for")
                } else if count != Some(ids.len() as u64) {
                    Some("a presence count that is not the number of ids")
                } else {
                    client.presence = Presence::In(ids);
                    None
                }
            }
            Some("pubb:subscription_succeeded" | "pubb_internal:subscription_succeeded") => {
                client.public.insert(channel.to_owned());
                None
            }
            Some("pubb:member_added") => {
                let user = frame["data"]["user_id"].as_str().unwrap_or("").to_owned();
                match &mut client.presence {
                    Presence::In(members) => {
                        (!members.insert(user)).then_some("member_added for a member it had")
                    }
                    _ => Some("member_added outside presence"),
                }
            }
            Some("pubb:member_removed") => {
                let user = frame["data"]["user_id"].as_str().unwrap_or("");
                match &mut client.presence {
                    Presence::In(members) => (!members.remove(user))
                        .then_some("member_removed for a member it did not have"),
                    _ => Some("member_removed outside presence"),
                }
            }
            None if client.public.contains(channel) => {
                let payload: Value = frame["data"]
                    .as_str()
                    .and_then(|d| serde_json::from_str(d).ok())
                    .unwrap_or_default();
                let data = payload["data"].as_str().unwrap_or("").to_owned();
                if self.facts.duplicates.contains(&data) {
                    Some("a publication answered as a duplicate")
                } else if client.delivered.insert(data.clone()) {
                    self.facts.published.insert(data);
                    None
                } else {
                    Some("a publication a second time")
                }
            }
            None => Some("a publication on a channel it is not subscribed to"),
            Some(_) => Some("an unexpected event"),
        };
        if let Some(problem) = problem {
            self.fail(format!("channel slot {slot} got {problem}: {frame}"));
        }
    }
}
