//! Pusher commands on a channel socket: the same subscriptions as pubb
//! sockets, plus `pusher:ping` and client events.

use serde_json::Value;

use crate::ctx::Ctx;
use crate::ids::ConnId;
use crate::io::Output;

use super::commands::{self, Command};
use super::error::PusherError;
use super::frames;
use super::webhooks::{self, WebhookEvent};
use crate::channels::fanout;
use crate::channels::frames as pubb_frames;
use crate::channels::names::ChannelKind;
use crate::channels::publish::{json_len, MAX_PUBLISH_NAME_CHARS};
use crate::channels::registry::Registry;
use crate::channels::socket;

/// Client events a socket may send per [`CLIENT_EVENT_WINDOW_MS`] (Pusher: 10/s).
pub(crate) const CLIENT_EVENT_RATE: u32 = 10;
/// The window of [`CLIENT_EVENT_RATE`].
pub(crate) const CLIENT_EVENT_WINDOW_MS: u64 = 1000;

/// One text message of a Pusher socket (its size and the command rate are
/// checked already).
pub(crate) fn command(reg: &mut Registry, cx: &mut Ctx<'_>, conn: ConnId, text: &str) {
    match commands::parse(text) {
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
        None => {}
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
    fanout::publish(app, cx, vec![channel.to_owned()], payload, socket_id);
    webhooks::note(reg, app_idx, event);
    Ok(())
}
