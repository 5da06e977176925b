//! What the nodes of one deployment tell each other through the host's broker.
//!
//! A clustered engine ([`Config::cluster`](crate::Config::cluster)) emits
//! [`Output::Broadcast`](crate::Output::Broadcast) for everything another
//! node must learn: a thread it made durable, a channel publication it
//! accepted, a presence member its sockets brought or took away. The host
//! carries each message to every other node (in order per sender), where it
//! is fed in as [`Input::Remote`](crate::Input::Remote) naming the sender.
//! Threads need only a hint: the receiver reads what changed from the shared
//! store. Channels are not stored: a publication carries its payload, and
//! presence is kept per node by the broker ([`PresenceEntry`]) so a node can
//! load everyone else's members ([`Input::RemotePresence`](crate::Input::RemotePresence))
//! after it starts or lost messages.
//!
//! Idempotency keys of publications are cluster-wide: the engine asks the
//! host to claim a key ([`Output::Claim`](crate::Output::Claim)), and only
//! the claim's winner publishes ([`Input::Claimed`](crate::Input::Claimed)).

use serde::{Deserialize, Serialize};

use crate::ids::ThreadId;

/// One message from a node to the others.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "camelCase",
    rename_all_fields = "camelCase"
)]
pub enum ClusterMessage {
    /// The sender made writes to `thread_id` durable: its head is now
    /// `head_seq` at version `version`.
    ThreadChanged {
        /// The thread.
        thread_id: ThreadId,
        /// Its durable head.
        head_seq: u64,
        /// Its version token.
        version: u64,
    },
    /// The sender accepted a publication.
    Publication {
        /// The app's id.
        app_id: String,
        /// Target channels, without duplicates.
        channels: Vec<String>,
        /// The serialized `{event, data}` payload every delivery carries.
        payload: String,
        /// The publisher's socket to leave out (wherever it is connected).
        socket_id: Option<String>,
    },
    /// A user's first socket on the sender joined presence `channel`.
    MemberJoined {
        /// The app's id.
        app_id: String,
        /// The presence channel.
        channel: String,
        /// The user.
        user_id: String,
        /// The user's `user_info` as JSON text, if any.
        user_info: Option<String>,
    },
    /// A user's last socket on the sender left presence `channel`.
    MemberLeft {
        /// The app's id.
        app_id: String,
        /// The presence channel.
        channel: String,
        /// The user.
        user_id: String,
    },
    /// The sender's first subscriber of `channel` arrived (`occupied`), or
    /// its last one left. Sent only for apps with webhooks, so that
    /// `channel_occupied` and `channel_vacated` are reported once for the
    /// whole cluster.
    ChannelOccupancy {
        /// The app's id.
        app_id: String,
        /// The channel.
        channel: String,
        /// Whether the sender has subscribers of it now.
        occupied: bool,
        /// The sender reported the change to the app's webhooks (it knew
        /// of no other node holding the channel).
        reported: bool,
    },
    /// The app's backend asked (Pusher's `terminate_connections`) to close
    /// every socket of `user_id`, wherever it is connected.
    TerminateUser {
        /// The app's id.
        app_id: String,
        /// The user.
        user_id: String,
    },
    /// `node` stopped (it no longer refreshes its liveness): every presence
    /// member it held is gone from it.
    NodeGone {
        /// The node.
        node: String,
    },
}

/// A message with its sender, as the broker carries it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Envelope {
    /// The sender's node id.
    pub node: String,
    /// The message.
    pub message: ClusterMessage,
}

impl Envelope {
    /// The envelope's wire form (JSON).
    pub fn encode(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Reads an envelope; `None` for anything malformed.
    pub fn decode(raw: &[u8]) -> Option<Envelope> {
        serde_json::from_slice(raw).ok()
    }
}

/// One row of the cluster's presence table: `user_id` is a member of
/// `channel` of app `app_id` through at least one socket on `node`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PresenceEntry {
    /// The node holding the socket(s).
    pub node: String,
    /// The app's id.
    pub app_id: String,
    /// The presence channel.
    pub channel: String,
    /// The user.
    pub user_id: String,
    /// The user's `user_info` as JSON text, if any.
    pub user_info: Option<String>,
}

/// How the host's claim of a publication's idempotency key went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimOutcome {
    /// This node holds the key now: the publication goes out.
    Won,
    /// Another publication holds the key; its record (the `value` of the
    /// winning [`Output::Claim`](crate::Output::Claim)).
    Taken(String),
    /// The broker could not be asked: the node decides alone, with the keys
    /// it saw itself.
    Unavailable,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelopes_round_trip() {
        let thread = ThreadId::parse("t-1").unwrap();
        let envelope = Envelope {
            node: "n1".into(),
            message: ClusterMessage::ThreadChanged {
                thread_id: thread,
                head_seq: 3,
                version: 9,
            },
        };
        let wire = envelope.encode();
        assert_eq!(
            wire,
            r#"{"node":"n1","message":{"type":"threadChanged","threadId":"t-1","headSeq":3,"version":9}}"#
        );
        assert_eq!(Envelope::decode(wire.as_bytes()), Some(envelope));
        assert_eq!(Envelope::decode(b"{}"), None);
        assert_eq!(Envelope::decode(b"\xff"), None);
    }
}
