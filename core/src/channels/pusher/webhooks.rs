//! Pusher webhooks: which channel events an app's endpoints hear, batched
//! and signed here; the host only POSTs the batches
//! ([`crate::Output::Webhook`]), in order per endpoint, retrying.
//!
//! Events noted during an input join their endpoint's open batch; a batch
//! goes out `limits.webhook_batch_ms` after its first event, or as soon as
//! it holds `limits.webhook_batch_events` (time is the engine's input, so
//! the window is a timer of [`crate::Engine::poll_timeout`]). A batch is
//! `{"time_ms", "events": [...]}`, signed with HMAC-SHA256 of the body
//! keyed with the app secret.
//!
//! In a cluster every event of a channel is reported by one node, the
//! channel's reporter at the event's time (`channels/peers.rs`):
//! `channel_occupied`/`channel_vacated` when the channel's subscribers on
//! all nodes (which the nodes tell each other) go from none to some and
//! back, `member_added`/`member_removed` when a user becomes or stops being
//! a member anywhere, `client_event` when a client event is sent on any
//! node. One node sees them all in an order consistent with each sender's,
//! so an endpoint gets them once, in order per channel.

use serde_json::{json, Value};

use crate::channels::registry::{AppIdx, Registry};
use crate::ctx::Ctx;
use crate::ids::Millis;
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

    /// The channel it is about.
    pub(crate) fn channel(&self) -> &str {
        match self {
            WebhookEvent::Occupied { channel }
            | WebhookEvent::Vacated { channel }
            | WebhookEvent::MemberAdded { channel, .. }
            | WebhookEvent::MemberRemoved { channel, .. }
            | WebhookEvent::ClientEvent { channel, .. } => channel,
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

/// Notes `event` of `app`, which happened at `at`, for the end of the
/// input, if the app has webhooks and this node reports the channel's
/// events at that time. User channels (`#server-to-user-…`) have none.
pub(crate) fn report(reg: &mut Registry, app: AppIdx, event: WebhookEvent, at: Millis) {
    let config = &reg.apps[app].config;
    if config.webhooks.is_empty() || event.channel().starts_with('#') {
        return;
    }
    if reg.peers.owns(&config.id, event.channel(), at) {
        reg.webhooks.push((app, event));
    }
}

/// One endpoint's events waiting to go out together.
#[derive(Debug)]
struct Batch {
    app: AppIdx,
    /// The endpoint's index among the app's webhooks.
    hook: usize,
    /// When its first event was noted.
    since: Millis,
    events: Vec<Value>,
}

/// The open batches, at most one per endpoint, in the order they opened.
#[derive(Debug, Default)]
pub(crate) struct Batches {
    open: Vec<Batch>,
}

impl Batches {
    /// When the oldest open batch is due.
    pub(crate) fn next_deadline(&self, window_ms: u64) -> Option<Millis> {
        self.open.iter().map(|b| b.since.plus(window_ms)).min()
    }
}

/// Adds the events noted during this input to their endpoints' batches,
/// and sends the batches that are full (or all of them, with no window).
pub(crate) fn end_input(reg: &mut Registry, cx: &mut Ctx<'_>) {
    if reg.webhooks.is_empty() {
        return;
    }
    let max = cx.limits.webhook_batch_events.max(1);
    for (app, event) in std::mem::take(&mut reg.webhooks) {
        let hooks: Vec<usize> = reg.apps[app]
            .config
            .webhooks
            .iter()
            .enumerate()
            .filter(|(_, hook)| hook.event_types.iter().any(|t| t == event.name()))
            .map(|(hook, _)| hook)
            .collect();
        let json = event.to_json();
        for hook in hooks {
            let open = &mut reg.batches.open;
            let at = match open.iter().position(|b| b.app == app && b.hook == hook) {
                Some(at) => at,
                None => {
                    open.push(Batch {
                        app,
                        hook,
                        since: cx.now,
                        events: Vec::new(),
                    });
                    open.len() - 1
                }
            };
            open[at].events.push(json.clone());
            if open[at].events.len() >= max {
                let full = open.remove(at);
                send(reg, cx, full);
            }
        }
    }
    if cx.limits.webhook_batch_ms == 0 {
        tick(reg, cx);
    }
}

/// Sends every batch whose window has passed.
pub(crate) fn tick(reg: &mut Registry, cx: &mut Ctx<'_>) {
    let window = cx.limits.webhook_batch_ms;
    let (due, open): (Vec<Batch>, Vec<Batch>) = std::mem::take(&mut reg.batches.open)
        .into_iter()
        .partition(|b| b.since.plus(window) <= cx.now);
    reg.batches.open = open;
    for batch in due {
        send(reg, cx, batch);
    }
}

/// Signs and emits one batch.
fn send(reg: &Registry, cx: &mut Ctx<'_>, batch: Batch) {
    let app = &reg.apps[batch.app].config;
    let Some(hook) = app.webhooks.get(batch.hook) else {
        return;
    };
    let body = json!({ "time_ms": cx.now.0, "events": batch.events }).to_string();
    cx.out.push_unfenced(Output::Webhook {
        url: hook.url.clone(),
        key: app.key.clone(),
        signature: hmac_hex(&app.secret, body.as_bytes()),
        body,
    });
}
