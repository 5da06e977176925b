//! Who is where: apps, their channels and subscribers, and open sockets.
//!
//! Channels live inside their app, so one app's channel can never reach
//! another app's sockets. A channel exists only while it has subscribers
//! here; a presence channel's members are kept while it has members on any
//! node of the cluster (so a socket subscribing later sees them all).

use std::collections::BTreeMap;

use crate::config::AppConfig;
use crate::http_rate::HttpRates;
use crate::ids::ConnId;
use crate::io::ChannelProtocol;
use crate::maps::HashMap;

use super::peers::Peers;
use super::presence::{Arrival, Departure, Identity, Presence};
use super::publish::{Claims, IdempotencyKeys};
use super::pusher::webhooks::{Batches, WebhookEvent};
use super::ratelimit::CommandRate;
use super::wire::Codec;

/// An index into [`Registry::apps`].
pub(crate) type AppIdx = usize;

/// One channel's subscribers on this node.
#[derive(Debug, Default)]
pub(crate) struct Channel {
    /// Subscribed sockets with their wire format, ordered so fan-out is
    /// deterministic; changed only by [`Channel::add`] and
    /// [`Channel::remove`], which keep the lists below in step.
    pub(crate) subscribers: BTreeMap<ConnId, Codec>,
    /// The pubb subscribers, in id order: a fan-out's recipients, copied
    /// whole rather than gathered one by one.
    pubb: Vec<ConnId>,
    /// The Pusher subscribers, in id order.
    pusher: Vec<ConnId>,
}

impl Channel {
    fn list(&mut self, codec: Codec) -> &mut Vec<ConnId> {
        match codec {
            Codec::Pubb => &mut self.pubb,
            Codec::Pusher => &mut self.pusher,
        }
    }

    /// Subscribes `conn`, which reads `codec`.
    fn add(&mut self, conn: ConnId, codec: Codec) {
        if let Some(was) = self.subscribers.insert(conn, codec) {
            self.list(was).retain(|c| *c != conn);
        }
        let list = self.list(codec);
        if let Err(at) = list.binary_search(&conn) {
            list.insert(at, conn);
        }
    }

    /// Unsubscribes `conn`.
    fn remove(&mut self, conn: ConnId) {
        if let Some(codec) = self.subscribers.remove(&conn) {
            let list = self.list(codec);
            if let Ok(at) = list.binary_search(&conn) {
                list.remove(at);
            }
        }
    }

    /// The subscribers reading `codec`, in id order.
    pub(crate) fn audience(&self, codec: Codec) -> &[ConnId] {
        match codec {
            Codec::Pubb => &self.pubb,
            Codec::Pusher => &self.pusher,
        }
    }
}

/// A configured app and its live state.
#[derive(Debug)]
pub(crate) struct App {
    /// Id, key, secret and connection limit.
    pub(crate) config: AppConfig,
    /// Channels with at least one subscriber.
    pub(crate) channels: BTreeMap<String, Channel>,
    /// Presence channels with at least one member on any node.
    pub(crate) presence: BTreeMap<String, Presence>,
    /// Open sockets by `socket_id` (for publish exclusion).
    pub(crate) sockets_by_id: HashMap<String, ConnId>,
    /// Publish keys within their retention window.
    pub(crate) idempotency: IdempotencyKeys,
    /// Channels other nodes hold subscribers of: per channel, each such
    /// node with its number of subscribed sockets.
    pub(crate) remote_counts: BTreeMap<String, BTreeMap<String, u64>>,
}

impl App {
    /// Whether another socket would exceed `max_connections`.
    pub(crate) fn is_full(&self) -> bool {
        self.config
            .max_connections
            .is_some_and(|max| self.sockets_by_id.len() >= max)
    }

    /// Sockets subscribed to `channel` on this node.
    pub(crate) fn local_subscribers(&self, channel: &str) -> u64 {
        self.channels
            .get(channel)
            .map_or(0, |c| c.subscribers.len() as u64)
    }

    /// Sockets subscribed to `channel` on every node of the cluster.
    pub(crate) fn subscribers(&self, channel: &str) -> u64 {
        let remote: u64 = self
            .remote_counts
            .get(channel)
            .map_or(0, |nodes| nodes.values().sum());
        self.local_subscribers(channel) + remote
    }

    /// Whether `channel` has a subscriber anywhere in the cluster.
    pub(crate) fn occupied(&self, channel: &str) -> bool {
        self.subscribers(channel) > 0
    }

    /// Every channel with a subscriber anywhere, in name order.
    pub(crate) fn occupied_channels(&self) -> Vec<&String> {
        let mut names: Vec<&String> = self
            .channels
            .keys()
            .chain(self.remote_counts.keys())
            .collect();
        names.sort();
        names.dedup();
        names
    }
}

/// One open channel socket (pubb or Pusher).
#[derive(Debug)]
pub(crate) struct Socket {
    /// Its app.
    pub(crate) app: AppIdx,
    /// The `socket_id` sent in `pubb:connection_established`.
    pub(crate) socket_id: String,
    /// Which acknowledgement it gets.
    pub(crate) protocol: ChannelProtocol,
    /// Subscribed channels, with the presence user id for presence channels.
    pub(crate) channels: BTreeMap<String, Option<String>>,
    /// Its recent commands.
    pub(crate) rate: CommandRate,
    /// Its recent client events (Pusher sockets).
    pub(crate) client_rate: CommandRate,
    /// Its recent `pusher:subscribe` and `pusher:unsubscribe` (Pusher
    /// sockets, counted apart from its other messages).
    pub(crate) subscription_rate: CommandRate,
    /// The user it signed in as (`pusher:signin`).
    pub(crate) user_id: Option<String>,
    /// A close was requested; further messages are ignored.
    pub(crate) closing: bool,
}

/// The result of adding a socket to a channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Joined {
    /// A public or private channel.
    Plain,
    /// A presence channel, and what the join changed.
    Presence(Arrival),
}

/// Every app and every open channel socket.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    /// Apps in config order.
    pub(crate) apps: Vec<App>,
    by_key: HashMap<String, AppIdx>,
    by_id: HashMap<String, AppIdx>,
    /// Open sockets.
    pub(crate) sockets: HashMap<ConnId, Socket>,
    /// Keyed publications waiting for their cluster-wide claims.
    pub(crate) claims: Claims,
    /// Webhook events of the input being handled.
    pub(crate) webhooks: Vec<(AppIdx, WebhookEvent)>,
    /// Each app's recent requests on the channels HTTP APIs (both count
    /// toward one budget, `limits.http_rate`).
    pub(crate) rates: HttpRates<AppIdx>,
    /// Webhook events waiting for their batch to be sent.
    pub(crate) batches: Batches,
    /// The other nodes of the cluster, and which channels this node reports.
    pub(crate) peers: Peers,
}

impl Registry {
    /// A registry of `apps`. A later app with a duplicate key or id is
    /// unreachable by that key or id.
    pub(crate) fn new(apps: &[AppConfig]) -> Registry {
        let mut registry = Registry::default();
        for (idx, config) in apps.iter().enumerate() {
            registry.by_key.entry(config.key.clone()).or_insert(idx);
            registry.by_id.entry(config.id.clone()).or_insert(idx);
            registry.apps.push(App {
                config: config.clone(),
                channels: BTreeMap::new(),
                presence: BTreeMap::new(),
                sockets_by_id: HashMap::default(),
                idempotency: IdempotencyKeys::default(),
                remote_counts: BTreeMap::new(),
            });
        }
        registry
    }

    /// The app whose public key is `key`.
    pub(crate) fn app_by_key(&self, key: &str) -> Option<AppIdx> {
        self.by_key.get(key).copied()
    }

    /// The app whose id is `id`.
    pub(crate) fn app_by_id(&self, id: &str) -> Option<AppIdx> {
        self.by_id.get(id).copied()
    }

    /// Adds `conn`, which reads `codec`, to `channel`, as a member for
    /// presence channels.
    pub(crate) fn join(
        &mut self,
        app: AppIdx,
        channel: &str,
        (conn, codec): (ConnId, Codec),
        identity: Option<&Identity>,
    ) -> Joined {
        let state = &mut self.apps[app];
        state
            .channels
            .entry(channel.to_owned())
            .or_default()
            .add(conn, codec);
        match identity {
            Some(identity) => Joined::Presence(
                state
                    .presence
                    .entry(channel.to_owned())
                    .or_default()
                    .join(identity),
            ),
            None => Joined::Plain,
        }
    }

    /// Removes `conn` from `channel` (and one socket of `user` from its
    /// members); drops what is left empty.
    pub(crate) fn leave(
        &mut self,
        app: AppIdx,
        channel: &str,
        conn: ConnId,
        user: Option<&str>,
    ) -> Option<Departure> {
        let state = &mut self.apps[app];
        if let Some(entry) = state.channels.get_mut(channel) {
            entry.remove(conn);
            if entry.subscribers.is_empty() {
                state.channels.remove(channel);
            }
        }
        let user = user?;
        let presence = state.presence.get_mut(channel)?;
        let departure = presence.leave(user);
        if presence.is_empty() {
            state.presence.remove(channel);
        }
        Some(departure)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn registry() -> Registry {
        let app = |n: u32| AppConfig {
            id: format!("app-{n}"),
            key: format!("key-{n}"),
            secret: format!("secret-{n}"),
            max_connections: None,
            client_events: false,
            webhooks: Vec::new(),
        };
        Registry::new(&[app(1), app(2)])
    }

    fn user(id: &str) -> Identity {
        Identity {
            user_id: id.into(),
            user_info: Some(json!({ "name": id })),
        }
    }

    #[test]
    fn looks_up_apps() {
        let r = registry();
        assert_eq!(r.app_by_key("key-2"), Some(1));
        assert_eq!(r.app_by_id("app-1"), Some(0));
        assert_eq!(r.app_by_key("app-1"), None);
    }

    #[test]
    fn apps_are_isolated() {
        let mut r = registry();
        r.join(0, "news", (ConnId(1), Codec::Pubb), None);
        assert!(r.apps[0].channels.contains_key("news"));
        assert!(!r.apps[1].channels.contains_key("news"));
    }

    #[test]
    fn each_wire_format_keeps_its_recipients_in_id_order() {
        let mut r = registry();
        for (conn, codec) in [(5, Codec::Pubb), (2, Codec::Pusher), (3, Codec::Pubb)] {
            r.join(0, "news", (ConnId(conn), codec), None);
        }
        r.join(0, "news", (ConnId(1), Codec::Pubb), None);
        r.leave(0, "news", ConnId(3), None);
        r.leave(0, "news", ConnId(9), None);
        let channel = &r.apps[0].channels["news"];
        assert_eq!(channel.audience(Codec::Pubb), [ConnId(1), ConnId(5)]);
        assert_eq!(channel.audience(Codec::Pusher), [ConnId(2)]);
        assert_eq!(channel.subscribers.len(), 3);
    }

    #[test]
    fn presence_counts_users_not_sockets() {
        let mut r = registry();
        let (a1, a2, b) = (ConnId(1), ConnId(2), ConnId(3));
        let ch = "presence-team";
        let first = Joined::Presence(Arrival {
            first_here: true,
            new_member: true,
        });
        assert_eq!(r.join(0, ch, (a1, Codec::Pubb), Some(&user("a"))), first);
        assert_eq!(
            r.join(0, ch, (a2, Codec::Pubb), Some(&user("a"))),
            Joined::Presence(Arrival {
                first_here: false,
                new_member: false
            })
        );
        assert_eq!(r.join(0, ch, (b, Codec::Pubb), Some(&user("b"))), first);
        assert_eq!(r.apps[0].presence.get(ch).map(Presence::count), Some(2));
        let gone = Some(Departure {
            last_here: true,
            gone: true,
        });
        assert_eq!(
            r.leave(0, ch, a1, Some("a")),
            Some(Departure {
                last_here: false,
                gone: false
            })
        );
        assert_eq!(r.leave(0, ch, b, Some("b")), gone);
        assert_eq!(r.leave(0, ch, a2, Some("a")), gone);
        assert!(
            !r.apps[0].channels.contains_key(ch),
            "an empty channel is dropped"
        );
        assert!(r.apps[0].presence.is_empty(), "so are its members");
    }
}
