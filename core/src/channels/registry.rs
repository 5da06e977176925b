//! Who is where: apps, their channels and subscribers, and open sockets.
//!
//! Channels live inside their app, so one app's channel can never reach
//! another app's sockets. A channel exists only while it has subscribers.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::config::AppConfig;
use crate::ids::ConnId;
use crate::io::ChannelProtocol;

use super::presence::{Identity, Presence};
use super::publish::IdempotencyKeys;
use super::ratelimit::CommandRate;

/// An index into [`Registry::apps`].
pub(crate) type AppIdx = usize;

/// One channel's subscribers and, for `presence-` channels, its members.
#[derive(Debug, Default)]
pub(crate) struct Channel {
    /// Subscribed sockets, ordered so fan-out is deterministic.
    pub(crate) subscribers: BTreeSet<ConnId>,
    /// Members, for presence channels.
    pub(crate) presence: Option<Presence>,
}

/// A configured app and its live state.
#[derive(Debug)]
pub(crate) struct App {
    /// Id, key, secret and connection limit.
    pub(crate) config: AppConfig,
    /// Channels with at least one subscriber.
    pub(crate) channels: BTreeMap<String, Channel>,
    /// Open sockets by `socket_id` (for publish exclusion).
    pub(crate) sockets_by_id: HashMap<String, ConnId>,
    /// Publish keys within their retention window.
    pub(crate) idempotency: IdempotencyKeys,
}

impl App {
    /// Whether another socket would exceed `max_connections`.
    pub(crate) fn is_full(&self) -> bool {
        self.config
            .max_connections
            .is_some_and(|max| self.sockets_by_id.len() >= max)
    }
}

/// One open pubb socket.
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
    /// A close was requested; further messages are ignored.
    pub(crate) closing: bool,
}

/// The result of adding a socket to a channel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Joined {
    /// A public or private channel.
    Plain,
    /// A presence channel; `new_member` when this is the user's first socket.
    Presence {
        /// Whether the others must hear `pubb:member_added`.
        new_member: bool,
    },
}

/// Every app and every open pubb socket.
#[derive(Debug, Default)]
pub(crate) struct Registry {
    /// Apps in config order.
    pub(crate) apps: Vec<App>,
    by_key: HashMap<String, AppIdx>,
    by_id: HashMap<String, AppIdx>,
    /// Open sockets.
    pub(crate) sockets: HashMap<ConnId, Socket>,
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
                sockets_by_id: HashMap::new(),
                idempotency: IdempotencyKeys::default(),
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

    /// Adds `conn` to `channel` of `app` (it must not be subscribed yet).
    pub(crate) fn join(
        &mut self,
        app: AppIdx,
        channel: &str,
        conn: ConnId,
        identity: Option<&Identity>,
    ) -> Joined {
        let entry = self.apps[app]
            .channels
            .entry(channel.to_owned())
            .or_default();
        entry.subscribers.insert(conn);
        match identity {
            Some(identity) => {
                let presence = entry.presence.get_or_insert_with(Presence::default);
                Joined::Presence {
                    new_member: presence.join(identity),
                }
            }
            None => Joined::Plain,
        }
    }

    /// Removes `conn` from `channel` of `app`. Returns true when `user` was
    /// a presence member and this was their last socket in the channel.
    pub(crate) fn leave(
        &mut self,
        app: AppIdx,
        channel: &str,
        conn: ConnId,
        user: Option<&str>,
    ) -> bool {
        let channels = &mut self.apps[app].channels;
        let Some(entry) = channels.get_mut(channel) else {
            return false;
        };
        entry.subscribers.remove(&conn);
        let removed = match (user, entry.presence.as_mut()) {
            (Some(user), Some(presence)) => presence.leave(user),
            _ => false,
        };
        if entry.subscribers.is_empty() {
            channels.remove(channel);
        }
        removed
    }

    /// The channel `channel` of `app`, if it has subscribers.
    pub(crate) fn channel(&self, app: AppIdx, channel: &str) -> Option<&Channel> {
        self.apps[app].channels.get(channel)
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
        r.join(0, "news", ConnId(1), None);
        assert!(r.channel(0, "news").is_some());
        assert!(r.channel(1, "news").is_none());
    }

    #[test]
    fn presence_counts_users_not_sockets() {
        let mut r = registry();
        let (a1, a2, b) = (ConnId(1), ConnId(2), ConnId(3));
        let ch = "presence-team";
        assert_eq!(
            r.join(0, ch, a1, Some(&user("a"))),
            Joined::Presence { new_member: true }
        );
        assert_eq!(
            r.join(0, ch, a2, Some(&user("a"))),
            Joined::Presence { new_member: false }
        );
        assert_eq!(
            r.join(0, ch, b, Some(&user("b"))),
            Joined::Presence { new_member: true }
        );
        let presence = r
            .channel(0, ch)
            .and_then(|c| c.presence.as_ref())
            .map(Presence::count);
        assert_eq!(presence, Some(2));
        assert!(!r.leave(0, ch, a1, Some("a")));
        assert!(r.leave(0, ch, b, Some("b")));
        assert!(r.leave(0, ch, a2, Some("a")));
        assert!(r.channel(0, ch).is_none(), "an empty channel is dropped");
    }
}
