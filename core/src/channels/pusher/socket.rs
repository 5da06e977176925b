//! Pusher commands on a channel socket: the same subscriptions as pubb
//! sockets, plus `pusher:ping` and client events.

use serde_json::Value;
use subtle::ConstantTimeEq;

use crate::ctx::Ctx;
use crate::ids::ConnId;
use crate::io::{Output, WsFrame};

use super::commands::{self, Command};
use super::error::PusherError;
use super::frames;
use super::signing::hmac_hex;
use super::webhooks::{self, WebhookEvent};
use crate::channels::fanout;
use crate::channels::frames as pubb_frames;
use crate::channels::names::ChannelKind;
use crate::channels::publish::MAX_PUBLISH_NAME_CHARS;
use crate::channels::registry::Registry;
use crate::channels::socket;
use crate::json::json_len;

/// Client events a socket may send per [`CLIENT_EVENT_WINDOW_MS`] (Pusher: 10/s).
pub(crate) const CLIENT_EVENT_RATE: u32 = 10;
/// The window of [`CLIENT_EVENT_RATE`].
pub(crate) const CLIENT_EVENT_WINDOW_MS: u64 = 1000;

/// One message of a Pusher socket (its size is checked already): the
/// command rate, then the command. `pusher:subscribe` and
/// `pusher:unsubscribe` count against their own allowance, `max_channels +
/// command_rate` per window, so a client that resubscribes to all its
/// channels at once after a reconnection is not refused; `pusher:pong` is
/// not counted; everything else counts against `command_rate`. Over either:
/// `pusher:error` 4100 and close 4100.
pub(crate) fn frame(reg: &mut Registry, cx: &mut Ctx<'_>, conn: ConnId, frame: WsFrame<'_>) {
    let command = match frame {
        WsFrame::Text(text) => commands::parse(text),
        WsFrame::Binary(_) => None,
    };
    let Some(socket) = reg.sockets.get_mut(&conn) else {
        return;
    };
    let (limit, window_ms) = (cx.limits.command_rate, cx.limits.command_rate_window_ms);
    let allowed = match &command {
        Some(Command::Pong) => true,
        Some(Command::Subscribe { .. } | Command::Unsubscribe { .. }) => {
            let channels = u32::try_from(cx.limits.max_channels).unwrap_or(u32::MAX);
            let limit = limit.saturating_add(channels);
            socket.subscription_rate.allow(cx.now, limit, window_ms)
        }
        _ => socket.rate.allow(cx.now, limit, window_ms),
    };
    if !allowed {
        socket.closing = true;
        return super::refuse(cx, conn, &PusherError::OverCapacity);
    }
    match command {
        Some(Command::Subscribe {
            channel,
            auth,
            channel_data,
        }) => socket::subscribe(
            reg,
            cx,
            conn,
            &channel,
            auth.as_deref(),
            channel_data.as_deref(),
        ),
        Some(Command::Unsubscribe { channel }) => socket::unsubscribe(reg, cx, conn, &channel),
        Some(Command::Ping) => cx.out.push_unfenced(Output::Send {
            conn,
            frame: frames::pong(),
        }),
        Some(Command::Signin { auth, user_data }) => signin(reg, cx, conn, &auth, &user_data),
        Some(Command::ClientEvent {
            channel,
            name,
            data,
        }) => {
            if let Err(err) = client_event(reg, cx, conn, &channel, &name, &data) {
                cx.out.push_unfenced(Output::Send {
                    conn,
                    frame: frames::error(&err),
                });
            }
        }
        Some(Command::Pong) | None => {}
    }
}

/// Relays a client event to the channel's other subscribers, on this node
/// and the others, as a publication that leaves out the sender.
fn client_event(
    reg: &mut Registry,
    cx: &mut Ctx<'_>,
    conn: ConnId,
    channel: &str,
    name: &str,
    data: &Value,
) -> Result<(), PusherError> {
    let Some(socket) = reg.sockets.get_mut(&conn) else {
        return Ok(());
    };
    let app = &reg.apps[socket.app];
    if !app.config.client_events {
        return Err(PusherError::ClientEventsDisabled);
    }
    if !ChannelKind::of(channel).is_restricted() {
        return Err(PusherError::ClientEventPublic);
    }
    let Some(user) = socket.channels.get(channel) else {
        return Err(PusherError::ClientEventNotSubscribed(channel.to_owned()));
    };
    if name.chars().count() > MAX_PUBLISH_NAME_CHARS
        || json_len(data) > cx.limits.max_publish_data_bytes
    {
        return Err(PusherError::ClientEventTooLarge);
    }
    if !socket
        .client_rate
        .allow(cx.now, CLIENT_EVENT_RATE, CLIENT_EVENT_WINDOW_MS)
    {
        return Err(PusherError::ClientEventRate);
    }
    let payload = pubb_frames::client_payload(name, data, user.as_deref());
    let event = WebhookEvent::ClientEvent {
        channel: channel.to_owned(),
        event: name.to_owned(),
        data: data.clone(),
        socket_id: socket.socket_id.clone(),
        user_id: user.clone(),
    };
    let socket_id = Some(socket.socket_id.clone());
    let app_idx = socket.app;
    let target = (vec![channel.to_owned()], payload);
    fanout::publish(app, cx, target, socket_id, true);
    webhooks::report(reg, app_idx, event, cx.now);
    Ok(())
}

/// `pusher:signin`: checks `auth` over `socket_id::user::user_data` and
/// remembers the user (for `terminate_connections`); a bad signin closes
/// the socket with 4009.
fn signin(reg: &mut Registry, cx: &mut Ctx<'_>, conn: ConnId, auth: &str, user_data: &str) {
    let Some(socket) = reg.sockets.get_mut(&conn) else {
        return;
    };
    let app = &reg.apps[socket.app].config;
    let signed = format!("{}::user::{user_data}", socket.socket_id);
    let expected = format!("{}:{}", app.key, hmac_hex(&app.secret, signed.as_bytes()));
    let signature_ok = bool::from(expected.as_bytes().ct_eq(auth.as_bytes()));
    let user_id = match serde_json::from_str::<Value>(user_data) {
        Ok(Value::Object(fields)) => match fields.get("id") {
            Some(Value::String(id)) if !id.is_empty() => Some(id.clone()),
            _ => None,
        },
        _ => None,
    };
    match (signature_ok, user_id) {
        (true, Some(id)) => {
            socket.user_id = Some(id);
            cx.out.push_unfenced(Output::Send {
                conn,
                frame: frames::signin_success(user_data),
            });
        }
        _ => {
            socket.closing = true;
            super::refuse(cx, conn, &PusherError::SigninRefused);
        }
    }
}
