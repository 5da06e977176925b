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
use super::names::{is_valid_subscription_name, ChannelKind};
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
    NotAuthorized,
    /// A name outside `[A-Za-z0-9_\-=@,.;]{1,200}`.
    #[error("Invalid channel name")]
    InvalidChannel,
    /// The socket already holds the maximum number of channels.
    #[error("Channel limit exceeded ({0})")]
    TooManyChannels(usize),
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
    let (limit, window_ms) = (cx.limits.command_rate, cx.limits.command_rate_window_ms);
    if !socket.rate.allow(cx.now, limit, window_ms) {
        socket.closing = true;
        if socket.protocol == ChannelProtocol::Pusher {
            return pusher::refuse(cx, conn, &pusher::PusherError::OverCapacity);
        }
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
    if socket.protocol == ChannelProtocol::Pusher {
        return pusher::command(reg, cx, conn, text);
    }
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

fn reject(
    cx: &mut Ctx<'_>,
    conn: ConnId,
    protocol: ChannelProtocol,
    channel: &str,
    err: &SubscribeError,
) {
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
    use SubscribeError::NotAuthorized;
    let kind = ChannelKind::of(channel);
    if !kind.is_restricted() {
        return Ok(None);
    }
    let auth = auth.ok_or(NotAuthorized)?;
    let signed_data = match kind {
        ChannelKind::Presence => Some(channel_data.ok_or(NotAuthorized)?),
        _ => None,
    };
    let app = &reg.apps[socket.app].config;
    if !signature::verify(
        &app.key,
        &app.secret,
        &socket.socket_id,
        channel,
        signed_data,
        auth,
    ) {
        return Err(NotAuthorized);
    }
    match signed_data {
        Some(data) if socket.protocol == ChannelProtocol::Pusher => {
            Identity::parse_pusher(data).map(Some).ok_or(NotAuthorized)
        }
        Some(data) => Identity::parse(data).map(Some).ok_or(NotAuthorized),
        None => Ok(None),
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
    if !own_user_channel && !is_valid_subscription_name(channel) {
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
    if !reg.apps[app].channels.contains_key(channel) {
        webhooks::occupancy(reg, cx, app, channel, true);
    }
    match reg.join(app, channel, (conn, Codec::of(protocol)), identity.as_ref()) {
        Joined::Plain => {
            cx.out.push_unfenced(Output::Send {
                conn,
                frame: wire::subscription_succeeded(protocol, channel),
            });
        }
        Joined::Presence(arrival) => {
            let Some(presence) = reg.apps[app].presence.get(channel) else {
                return;
            };
            let frame = wire::presence_succeeded(protocol, channel, presence.snapshot());
            cx.out.push_unfenced(Output::Send { conn, frame });
            let Some(identity) = identity else {
                return;
            };
            let info = presence.info(&identity.user_id).cloned();
            if arrival.new_member {
                let event = WebhookEvent::MemberAdded {
                    channel: channel.to_owned(),
                    user_id: identity.user_id.clone(),
                };
                webhooks::note(reg, app, event);
                let added = MemberEvent::Added {
                    user_id: &identity.user_id,
                    info: info.as_ref(),
                };
                fanout::member(&reg.apps[app], cx, channel, added, Some(conn));
            }
            if arrival.first_here {
                fanout::announce(
                    cx,
                    ClusterMessage::MemberJoined {
                        app_id: reg.apps[app].config.id.clone(),
                        channel: channel.to_owned(),
                        user_id: identity.user_id,
                        user_info: info.map(|i| i.to_string()),
                    },
                );
            }
        }
    }
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
    let departure = reg.leave(app, channel, conn, user);
    let vacated = !reg.apps[app].channels.contains_key(channel);
    let (Some(departure), Some(user)) = (departure, user) else {
        if vacated {
            webhooks::occupancy(reg, cx, app, channel, false);
        }
        return;
    };
    if departure.gone {
        let event = WebhookEvent::MemberRemoved {
            channel: channel.to_owned(),
            user_id: user.to_owned(),
        };
        webhooks::note(reg, app, event);
        let removed = MemberEvent::Removed { user_id: user };
        fanout::member(&reg.apps[app], cx, channel, removed, None);
    }
    if vacated {
        webhooks::occupancy(reg, cx, app, channel, false);
    }
    if departure.last_here {
        fanout::announce(
            cx,
            ClusterMessage::MemberLeft {
                app_id: reg.apps[app].config.id.clone(),
                channel: channel.to_owned(),
                user_id: user.to_owned(),
            },
        );
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
