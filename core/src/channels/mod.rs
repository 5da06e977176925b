//! Channels: public, private and presence channels, signatures, HTTP
//! publish with idempotency keys, spoken over two wire formats: the pubb
//! protocol and Pusher's protocol 7 with its HTTP API ([`pusher`]).
//!
//! Decisions where the seed and SPEC §6 leave room:
//! - `subscription_error` data: `Subscription not authorized` (missing or
//!   wrong `auth`, missing or invalid `channel_data`), `Invalid channel name`
//!   (outside `[A-Za-z0-9_\-=@,.;]{1,200}`), `Channel limit exceeded (100)`
//!   (a 101st channel). The connection stays open in every case.
//! - A repeated subscribe is checked like a new one; when valid it is
//!   acknowledged with `"{}"` and changes nothing.
//! - More than `command_rate` commands in a sliding window: the `error` event,
//!   then close 1008. A client message over the size limit: close 1009.
//! - Presence: a member without `user_info` appears as `null` in the
//!   snapshot's `hash` and without `user_info` in `pubb:member_added`.
//! - Publish errors carry a stable `code` (see [`publish::PublishError`]);
//!   duplicate channels in one publication are delivered once. A repeated
//!   `Idempotency-Key` answers the original publication's id and channels.

pub(crate) mod api;
mod commands;
mod fanout;
mod frames;
pub mod names;
mod peers;
mod presence;
pub mod publish;
pub mod pusher;
mod ratelimit;
mod registry;
mod remote;
pub mod signature;
mod socket;
#[cfg(test)]
mod tests;
mod wire;

use crate::cluster::{ClaimOutcome, ClusterMessage, NodeState};
use crate::config::Config;
use crate::ctx::Ctx;
use crate::edge::{AcceptedHandshake, ChannelsUpgrade};
use crate::http::{HttpRequest, HttpResponse};
use crate::ids::{ClaimId, ConnId, Millis, RequestId};
use crate::io::{ChannelProtocol, CloseReason, Output, WsFrame};

use peers::Peers;
pub use pusher::PusherError;
use registry::Registry;

/// Seconds a client waits before retrying a full app (the 503's `Retry-After`).
const FULL_RETRY_AFTER_S: u64 = 5;

/// Apps, their sockets, channels, presence members and idempotency keys.
#[derive(Debug, Default)]
pub(crate) struct Channels {
    registry: Registry,
    /// `activity_timeout` announced to pubb sockets: the Pong deadline in
    /// seconds.
    activity_timeout_s: u64,
    /// `activity_timeout` announced to Pusher sockets: the silence after
    /// which the server sends `pusher:ping`, in seconds.
    pusher_activity_timeout_s: u64,
}

impl Channels {
    pub(crate) fn new(config: &Config) -> Channels {
        let mut registry = Registry::new(&config.apps);
        registry.peers = Peers::new(config.cluster, &config.node);
        Channels {
            registry,
            activity_timeout_s: config.heartbeat.pong_timeout_ms.div_ceil(1000).max(1),
            pusher_activity_timeout_s: config.heartbeat.ping_interval_ms.div_ceil(1000).max(1),
        }
    }

    /// Decides a `/socket` upgrade (SPEC §6 handshake errors).
    pub(crate) fn handshake(
        &self,
        upgrade: &ChannelsUpgrade,
    ) -> Result<AcceptedHandshake, HttpResponse> {
        if upgrade.protocol == ChannelProtocol::Pusher {
            return Ok(self.pusher_handshake(upgrade));
        }
        let Some(key) = upgrade.app_key.as_deref().filter(|k| !k.is_empty()) else {
            return Err(HttpResponse::text(400, "appKey is required"));
        };
        let Some(app) = self.registry.app_by_key(key) else {
            return Err(HttpResponse::text(404, "Application not found"));
        };
        if self.registry.apps[app].is_full() {
            let mut response = HttpResponse::text(503, "Application connection limit reached");
            response.retry_after = Some(FULL_RETRY_AFTER_S);
            return Err(response);
        }
        Ok(AcceptedHandshake::new(app, upgrade.protocol))
    }

    /// Decides a `/app/:key` upgrade: always upgraded, a refusal is the
    /// socket's first and last message.
    fn pusher_handshake(&self, upgrade: &ChannelsUpgrade) -> AcceptedHandshake {
        let version = match upgrade.version.as_deref() {
            None => Err(PusherError::NoProtocol),
            Some("7") => Ok(()),
            Some(v) if v.parse::<u32>().is_ok() => Err(PusherError::UnsupportedProtocol),
            Some(_) => Err(PusherError::InvalidVersion),
        };
        let app = version.and_then(|()| {
            let key = upgrade
                .app_key
                .as_deref()
                .ok_or(PusherError::PathNotFound)?;
            let app = self
                .registry
                .app_by_key(key)
                .ok_or(PusherError::AppNotFound)?;
            if self.registry.apps[app].is_full() {
                return Err(PusherError::OverQuota);
            }
            Ok(app)
        });
        match app {
            Ok(app) => AcceptedHandshake::new(app, ChannelProtocol::Pusher),
            Err(refusal) => AcceptedHandshake::refused(refusal),
        }
    }

    /// A socket opened: send the connection event, or a Pusher refusal.
    pub(crate) fn open(&mut self, cx: &mut Ctx<'_>, conn: ConnId, handshake: &AcceptedHandshake) {
        if let Some(refusal) = handshake.refusal() {
            return pusher::refuse(cx, conn, refusal);
        }
        let activity_timeout_s = match handshake.protocol() {
            ChannelProtocol::Pusher => self.pusher_activity_timeout_s,
            _ => self.activity_timeout_s,
        };
        socket::open(
            &mut self.registry,
            cx,
            conn,
            handshake.app(),
            handshake.protocol(),
            activity_timeout_s,
        );
    }

    /// A client message.
    pub(crate) fn frame(&mut self, cx: &mut Ctx<'_>, conn: ConnId, frame: WsFrame<'_>) {
        socket::frame(&mut self.registry, cx, conn, frame);
    }

    /// The socket closed: leave every channel (presence removal included).
    pub(crate) fn closed(&mut self, cx: &mut Ctx<'_>, conn: ConnId) {
        socket::closed(&mut self.registry, cx, conn);
    }

    /// A Pusher socket was silent for `activity_timeout`: `pusher:ping`.
    pub(crate) fn idle_ping(&mut self, cx: &mut Ctx<'_>, conn: ConnId) {
        if self.registry.sockets.get(&conn).is_some_and(|s| !s.closing) {
            pusher::idle_ping(cx, conn);
        }
    }

    /// A Pusher socket did not answer its `pusher:ping`: 4201.
    pub(crate) fn idle_expired(&mut self, cx: &mut Ctx<'_>, conn: ConnId) {
        match self.registry.sockets.get_mut(&conn) {
            Some(socket) if socket.closing => {}
            Some(socket) => {
                socket.closing = true;
                pusher::refuse(cx, conn, &PusherError::PongTimeout);
            }
            // A refused socket that outlived its close.
            None => cx.out.push_unfenced(Output::Close {
                conn,
                reason: CloseReason::Dropped,
            }),
        }
    }

    /// The host is going away: Pusher sockets hear `pusher:error` 4200 and
    /// close with 4200 (reconnect at once), pubb sockets close with 1001.
    pub(crate) fn shutdown(&mut self, cx: &mut Ctx<'_>) {
        let mut open: Vec<(ConnId, ChannelProtocol)> = self
            .registry
            .sockets
            .iter_mut()
            .filter(|(_, s)| !s.closing)
            .map(|(&conn, s)| {
                s.closing = true;
                (conn, s.protocol)
            })
            .collect();
        open.sort_by_key(|(conn, _)| *conn);
        for (conn, protocol) in open {
            if protocol == ChannelProtocol::Pusher {
                pusher::refuse(cx, conn, &PusherError::Reconnect);
            } else {
                cx.out.push_unfenced(Output::Close {
                    conn,
                    reason: CloseReason::GoingAway,
                });
            }
        }
    }

    /// After every input: the webhook events it noted join their batches.
    pub(crate) fn end_input(&mut self, cx: &mut Ctx<'_>) {
        pusher::webhooks::end_input(&mut self.registry, cx);
    }

    /// An `/api/apps/:appId/…` request.
    pub(crate) fn http(&mut self, cx: &mut Ctx<'_>, req: RequestId, request: &HttpRequest<'_>) {
        api::handle(&mut self.registry, cx, req, request);
    }

    /// A Pusher HTTP API request (`/apps/:appId/…`).
    pub(crate) fn pusher_http(
        &mut self,
        cx: &mut Ctx<'_>,
        req: RequestId,
        request: &HttpRequest<'_>,
    ) {
        let response = pusher::http::handle(&mut self.registry, cx, request);
        cx.out
            .push_unfenced(crate::io::Output::Respond { req, response });
    }

    /// Another node said something about channels.
    pub(crate) fn remote(&mut self, cx: &mut Ctx<'_>, node: &str, message: ClusterMessage) {
        remote::message(&mut self.registry, cx, node, message);
    }

    /// The other nodes' channel state, as the broker holds it.
    pub(crate) fn cluster_state(&mut self, cx: &mut Ctx<'_>, nodes: Vec<NodeState>) {
        remote::snapshot(&mut self.registry, cx, nodes);
    }

    /// A publication's key claim settled.
    pub(crate) fn claimed(&mut self, cx: &mut Ctx<'_>, claim: ClaimId, outcome: ClaimOutcome) {
        api::claimed(&mut self.registry, cx, claim, outcome);
    }

    /// This node's channel state, as the broker should hold it.
    pub(crate) fn local_state(&mut self, now: Millis) -> NodeState {
        remote::local_state(&mut self.registry, now)
    }

    /// Timers: idempotency-key expiry, webhook batches.
    pub(crate) fn tick(&mut self, cx: &mut Ctx<'_>) {
        for app in &mut self.registry.apps {
            app.idempotency.expire(cx.now);
        }
        pusher::webhooks::tick(&mut self.registry, cx);
    }

    /// The next idempotency-key expiry or webhook batch.
    pub(crate) fn next_deadline(&self, window_ms: u64) -> Option<Millis> {
        self.registry
            .apps
            .iter()
            .filter_map(|app| app.idempotency.next_expiry())
            .chain(self.registry.batches.next_deadline(window_ms))
            .min()
    }
}
