//! One channel engine, two wire formats: what each socket hears, in its
//! own protocol's framing. Socket-scoped frames are built for one socket;
//! fan-out frames are built at most once per wire format and shared.

use serde_json::Value;

use crate::io::{ChannelProtocol, SharedFrame};

use super::frames;
use super::pusher;
use super::socket::SubscribeError;

/// The framing a subscriber reads fan-out messages in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Codec {
    /// pubb (either acknowledgement mode).
    Pubb,
    /// Pusher protocol 7.
    Pusher,
}

impl Codec {
    /// The framing of a socket speaking `protocol`.
    pub(crate) fn of(protocol: ChannelProtocol) -> Codec {
        match protocol {
            ChannelProtocol::V2 | ChannelProtocol::Legacy => Codec::Pubb,
            ChannelProtocol::Pusher => Codec::Pusher,
        }
    }
}

/// A presence change every subscriber of a channel hears.
#[derive(Debug, Clone, Copy)]
pub(crate) enum MemberEvent<'a> {
    /// A new member, with its `user_info` if it has one.
    Added {
        /// The user.
        user_id: &'a str,
        /// Its `user_info`.
        info: Option<&'a Value>,
    },
    /// A member left (its last socket anywhere).
    Removed {
        /// The user.
        user_id: &'a str,
    },
}

impl MemberEvent<'_> {
    /// The frame of this event on `channel` in `codec`.
    pub(crate) fn render(&self, codec: Codec, channel: &str) -> SharedFrame {
        match (*self, codec) {
            (MemberEvent::Added { user_id, info }, Codec::Pubb) => {
                frames::member_added(channel, user_id, info)
            }
            (MemberEvent::Added { user_id, info }, Codec::Pusher) => {
                pusher::frames::member_added(channel, user_id, info)
            }
            (MemberEvent::Removed { user_id }, Codec::Pubb) => {
                frames::member_removed(channel, user_id)
            }
            (MemberEvent::Removed { user_id }, Codec::Pusher) => {
                pusher::frames::member_removed(channel, user_id)
            }
        }
    }
}

/// The greeting with the socket's id and the Pong deadline in seconds.
pub(crate) fn connection_established(
    protocol: ChannelProtocol,
    socket_id: &str,
    activity_timeout_s: u64,
) -> SharedFrame {
    match protocol {
        ChannelProtocol::Pusher => {
            pusher::frames::connection_established(socket_id, activity_timeout_s)
        }
        _ => frames::connection_established(socket_id, activity_timeout_s),
    }
}

/// A plain subscription's acknowledgement.
pub(crate) fn subscription_succeeded(protocol: ChannelProtocol, channel: &str) -> SharedFrame {
    match protocol {
        ChannelProtocol::Pusher => pusher::frames::subscription_succeeded(channel),
        _ => frames::subscription_succeeded(protocol, channel),
    }
}

/// A new presence subscription's acknowledgement with the members' snapshot.
pub(crate) fn presence_succeeded(
    protocol: ChannelProtocol,
    channel: &str,
    snapshot: Value,
) -> SharedFrame {
    match protocol {
        ChannelProtocol::Pusher => pusher::frames::presence_succeeded(channel, &snapshot),
        _ => frames::presence_succeeded(protocol, channel, snapshot),
    }
}

/// A refused subscription; the socket stays open.
pub(crate) fn subscription_error(
    protocol: ChannelProtocol,
    channel: &str,
    err: &SubscribeError,
) -> SharedFrame {
    match protocol {
        ChannelProtocol::Pusher => pusher::frames::subscription_error(channel, err),
        _ => frames::subscription_error(channel, &err.to_string()),
    }
}
