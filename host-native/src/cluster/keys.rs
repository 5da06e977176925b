//! Where a deployment keeps its shared state in Redis. Every key starts
//! with the deployment's prefix, so deployments (and tests) sharing one
//! Redis never meet.
//!
//! | key | type | holds |
//! |---|---|---|
//! | `{prefix}:bus` | pub/sub channel | every node's [`Envelope`](bubble_core::cluster::Envelope)s |
//! | `{prefix}:probe:{node}` | pub/sub channel | the node's probes to itself |
//! | `{prefix}:node:{node}` | string with expiry | the node is alive |
//! | `{prefix}:nodes` | set | nodes that may hold channel state |
//! | `{prefix}:state:{node}` | hash | the node's channel state: field `m␟app␟channel␟user` (a presence member, value its `user_info` JSON or empty), field `c␟app␟channel` (value its subscriber count), field `seq` (the `seq` of the last state message the fields reflect), field `since` (when the node reports webhooks from, ms) |
//! | `{prefix}:reap:{node}` | string with expiry | which node removes a gone node's state |
//! | `{prefix}:idem:{app}:{key}` | string with expiry | a publication's `Idempotency-Key` claim |

use bubble_core::cluster::{ChannelRow, MemberRow, NodeState};

/// The separator of a state field's parts (ASCII unit separator: no app
/// id, channel name or user id the engine accepts contains it).
const SEPARATOR: char = '\u{1f}';

/// The state field holding the `seq` its other fields reflect.
pub(crate) const SEQ_FIELD: &str = "seq";

/// The state field holding when the node reports webhooks from.
pub(crate) const SINCE_FIELD: &str = "since";

/// The key names of one deployment.
#[derive(Debug, Clone)]
pub(crate) struct Keys {
    prefix: String,
}

impl Keys {
    /// Keys under `prefix`.
    pub(crate) fn new(prefix: &str) -> Keys {
        Keys {
            prefix: prefix.to_owned(),
        }
    }

    /// The pub/sub channel every node publishes to and listens on.
    pub(crate) fn bus(&self) -> String {
        format!("{}:bus", self.prefix)
    }

    /// `node`'s probe channel.
    pub(crate) fn probe(&self, node: &str) -> String {
        format!("{}:probe:{node}", self.prefix)
    }

    /// `node`'s liveness key.
    pub(crate) fn alive(&self, node: &str) -> String {
        format!("{}:node:{node}", self.prefix)
    }

    /// The set of nodes that may hold channel state.
    pub(crate) fn nodes(&self) -> String {
        format!("{}:nodes", self.prefix)
    }

    /// `node`'s channel state.
    pub(crate) fn state(&self, node: &str) -> String {
        format!("{}:state:{node}", self.prefix)
    }

    /// The claim to remove gone `node`'s state.
    pub(crate) fn reap(&self, node: &str) -> String {
        format!("{}:reap:{node}", self.prefix)
    }

    /// A publication key's claim.
    pub(crate) fn idempotency(&self, app_id: &str, key: &str) -> String {
        format!("{}:idem:{app_id}:{key}", self.prefix)
    }
}

/// A presence member's field.
pub(crate) fn member_field(app_id: &str, channel: &str, user_id: &str) -> String {
    format!("m{SEPARATOR}{app_id}{SEPARATOR}{channel}{SEPARATOR}{user_id}")
}

/// A presence member's value: the `user_info` JSON, or empty.
pub(crate) fn member_value(user_info: Option<&str>) -> &str {
    user_info.unwrap_or_default()
}

/// A subscriber count's field.
pub(crate) fn count_field(app_id: &str, channel: &str) -> String {
    format!("c{SEPARATOR}{app_id}{SEPARATOR}{channel}")
}

/// The fields of `state`, as its hash should hold them (`seq` included).
pub(crate) fn state_fields(state: &NodeState) -> Vec<(String, String)> {
    let members = state.members.iter().map(|m| {
        let field = member_field(&m.app_id, &m.channel, &m.user_id);
        (field, member_value(m.user_info.as_deref()).to_owned())
    });
    let counts = state
        .channels
        .iter()
        .map(|c| (count_field(&c.app_id, &c.channel), c.count.to_string()));
    let seq = std::iter::once((SEQ_FIELD.to_owned(), state.seq.to_string()));
    let since = state
        .since
        .map(|since| (SINCE_FIELD.to_owned(), since.to_string()));
    members.chain(counts).chain(seq).chain(since).collect()
}

/// Reads `node`'s hash back; malformed fields are skipped.
pub(crate) fn node_state(
    node: &str,
    fields: impl IntoIterator<Item = (String, String)>,
) -> NodeState {
    let mut state = NodeState {
        node: node.to_owned(),
        ..NodeState::default()
    };
    for (field, value) in fields {
        if field == SEQ_FIELD {
            state.seq = value.parse().unwrap_or(0);
            continue;
        }
        if field == SINCE_FIELD {
            state.since = value.parse().ok();
            continue;
        }
        let parts: Vec<&str> = field.splitn(4, SEPARATOR).collect();
        match parts[..] {
            ["m", app_id, channel, user_id] => state.members.push(MemberRow {
                app_id: app_id.to_owned(),
                channel: channel.to_owned(),
                user_id: user_id.to_owned(),
                user_info: (!value.is_empty()).then(|| value.clone()),
            }),
            ["c", app_id, channel] => {
                if let Ok(count) = value.parse() {
                    state.channels.push(ChannelRow {
                        app_id: app_id.to_owned(),
                        channel: channel.to_owned(),
                        count,
                    });
                }
            }
            _ => {}
        }
    }
    state
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_round_trips() {
        let state = NodeState {
            node: "n1".into(),
            seq: 42,
            since: Some(7),
            members: vec![
                MemberRow {
                    app_id: "app-1".into(),
                    channel: "presence-room".into(),
                    user_id: "user:42".into(),
                    user_info: Some(r#"{"name":"Alex"}"#.into()),
                },
                MemberRow {
                    app_id: "app-1".into(),
                    channel: "presence-room".into(),
                    user_id: "u2".into(),
                    user_info: None,
                },
            ],
            channels: vec![ChannelRow {
                app_id: "app-1".into(),
                channel: "presence-room".into(),
                count: 3,
            }],
        };
        let mut fields = state_fields(&state);
        fields.push(("no separators".into(), String::new()));
        fields.push((count_field("app-1", "bad"), "x".into()));
        assert_eq!(node_state("n1", fields), state);
    }

    #[test]
    fn keys_live_under_the_prefix() {
        let keys = Keys::new("bubble:t1");
        assert_eq!(keys.bus(), "bubble:t1:bus");
        assert_eq!(keys.idempotency("app-1", "k"), "bubble:t1:idem:app-1:k");
    }
}
