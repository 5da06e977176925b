//! The channel socket state machine: opening, limits, subscriptions and
//! leaving, for both wire formats (pubb commands here, Pusher's in
//! [`super::pusher`]).

use std::collections::BTreeMap;

use crate::cluster::ClusterMessage;
use crate::ctx::Ctx;
use crate::ids::ConnId;
use crate::io::{ChannelProtocol, CloseReason, Output, WsFrame};

use super::commands::{self, Command};
use super::fanout;
use super::frames;
use super::names::{is_valid_pusher_name, is_valid_subscription_name, ChannelKind};
use super::presence::Identity;
use super::pusher;
use super::pusher::webhooks::{self, WebhookEvent};
use super::ratelimit::CommandRate;
use super::registry::{AppIdx, Joined, Registry, Socket};
use super::signature;
use super::wire::{self, Codec, MemberEvent};

/// Why a subscription is refused; its message is the `subscription_error`
/// data, and the connection stays open.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SubscribeError {
    /// A missing or wrong signature, or missing or invalid `channel_data`.
    #[error("Subscription not authorized")]
    NotAuthorized(AuthFailure),
    /// A name outside `[A-Za-z0-9_\-=@,.;]{1,200}` (164 on Pusher sockets).
    #[error("Invalid channel name")]
    InvalidChannel,
    /// The socket already holds the maximum number of channels.
    #[error("Channel limit exceeded ({0})")]
    TooManyChannels(usize),
}

/// What exactly was wrong with a subscription's `auth` (Pusher sockets are
/// told, as Pusher tells them; pubb sockets only hear
/// [`SubscribeError::NotAuthorized`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum AuthFailure {
    /// `auth` is missing, or its key is not the app's.
    #[error("Invalid key in subscription auth data: '{0}'")]
    Key(String),
    /// The signature does not match.
    #[error("Invalid signature: Expected HMAC SHA256 hex digest of {signed}, but got {given}")]
    Signature {
        /// The string the signature covers.
        signed: String,
        /// The signature given.
        given: String,
    },
    /// A presence subscription without valid `channel_data`.
    #[error("Invalid channel_data: a JSON object with a user_id is required")]
    ChannelData,
}

/// Close reason for a handshake naming no app of this engine (another engine's).
const CLOSE_UNKNOWN_APP: CloseReason = CloseReason::Policy;
/// Close reason when the app filled up between handshake and open.
const CLOSE_APP_FULL: CloseReason = CloseReason::TryAgainLater;

/// A socket opened: assign its `socket_id` and send the connection event.
pub(crate) fn open(
    reg: &mut Registry,
    cx: &mut Ctx<'_>,
    conn: ConnId,
    app: AppIdx,
    protocol: ChannelProtocol,
    activity_timeout_s: u64,
) {
    if protocol == ChannelProtocol::Pusher {
        let refusal = if app >= reg.apps.len() {
            Some(pusher::PusherError::AppNotFound)
        } else if reg.apps[app].is_full() {
            Some(pusher::PusherError::OverQuota)
        } else {
            None
        };
        if let Some(err) = refusal {
            return pusher::refuse(cx, conn, &err);
        }
    }
    if app >= reg.apps.len() {
        cx.out.push_unfenced(Output::Close {
            conn,
            reason: CLOSE_UNKNOWN_APP,
        });
        return;
    }
    if reg.apps[app].is_full() {
        cx.out.push_unfenced(Output::Close {
            conn,
            reason: CLOSE_APP_FULL,
        });
        return;
    }
    let socket_id = match protocol {
        ChannelProtocol::Pusher => cx.ids.pusher_socket_id(),
        _ => cx.ids.hex32(),
    };
    reg.apps[app].sockets_by_id.insert(socket_id.clone(), conn);
    *cx.metrics
        .channel_connections
        .entry(reg.apps[app].config.id.clone())
        .or_default() += 1;
    cx.out.push_unfenced(Output::Send {
        conn,
        frame: wire::connection_established(protocol, &socket_id, activity_timeout_s),
    });
    let socket = Socket {
        app,
        socket_id,
        protocol,
        channels: BTreeMap::new(),
        rate: CommandRate::default(),
        client_rate: CommandRate::default(),
        subscription_rate: CommandRate::default(),
        user_id: None,
        closing: false,
    };
    reg.sockets.insert(conn, socket);
}

/// A client message: size limit, command rate, then the command itself.
pub(crate) fn frame(reg: &mut Registry, cx: &mut Ctx<'_>, conn: ConnId, frame: WsFrame<'_>) {
    let Some(socket) = reg.sockets.get_mut(&conn) else {
        return;
    };
    if socket.closing {
        return;
    }
    let len = match frame {
        WsFrame::Text(text) => text.len(),
        WsFrame::Binary(bytes) => bytes.len(),
    };
    if len > cx.limits.max_channel_message_bytes {
        socket.closing = true;
        cx.out.push_unfenced(Output::Close {
            conn,
            reason: CloseReason::TooBig,
        });
        return;
    }
    if socket.protocol == ChannelProtocol::Pusher {
        return pusher::frame(reg, cx, conn, frame);
    }
    let (limit, window_ms) = (cx.limits.command_rate, cx.limits.command_rate_window_ms);
    if !socket.rate.allow(cx.now, limit, window_ms) {
        socket.closing = true;
        cx.out.push_unfenced(Output::Send {
            conn,
            frame: frames::error(&rate_message(limit, window_ms)),
        });
        cx.out.push_unfenced(Output::Close {
            conn,
            reason: CloseReason::Policy,
        });
        return;
    }
    let WsFrame::Text(text) = frame else { return };
    match commands::parse(text) {
        Some(Command::Subscribe {
            channel,
            auth,
            channel_data,
        }) => {
            subscribe(
                reg,
                cx,
                conn,
                &channel,
                auth.as_deref(),
                channel_data.as_deref(),
            );
        }
        Some(Command::Unsubscribe { channel }) => unsubscribe(reg, cx, conn, &channel),
        None => {}
    }
}

/// The seed's sentence, with the configured numbers.
fn rate_message(limit: u32, window_ms: u64) -> String {
    if window_ms == 1000 {
        format!("Command rate exceeded ({limit}/s)")
    } else {
        format!("Command rate exceeded ({limit}/{window_ms}ms)")
    }
}

/// Refuses a subscription: a Pusher socket hears `pusher:error` with what
/// was wrong (as Pusher says it), then the channel's
/// `pusher:subscription_error` (which pusher-js hands to the channel's
/// `pusher:subscription_error` handlers); a pubb socket its
/// `subscription_error`.
fn reject(
    cx: &mut Ctx<'_>,
    conn: ConnId,
    protocol: ChannelProtocol,
    channel: &str,
    err: &SubscribeError,
) {
    if protocol == ChannelProtocol::Pusher {
        let message = match err {
            SubscribeError::NotAuthorized(failure) => failure.to_string(),
            SubscribeError::InvalidChannel => format!("Invalid channel name: '{channel}'"),
            SubscribeError::TooManyChannels(_) => err.to_string(),
        };
        cx.out.push_unfenced(Output::Send {
            conn,
            frame: pusher::frames::error(&pusher::PusherError::SubscriptionRefused(message)),
        });
    }
    cx.out.push_unfenced(Output::Send {
        conn,
        frame: wire::subscription_error(protocol, channel, err),
    });
}

/// Checks a restricted subscription's signature; for presence, returns the
/// signed identity.
fn authorize(
    reg: &Registry,
    socket: &Socket,
    channel: &str,
    auth: Option<&str>,
    channel_data: Option<&str>,
) -> Result<Option<Identity>, SubscribeError> {
    let refuse = |failure| Err(SubscribeError::NotAuthorized(failure));
    let kind = ChannelKind::of(channel);
    if !kind.is_restricted() {
        return Ok(None);
    }
    let auth = auth.unwrap_or_default();
    let signed_data = match (kind, channel_data) {
        (ChannelKind::Presence, None) => return refuse(AuthFailure::ChannelData),
        (ChannelKind::Presence, data) => data,
        _ => None,
    };
    let app = &reg.apps[socket.app].config;
    let (given_key, given) = auth.rsplit_once(':').unwrap_or((auth, ""));
    if given_key != app.key {
        return refuse(AuthFailure::Key(given_key.to_owned()));
    }
    if !signature::verify(
        &app.key,
        &app.secret,
        &socket.socket_id,
        channel,
        signed_data,
        auth,
    ) {
        let mut signed = format!("{}:{channel}", socket.socket_id);
        if let Some(data) = signed_data {
            signed = format!("{signed}:{data}");
        }
        let given = given.to_owned();
        return refuse(AuthFailure::Signature { signed, given });
    }
    let identity = match signed_data {
        Some(data) if socket.protocol == ChannelProtocol::Pusher => Identity::parse_pusher(data),
        Some(data) => Identity::parse(data),
        None => return Ok(None),
    };
    match identity {
        Some(identity) => Ok(Some(identity)),
        None => refuse(AuthFailure::ChannelData),
    }
}

/// Subscribes `conn` to `channel`, checking its name, signature and the
/// channel limit; acknowledges in the socket's wire format.
pub(crate) fn subscribe(
    reg: &mut Registry,
    cx: &mut Ctx<'_>,
    conn: ConnId,
    channel: &str,
    auth: Option<&str>,
    channel_data: Option<&str>,
) {
    let Some(socket) = reg.sockets.get(&conn) else {
        return;
    };
    let protocol = socket.protocol;
    let own_user_channel = socket
        .user_id
        .as_deref()
        .is_some_and(|user| pusher::user_channel(user) == channel);
    let valid_name = match protocol {
        ChannelProtocol::Pusher => is_valid_pusher_name(channel),
        _ => is_valid_subscription_name(channel),
    };
    if !own_user_channel && !valid_name {
        return reject(cx, conn, protocol, channel, &SubscribeError::InvalidChannel);
    }
    let identity = match authorize(reg, socket, channel, auth, channel_data) {
        Ok(identity) => identity,
        Err(err) => return reject(cx, conn, protocol, channel, &err),
    };
    if socket.channels.contains_key(channel) {
        let frame = wire::subscription_succeeded(protocol, channel);
        return cx.out.push_unfenced(Output::Send { conn, frame });
    }
    if socket.channels.len() >= cx.limits.max_channels {
        let err = SubscribeError::TooManyChannels(cx.limits.max_channels);
        return reject(cx, conn, protocol, channel, &err);
    }
    let app = socket.app;
    if let Some(socket) = reg.sockets.get_mut(&conn) {
        socket.channels.insert(
            channel.to_owned(),
            identity.as_ref().map(|i| i.user_id.clone()),
        );
    }
    cx.metrics.channel_subscriptions += 1;
    let was_occupied = reg.apps[app].occupied(channel);
    let joined = reg.join(app, channel, (conn, Codec::of(protocol)), identity.as_ref());
    announce_count(reg, cx, app, channel);
    if !was_occupied {
        let channel = channel.to_owned();
        webhooks::report(reg, app, WebhookEvent::Occupied { channel }, cx.now);
    }
    let Joined::Presence(arrival) = joined else {
        let frame = wire::subscription_succeeded(protocol, channel);
        return cx.out.push_unfenced(Output::Send { conn, frame });
    };
    let (Some(presence), Some(identity)) = (reg.apps[app].presence.get(channel), identity) else {
        return;
    };
    let frame = wire::presence_succeeded(protocol, channel, presence.snapshot());
    cx.out.push_unfenced(Output::Send { conn, frame });
    let info = presence.info(&identity.user_id).cloned();
    if arrival.new_member {
        let added = MemberEvent::Added {
            user_id: &identity.user_id,
            info: info.as_ref(),
        };
        fanout::member(&reg.apps[app], cx, channel, added, Some(conn));
        let event = WebhookEvent::MemberAdded {
            channel: channel.to_owned(),
            user_id: identity.user_id.clone(),
        };
        webhooks::report(reg, app, event, cx.now);
    }
    if arrival.first_here {
        let seq = reg.peers.next_seq(cx.now);
        fanout::announce(
            cx,
            ClusterMessage::MemberJoined {
                app_id: reg.apps[app].config.id.clone(),
                channel: channel.to_owned(),
                user_id: identity.user_id,
                user_info: info.map(|i| i.to_string()),
                seq,
            },
        );
    }
}

/// Tells the other nodes how many sockets here subscribe to `channel` now
/// (for cluster-wide counts, occupancy and its webhooks).
fn announce_count(reg: &mut Registry, cx: &mut Ctx<'_>, app: AppIdx, channel: &str) {
    if !cx.cluster {
        return;
    }
    let seq = reg.peers.next_seq(cx.now);
    let state = &reg.apps[app];
    fanout::announce(
        cx,
        ClusterMessage::Subscribers {
            app_id: state.config.id.clone(),
            channel: channel.to_owned(),
            count: state.local_subscribers(channel),
            seq,
        },
    );
}

/// Removes `conn` from `channel` (no acknowledgement in either format).
pub(crate) fn unsubscribe(reg: &mut Registry, cx: &mut Ctx<'_>, conn: ConnId, channel: &str) {
    let Some(socket) = reg.sockets.get_mut(&conn) else {
        return;
    };
    let Some(user) = socket.channels.remove(channel) else {
        return;
    };
    let app = socket.app;
    leave(reg, cx, app, conn, channel, user.as_deref());
}

/// Removes `conn` from one channel; the last socket of a presence user
/// anywhere makes the others hear that the member left.
fn leave(
    reg: &mut Registry,
    cx: &mut Ctx<'_>,
    app: AppIdx,
    conn: ConnId,
    channel: &str,
    user: Option<&str>,
) {
    cx.metrics.channel_subscriptions = cx.metrics.channel_subscriptions.saturating_sub(1);
    let was_occupied = reg.apps[app].occupied(channel);
    let departure = reg.leave(app, channel, conn, user);
    if let (Some(departure), Some(user)) = (departure, user) {
        if departure.gone {
            let removed = MemberEvent::Removed { user_id: user };
            fanout::member(&reg.apps[app], cx, channel, removed, None);
            let event = WebhookEvent::MemberRemoved {
                channel: channel.to_owned(),
                user_id: user.to_owned(),
            };
            webhooks::report(reg, app, event, cx.now);
        }
        if departure.last_here {
            let seq = reg.peers.next_seq(cx.now);
            fanout::announce(
                cx,
                ClusterMessage::MemberLeft {
                    app_id: reg.apps[app].config.id.clone(),
                    channel: channel.to_owned(),
                    user_id: user.to_owned(),
                    seq,
                },
            );
        }
    }
    announce_count(reg, cx, app, channel);
    if was_occupied && !reg.apps[app].occupied(channel) {
        let channel = channel.to_owned();
        webhooks::report(reg, app, WebhookEvent::Vacated { channel }, cx.now);
    }
}

/// The socket is gone: leave every channel and forget its `socket_id`.
pub(crate) fn closed(reg: &mut Registry, cx: &mut Ctx<'_>, conn: ConnId) {
    let Some(socket) = reg.sockets.remove(&conn) else {
        return;
    };
    for (channel, user) in &socket.channels {
        leave(reg, cx, socket.app, conn, channel, user.as_deref());
    }
    let app = &mut reg.apps[socket.app];
    app.sockets_by_id.remove(&socket.socket_id);
    if let Some(n) = cx.metrics.channel_connections.get_mut(&app.config.id) {
        *n = n.saturating_sub(1);
    }
}
