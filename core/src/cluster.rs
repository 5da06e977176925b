//! What the nodes of one deployment tell each other through the host's broker.
//!
//! A clustered engine ([`Config::cluster`](crate::Config::cluster)) emits
//! [`Output::Broadcast`](crate::Output::Broadcast) for everything another
//! node must learn: a thread it made durable, a channel publication it
//! accepted, a presence member its sockets brought or took away, how many
//! of its sockets subscribe to a channel. The host carries each message to
//! every other node (in order per sender), where it is fed in as
//! [`Input::Remote`](crate::Input::Remote) naming the sender. Threads need
//! only a hint: the receiver reads what changed from the shared store.
//! Channels are not stored: a publication carries its payload, and each
//! node's channel state (its presence members and subscriber counts,
//! [`NodeState`]) is kept per node by the broker, so a node can load
//! everyone else's ([`Input::ClusterState`](crate::Input::ClusterState))
//! after it starts or lost messages.
//!
//! State messages carry the sender's `seq`, which only grows (it starts
//! from the sender's clock at each start), and the broker keeps the `seq`
//! of the last message a node's rows reflect. A receiver applies a message
//! or a node's rows only when they are newer than what it holds of that
//! node, so a snapshot read before a message and delivered after it never
//! undoes it.
//!
//! Which node reports a channel's webhooks is decided by rendezvous
//! hashing of the channel over the nodes that report at the event's time
//! ([`owner_score`], and `core/src/channels/peers.rs`): every node computes
//! the same one from the same facts, so each event is reported once.
//!
//! Idempotency keys of publications are cluster-wide: the engine asks the
//! host to claim a key ([`Output::Claim`](crate::Output::Claim)), and only
//! the claim's winner publishes ([`Input::Claimed`](crate::Input::Claimed)).

use serde::{Deserialize, Serialize};

use crate::ids::ThreadId;

fn is_false(value: &bool) -> bool {
    !*value
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

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
        /// A Pusher client event of the socket `socket_id` (the node that
        /// reports the channel's webhooks reports it as `client_event`).
        #[serde(default, skip_serializing_if = "is_false")]
        client_event: bool,
        /// When the sender accepted it (its clock, ms): which node reports
        /// a client event depends on its time.
        #[serde(default, skip_serializing_if = "is_zero")]
        at: u64,
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
        /// The sender's state sequence number.
        seq: u64,
    },
    /// A user's last socket on the sender left presence `channel`.
    MemberLeft {
        /// The app's id.
        app_id: String,
        /// The presence channel.
        channel: String,
        /// The user.
        user_id: String,
        /// The sender's state sequence number.
        seq: u64,
    },
    /// The sender's sockets subscribed to `channel` are `count` now (0: it
    /// has none left).
    Subscribers {
        /// The app's id.
        app_id: String,
        /// The channel.
        channel: String,
        /// The sender's subscribed sockets.
        count: u64,
        /// The sender's state sequence number.
        seq: u64,
    },
    /// The app's backend asked (Pusher's `terminate_connections`) to close
    /// every socket of `user_id`, wherever it is connected.
    TerminateUser {
        /// The app's id.
        app_id: String,
        /// The user.
        user_id: String,
    },
    /// The sender started: it applied its first snapshot of the cluster
    /// ([`Input::ClusterState`](crate::Input::ClusterState)) and reports
    /// channels' webhooks from `since` (its clock, ms) on.
    Hello {
        /// When the sender becomes a reporter.
        since: u64,
    },
    /// `node` stopped (it no longer refreshes its liveness): every presence
    /// member and subscriber it held is gone.
    NodeGone {
        /// The node.
        node: String,
    },
}

impl ClusterMessage {
    /// The sender's state sequence number, for the messages that change
    /// what the broker keeps of the sender (its rows).
    pub fn seq(&self) -> Option<u64> {
        match self {
            ClusterMessage::MemberJoined { seq, .. }
            | ClusterMessage::MemberLeft { seq, .. }
            | ClusterMessage::Subscribers { seq, .. } => Some(*seq),
            _ => None,
        }
    }
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

/// A presence member of one node: `user_id` is a member of `channel` of
/// app `app_id` through at least one socket on that node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberRow {
    /// The app's id.
    pub app_id: String,
    /// The presence channel.
    pub channel: String,
    /// The user.
    pub user_id: String,
    /// The user's `user_info` as JSON text, if any.
    pub user_info: Option<String>,
}

/// How many sockets of one node subscribe to a channel (never 0: a node
/// without subscribers of a channel has no row for it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelRow {
    /// The app's id.
    pub app_id: String,
    /// The channel.
    pub channel: String,
    /// The node's subscribed sockets.
    pub count: u64,
}

/// What the broker holds of one node's channels: its rows as of its
/// message `seq`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodeState {
    /// The node's id.
    pub node: String,
    /// The `seq` of the last state message its rows reflect.
    pub seq: u64,
    /// When the node reports webhooks from (its `Hello`), if it said.
    pub since: Option<u64>,
    /// Its presence members.
    pub members: Vec<MemberRow>,
    /// Its subscriber counts.
    pub channels: Vec<ChannelRow>,
}

/// The rendezvous score of `node` for a channel: among the nodes that
/// report webhooks, the one with the highest score reports the channel's
/// (ties go to the greater node id). FNV-1a over the three names, then a SplitMix64 finish, so the
/// score is the same on every node and every platform.
pub fn owner_score(node: &str, app_id: &str, channel: &str) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in [node, app_id, channel] {
        for byte in part.bytes().chain([0xff]) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash = (hash ^ (hash >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    hash = (hash ^ (hash >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    hash ^ (hash >> 31)
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
