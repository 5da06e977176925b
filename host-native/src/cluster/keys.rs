//! Where a deployment keeps its shared state in Redis. Every key starts
//! with the deployment's prefix, so deployments (and tests) sharing one
//! Redis never meet.
//!
//! | key | type | holds |
//! |---|---|---|
//! | `{prefix}:bus` | pub/sub channel | every node's [`Envelope`](bubble_core::cluster::Envelope)s |
//! | `{prefix}:probe:{node}` | pub/sub channel | the node's probes to itself |
//! | `{prefix}:node:{node}` | string with expiry | the node is alive |
//! | `{prefix}:nodes` | set | nodes that may hold presence rows |
//! | `{prefix}:presence:{node}` | hash | the node's presence rows: field `app␟channel␟user`, value `user_info` JSON or empty |
//! | `{prefix}:reap:{node}` | string with expiry | which node removes a gone node's rows |
//! | `{prefix}:idem:{app}:{key}` | string with expiry | a publication's `Idempotency-Key` claim |

use bubble_core::cluster::PresenceEntry;

/// The separator of a presence field's parts (ASCII unit separator: no
/// app id, channel name or user id the engine accepts contains it).
const SEPARATOR: char = '\u{1f}';

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

    /// The set of nodes that may hold presence rows.
    pub(crate) fn nodes(&self) -> String {
        format!("{}:nodes", self.prefix)
    }

    /// `node`'s presence rows.
    pub(crate) fn presence(&self, node: &str) -> String {
        format!("{}:presence:{node}", self.prefix)
    }

    /// The claim to remove gone `node`'s rows.
    pub(crate) fn reap(&self, node: &str) -> String {
        format!("{}:reap:{node}", self.prefix)
    }

    /// A publication key's claim.
    pub(crate) fn idempotency(&self, app_id: &str, key: &str) -> String {
        format!("{}:idem:{app_id}:{key}", self.prefix)
    }
}

/// A presence row's field.
pub(crate) fn presence_field(app_id: &str, channel: &str, user_id: &str) -> String {
    format!("{app_id}{SEPARATOR}{channel}{SEPARATOR}{user_id}")
}

/// A presence row's value: the `user_info` JSON, or empty.
pub(crate) fn presence_value(user_info: Option<&str>) -> &str {
    user_info.unwrap_or_default()
}

/// Reads one of `node`'s rows; `None` for a malformed field.
pub(crate) fn presence_entry(node: &str, field: &str, value: &str) -> Option<PresenceEntry> {
    let mut parts = field.splitn(3, SEPARATOR);
    let (app_id, channel, user_id) = (parts.next()?, parts.next()?, parts.next()?);
    Some(PresenceEntry {
        node: node.to_owned(),
        app_id: app_id.to_owned(),
        channel: channel.to_owned(),
        user_id: user_id.to_owned(),
        user_info: (!value.is_empty()).then(|| value.to_owned()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presence_rows_round_trip() {
        let field = presence_field("app-1", "presence-room", "user:42");
        let entry = presence_entry("n1", &field, r#"{"name":"Alex"}"#).unwrap();
        assert_eq!(
            (
                entry.app_id.as_str(),
                entry.channel.as_str(),
                entry.user_id.as_str()
            ),
            ("app-1", "presence-room", "user:42")
        );
        assert_eq!(entry.user_info.as_deref(), Some(r#"{"name":"Alex"}"#));
        assert_eq!(presence_entry("n1", &field, "").unwrap().user_info, None);
        assert_eq!(presence_entry("n1", "no separators", ""), None);
    }

    #[test]
    fn keys_live_under_the_prefix() {
        let keys = Keys::new("bubble:t1");
        assert_eq!(keys.bus(), "bubble:t1:bus");
        assert_eq!(keys.idempotency("app-1", "k"), "bubble:t1:idem:app-1:k");
    }
}
