//! Pusher protocol 7 and Pusher's HTTP API: a second wire format over the
//! same channels (registry, presence, publications, limits, cluster
//! messages) as pubb. A publication through either HTTP API reaches the
//! subscribers of both wire formats; presence members are shared.
//!
//! Decisions where Pusher's documentation leaves room:
//! - Refusals happen after the upgrade, as Pusher does: the socket hears
//!   `pusher:error` and closes with its code (4001 unknown key, 4004 over
//!   `max_connections`, 4005 a path under `/app/` other than `/app/:key`,
//!   4006 a `protocol` that is not a number, 4007 a version other than 7,
//!   4008 none).
//! - More commands than `command_rate`: `pusher:error` 4100 and close 4100
//!   (reconnect after a back-off); subscriptions have their own allowance
//!   (`socket.rs`). A message over the size limit: close 1009.
//! - Heartbeat: a socket silent for `activity_timeout` (the heartbeat's
//!   `ping_interval_ms`, announced in `pusher:connection_established`)
//!   hears `pusher:ping` (and a WebSocket Ping); one still silent when
//!   `pong_timeout_ms` has passed since it was last heard hears
//!   `pusher:error` 4201 and closes with 4201.
//! - A server that shuts down sends `pusher:error` 4200 and closes with
//!   4200: pusher-js reconnects at once (to another node).
//! - A refused subscription: `pusher:error` with `code: null` and Pusher's
//!   message (`Invalid signature: Expected HMAC SHA256 hex digest of …, but
//!   got …`, `Invalid key in subscription auth data: '…'`), then
//!   `pusher:subscription_error` on the channel.
//! - Channel names are at most 164 characters (Pusher's limit) on Pusher
//!   sockets and in Pusher's HTTP API.
//! - `pusher:subscription_error` data is `{type, error, status}` (as
//!   pusher-js reads it): `AuthError`/401 for a bad signature or
//!   `channel_data`, `ChannelError`/400 for a bad name or the channel limit.
//! - Presence `channel_data` may carry a numeric `user_id` (Laravel's
//!   broadcaster writes one); it is kept as its decimal text.
//! - Client events (`client_events = true` on the app): on private and
//!   presence channels the socket is subscribed to, at most 10 per second
//!   (4301 above that), never echoed, delivered as a publication that
//!   leaves out the sender, so they cross the cluster like any other.
//!   Refusals are `pusher:error` with `code: null`; the socket stays open.
//! - `pusher:signin` is checked like a subscription signature (over
//!   `socket_id::user::user_data`); the signed-in user is what
//!   `terminate_connections` closes, with presence members of that id. A
//!   refused signin closes the socket with 4009. A signed-in socket may
//!   subscribe to its `#server-to-user-<id>` channel, where the `pusher`
//!   libraries' `sendToUser` publishes (no webhooks for it).

mod commands;
pub mod error;
mod events;
pub(crate) mod frames;
pub(crate) mod http;
mod signing;
mod socket;
pub(crate) mod webhooks;

use crate::ctx::Ctx;
use crate::ids::ConnId;
use crate::io::{CloseReason, Output};

pub use error::PusherError;
pub(crate) use socket::frame;

/// The string a signed `/apps/…` `GET` at `path` covers (for tests that
/// sign requests).
#[cfg(test)]
pub(crate) fn signing_for_tests(path: &str, query: &crate::edge::Query) -> String {
    signing::string_to_sign("GET", path, query)
}

/// The channel a signed-in user's sockets hear `sendToUser` events on;
/// only a socket signed in as that user may subscribe to it.
pub(crate) fn user_channel(user_id: &str) -> String {
    format!("#server-to-user-{user_id}")
}

/// `pusher:ping` for a socket silent for `activity_timeout`, with a
/// WebSocket Ping (a client may answer either).
pub(crate) fn idle_ping(cx: &mut Ctx<'_>, conn: ConnId) {
    cx.out.push_unfenced(Output::Send {
        conn,
        frame: frames::ping(),
    });
    cx.out.push_unfenced(Output::Ping { conn });
}

/// Sends `err` and closes the socket with its code.
pub(crate) fn refuse(cx: &mut Ctx<'_>, conn: ConnId, err: &PusherError) {
    cx.out.push_unfenced(Output::Send {
        conn,
        frame: frames::error(err),
    });
    if let Some(code) = err.close_code() {
        cx.out.push_unfenced(Output::Close {
            conn,
            reason: CloseReason::Pusher(code),
        });
    }
}
