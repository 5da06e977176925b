//! Engine configuration: principals, apps, limits and timers. The host
//! builds it from its config file, env and flags.

use serde::{Deserialize, Serialize};

use crate::ids::PrincipalId;

/// Everything the engine is configured with.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// Principals that hold every capability everywhere.
    pub admins: Vec<PrincipalId>,
    /// Static bearer tokens and the optional JWT driver.
    pub auth: AuthConfig,
    /// Channel apps.
    pub apps: Vec<AppConfig>,
    /// Limits for both protocols.
    pub limits: Limits,
    /// Heartbeat timers for both protocols.
    pub heartbeat: Heartbeat,
    /// One node of a cluster: tell the other nodes what they must see
    /// ([`crate::cluster`]) and claim publication keys cluster-wide.
    pub cluster: bool,
    /// This node's id in the cluster (the name its messages reach the
    /// other nodes under); with [`Config::cluster`], it decides which
    /// channels' webhooks this node reports.
    pub node: String,
}

/// Bearer authentication drivers (see [`crate::auth`]).
#[derive(Debug, Clone, Default)]
pub struct AuthConfig {
    /// Static driver: `(token, principal)` pairs.
    pub tokens: Vec<(String, PrincipalId)>,
    /// JWT HS256 driver secret; `sub` is the principal, `exp` is honoured.
    pub jwt_secret: Option<String>,
    /// The `iss` and `aud` that HS256 tokens must carry.
    pub jwt_claims: ClaimRules,
    /// The JWKS driver: RS256, ES256 and EdDSA tokens.
    pub jwks: Option<JwksConfig>,
}

/// Claims a JWT driver requires; `None` checks nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClaimRules {
    /// The exact `iss` required.
    pub issuer: Option<String>,
    /// The audience `aud` must name (`aud` is a string or an array).
    pub audience: Option<String>,
}

/// The JWKS driver: its keys, how they are refreshed, the claims required.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JwksConfig {
    /// A JWKS document known at start (e.g. inline in the config); `None`:
    /// no key until the first fetch.
    pub keys: Option<String>,
    /// How the host can fetch the set again; `None`: the set never changes
    /// and the engine asks for no fetch.
    pub refresh: Option<KeyRefresh>,
    /// The `iss` and `aud` its tokens must carry.
    pub claims: ClaimRules,
}

/// The refresh schedule of a fetched key set (see [`crate::auth::refresh`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRefresh {
    /// Time between scheduled fetches.
    pub every_ms: u64,
    /// Least time between the start of one fetch and a fetch asked for by
    /// an unknown `kid`.
    pub min_interval_ms: u64,
}

/// A channel application.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppConfig {
    /// `app_id`, used in `/api/apps/:appId/…`.
    pub id: String,
    /// The public key clients connect with.
    pub key: String,
    /// The secret that signs subscriptions and authorizes the HTTP API.
    pub secret: String,
    /// Maximum concurrent sockets (`None`: unlimited).
    pub max_connections: Option<usize>,
    /// Pusher sockets may send `client-` events on the private and presence
    /// channels they are subscribed to.
    pub client_events: bool,
    /// Pusher webhooks: where to POST which channel events.
    pub webhooks: Vec<WebhookConfig>,
}

/// One Pusher webhook of an app (`[[apps.webhooks]]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookConfig {
    /// The endpoint the host POSTs to.
    pub url: String,
    /// The event names sent there: `channel_occupied`, `channel_vacated`,
    /// `member_added`, `member_removed`, `client_event`.
    pub event_types: Vec<String>,
}

/// The event names a webhook may list in `event_types`.
pub const WEBHOOK_EVENT_TYPES: [&str; 5] = [
    "channel_occupied",
    "channel_vacated",
    "member_added",
    "member_removed",
    "client_event",
];

/// Why a webhook's config cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WebhookConfigError {
    /// The URL is not `http://…` or `https://…` with a host.
    #[error("webhook url {0:?} must be http://HOST… or https://HOST…")]
    Url(String),
    /// `event_types` is empty.
    #[error("webhook {0:?} lists no event_types")]
    NoEventTypes(String),
    /// An event type Pusher does not have.
    #[error(
        "webhook {url:?}: unknown event type {event:?} (expected channel_occupied, \
         channel_vacated, member_added, member_removed or client_event)"
    )]
    EventType {
        /// The webhook's URL.
        url: String,
        /// The unknown name.
        event: String,
    },
}

impl WebhookConfig {
    /// Checks the URL's scheme and the event types.
    pub fn validate(&self) -> Result<(), WebhookConfigError> {
        let rest = self
            .url
            .strip_prefix("http://")
            .or_else(|| self.url.strip_prefix("https://"));
        let host = rest.map(|r| r.split(['/', '?', '#']).next().unwrap_or_default());
        if host.is_none_or(|h| h.is_empty() || h.contains(char::is_whitespace)) {
            return Err(WebhookConfigError::Url(self.url.clone()));
        }
        if self.event_types.is_empty() {
            return Err(WebhookConfigError::NoEventTypes(self.url.clone()));
        }
        match self
            .event_types
            .iter()
            .find(|t| !WEBHOOK_EVENT_TYPES.contains(&t.as_str()))
        {
            Some(event) => Err(WebhookConfigError::EventType {
                url: self.url.clone(),
                event: event.clone(),
            }),
            None => Ok(()),
        }
    }
}

/// Per-connection and per-request limits. Every host reads them from its
/// config under the field names below (`[limits]` in TOML, `limits` in
/// JSON); a missing field keeps its default, an unknown one is refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Largest event body, in bytes of JSON (SPEC §2: 64 KiB).
    pub max_event_bytes: usize,
    /// Largest `/v1/ws` client frame (SPEC §5: 1 MiB; larger closes 1009).
    pub max_ws_frame_bytes: usize,
    /// Subscriptions per `/v1/ws` connection (SPEC §5: 1000).
    pub max_subscriptions: usize,
    /// `/v1/ws` client frames allowed per `frame_rate_window_ms`.
    pub frame_rate: u32,
    /// The window of `frame_rate`, in milliseconds.
    pub frame_rate_window_ms: u64,
    /// Frames a connection's outbound queue may hold before the host closes
    /// it as a slow consumer.
    pub outbound_queue_frames: usize,
    /// Backlog events sent per drain of a catching-up connection; also the
    /// events read per store read when a thread's messages are folded.
    pub backlog_page: usize,
    /// Threads the engine keeps cached (their records, grants and
    /// participants); threads in use are kept beyond it.
    pub thread_cache: usize,
    /// Channels per channel socket, pubb or Pusher (100).
    pub max_channels: usize,
    /// Largest pubb client message (16 KiB; larger closes 1009).
    pub max_channel_message_bytes: usize,
    /// Largest published `data`, in bytes of JSON (10 KiB).
    pub max_publish_data_bytes: usize,
    /// Channel socket messages allowed per `command_rate_window_ms` (20).
    /// A Pusher socket's `pusher:subscribe` and `pusher:unsubscribe` are
    /// counted apart, up to `max_channels + command_rate` per window (a
    /// reconnecting client resubscribes to all its channels at once), and
    /// its `pusher:pong` not at all.
    pub command_rate: u32,
    /// The window of `command_rate` (1000 ms).
    pub command_rate_window_ms: u64,
    /// How long a publish `Idempotency-Key` is remembered (24 h).
    pub idempotency_retention_ms: u64,
    /// Threads API requests one principal may make per
    /// `http_rate_window_ms`; the next is answered `429` with `Retry-After`
    /// (0, the default: no limit).
    pub http_rate: u32,
    /// The window of `http_rate`, in milliseconds (1000).
    pub http_rate_window_ms: u64,
    /// Sockets of both protocols the engine holds at once (0, the default:
    /// no limit beyond each app's `max_connections`).
    pub max_connections: usize,
    /// `/v1/ws` sockets one principal holds at once (0, the default: no
    /// limit).
    pub max_connections_per_principal: usize,
    /// Largest fold of one thread's messages (`GET
    /// /v1/threads/:id/messages`), in bytes of the JSON of the
    /// `message_part` and `tool_call_approval` events it folds (8 MiB);
    /// past it the route answers `413`.
    pub max_fold_bytes: usize,
    /// What the cached folds of all threads may hold together, counted as
    /// `max_fold_bytes` counts (64 MiB); past it the least recently read
    /// folds are dropped (and rebuilt from the store when read again).
    pub fold_cache_bytes: usize,
    /// How long a Pusher webhook batch collects events after its first one
    /// before it is sent, in milliseconds (50; 0 sends each input's events
    /// at once).
    pub webhook_batch_ms: u64,
    /// Most events in one webhook batch: a batch that reaches it is sent at
    /// once (100).
    pub webhook_batch_events: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_event_bytes: 64 * 1024,
            max_ws_frame_bytes: 1024 * 1024,
            max_subscriptions: 1000,
            frame_rate: 1000,
            frame_rate_window_ms: 1000,
            outbound_queue_frames: 8192,
            backlog_page: 256,
            thread_cache: 10_000,
            max_channels: 100,
            max_channel_message_bytes: 16 * 1024,
            max_publish_data_bytes: 10 * 1024,
            command_rate: 20,
            command_rate_window_ms: 1000,
            idempotency_retention_ms: 24 * 60 * 60 * 1000,
            http_rate: 0,
            http_rate_window_ms: 1000,
            max_connections: 0,
            max_connections_per_principal: 0,
            max_fold_bytes: 8 * 1024 * 1024,
            fold_cache_bytes: 64 * 1024 * 1024,
            webhook_batch_ms: 50,
            webhook_batch_events: 100,
        }
    }
}

/// WebSocket Ping cadence and Pong deadline (`[heartbeat]` in a host's
/// config; missing fields keep their defaults).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Heartbeat {
    /// Time between Pings (20 s).
    pub ping_interval_ms: u64,
    /// Time without a Pong before the socket is closed (60 s).
    pub pong_timeout_ms: u64,
}

impl Default for Heartbeat {
    fn default() -> Heartbeat {
        Heartbeat {
            ping_interval_ms: 20_000,
            pong_timeout_ms: 60_000,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hook(url: &str, events: &[&str]) -> WebhookConfig {
        WebhookConfig {
            url: url.into(),
            event_types: events.iter().map(|e| (*e).to_owned()).collect(),
        }
    }

    #[test]
    fn webhooks_are_checked() {
        assert_eq!(
            hook("https://x.test/h", &WEBHOOK_EVENT_TYPES).validate(),
            Ok(())
        );
        assert_eq!(
            hook("http://127.0.0.1:9", &["client_event"]).validate(),
            Ok(())
        );
        for url in [
            "ftp://x/h",
            "x.test/h",
            "http://",
            "https:///h",
            "http://a b/",
        ] {
            assert_eq!(
                hook(url, &["client_event"]).validate(),
                Err(WebhookConfigError::Url(url.into())),
                "{url}"
            );
        }
        assert_eq!(
            hook("http://x", &[]).validate(),
            Err(WebhookConfigError::NoEventTypes("http://x".into()))
        );
        assert_eq!(
            hook("http://x", &["member_added", "channel_existence"])
                .validate()
                .unwrap_err()
                .to_string(),
            "webhook \"http://x\": unknown event type \"channel_existence\" (expected \
             channel_occupied, channel_vacated, member_added, member_removed or client_event)"
        );
    }
}
