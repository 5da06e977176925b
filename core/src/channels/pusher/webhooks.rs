//! Pusher webhooks: which channel events an app's endpoints hear, batched
//! per engine input and signed here; the host only POSTs the batches
//! ([`crate::Output::Webhook`]), in order per endpoint, retrying.
//!
//! A batch is `{"time_ms", "events": [...]}` with the events of one input
//! (a socket closing on five channels makes one batch), signed with
//! HMAC-SHA256 of the body keyed with the app secret. In a cluster each
//! event is reported by one node: `member_added`/`member_removed` by the
//! node where the user became or stopped being a member anywhere,
//! `client_event` by the sender's, `channel_occupied`/`channel_vacated` by
//! the node whose subscribers occupy a channel no other node holds, or
//! leave it so (nodes tell each other when their own subscribers of a
//! channel come and go, for apps with webhooks).

use serde_json::{json, Value};

use crate::channels::fanout;
use crate::channels::registry::{AppIdx, Registry};
use crate::cluster::ClusterMessage;
use crate::ctx::Ctx;
use crate::io::Output;

use super::signing::hmac_hex;

/// A channel event a webhook may report.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum WebhookEvent {
    /// A channel got its first subscriber.
    Occupied {
        /// The channel.
        channel: String,
    },
    /// A channel lost its last subscriber.
    Vacated {
        /// The channel.
        channel: String,
    },
    /// A user became a member of a presence channel.
    MemberAdded {
        /// The channel.
        channel: String,
        /// The user.
        user_id: String,
    },
    /// A user stopped being a member.
    MemberRemoved {
        /// The channel.
        channel: String,
        /// The user.
        user_id: String,
    },
    /// A client event was relayed.
    ClientEvent {
        /// The channel.
        channel: String,
        /// The event name.
        event: String,
        /// Its data.
        data: Value,
        /// The sender.
        socket_id: String,
        /// The sender's presence user, on presence channels.
        user_id: Option<String>,
    },
}

impl WebhookEvent {
    /// The event's `name`, as `event_types` lists it.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            WebhookEvent::Occupied { .. } => "channel_occupied",
            WebhookEvent::Vacated { .. } => "channel_vacated",
            WebhookEvent::MemberAdded { .. } => "member_added",
            WebhookEvent::MemberRemoved { .. } => "member_removed",
            WebhookEvent::ClientEvent { .. } => "client_event",
        }
    }

    fn to_json(&self) -> Value {
        let name = self.name();
        match self {
            WebhookEvent::Occupied { channel } | WebhookEvent::Vacated { channel } => {
                json!({ "name": name, "channel": channel })
            }
            WebhookEvent::MemberAdded { channel, user_id }
            | WebhookEvent::MemberRemoved { channel, user_id } => {
                json!({ "name": name, "channel": channel, "user_id": user_id })
            }
            WebhookEvent::ClientEvent {
                channel,
                event,
                data,
                socket_id,
                user_id,
            } => {
                let data = match data {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                };
                let mut value = json!({
                    "name": name,
                    "channel": channel,
                    "event": event,
                    "data": data,
                    "socket_id": socket_id,
                });
                if let (Some(user), Value::Object(map)) = (user_id, &mut value) {
                    map.insert("user_id".into(), Value::String(user.clone()));
                }
                value
            }
        }
    }
}

/// Notes `event` of `app` for the end of the input, if the app has webhooks.
pub(crate) fn note(reg: &mut Registry, app: AppIdx, event: WebhookEvent) {
    if !reg.apps[app].config.webhooks.is_empty() {
        reg.webhooks.push((app, event));
    }
}

/// This node's subscribers of `channel` came (`occupied`) or went: report
/// it when no other node holds the channel, and tell the other nodes.
pub(crate) fn occupancy(
    reg: &mut Registry,
    cx: &mut Ctx<'_>,
    app: AppIdx,
    channel: &str,
    occupied: bool,
) {
    let state = &mut reg.apps[app];
    if state.config.webhooks.is_empty() || channel.starts_with('#') {
        return;
    }
    let elsewhere = state
        .remote_occupied
        .get(channel)
        .is_some_and(|nodes| !nodes.is_empty());
    if occupied || !elsewhere {
        state.pending_vacated.remove(channel);
    } else {
        state.pending_vacated.insert(channel.to_owned());
    }
    fanout::announce(
        cx,
        ClusterMessage::ChannelOccupancy {
            app_id: state.config.id.clone(),
            channel: channel.to_owned(),
            occupied,
            reported: !elsewhere,
        },
    );
    if !elsewhere {
        let channel = channel.to_owned();
        let event = if occupied {
            WebhookEvent::Occupied { channel }
        } else {
            WebhookEvent::Vacated { channel }
        };
        note(reg, app, event);
    }
}

/// `node` has subscribers of `channel` now (`occupied`), or none any more.
/// When the last other node leaves a channel this node left meanwhile, and
/// it did not report it, this node does (at least once: two nodes leaving
/// at the same moment both report it).
pub(crate) fn remote_occupancy(
    reg: &mut Registry,
    app: AppIdx,
    node: &str,
    channel: &str,
    (occupied, reported): (bool, bool),
) {
    let state = &mut reg.apps[app];
    let nodes = state.remote_occupied.entry(channel.to_owned()).or_default();
    if occupied {
        nodes.insert(node.to_owned());
        return;
    }
    nodes.remove(node);
    if !nodes.is_empty() {
        return;
    }
    state.remote_occupied.remove(channel);
    let owed = state.pending_vacated.remove(channel);
    if owed && !reported && !state.channels.contains_key(channel) {
        let channel = channel.to_owned();
        note(reg, app, WebhookEvent::Vacated { channel });
    }
}

/// Turns the events noted during this input into one signed batch per
/// endpoint that takes any of them.
pub(crate) fn flush(reg: &mut Registry, cx: &mut Ctx<'_>) {
    if reg.webhooks.is_empty() {
        return;
    }
    let noted = std::mem::take(&mut reg.webhooks);
    for (idx, app) in reg.apps.iter().enumerate() {
        for hook in &app.config.webhooks {
            let events: Vec<Value> = noted
                .iter()
                .filter(|(a, e)| *a == idx && hook.event_types.iter().any(|t| t == e.name()))
                .map(|(_, e)| e.to_json())
                .collect();
            if events.is_empty() {
                continue;
            }
            let body = json!({ "time_ms": cx.now.0, "events": events }).to_string();
            cx.out.push_unfenced(Output::Webhook {
                url: hook.url.clone(),
                key: app.config.key.clone(),
                signature: hmac_hex(&app.config.secret, body.as_bytes()),
                body,
            });
        }
    }
}
