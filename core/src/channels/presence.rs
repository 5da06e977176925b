//! Presence bookkeeping: one member per user id, however many sockets.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// The signed identity a presence subscription carries in `channel_data`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Identity {
    /// A nonempty user id.
    pub(crate) user_id: String,
    /// Optional user info (a JSON object).
    pub(crate) user_info: Option<Value>,
}

impl Identity {
    /// Reads `channel_data`: a JSON object with a nonempty string `user_id`
    /// and an optional object `user_info`. `None` when it is anything else.
    pub(crate) fn parse(channel_data: &str) -> Option<Identity> {
        let Ok(Value::Object(mut fields)) = serde_json::from_str::<Value>(channel_data) else {
            return None;
        };
        let user_id = match fields.remove("user_id") {
            Some(Value::String(id)) if !id.is_empty() => id,
            _ => return None,
        };
        let user_info = match fields.remove("user_info") {
            None | Some(Value::Null) => None,
            Some(info @ Value::Object(_)) => Some(info),
            Some(_) => return None,
        };
        Some(Identity { user_id, user_info })
    }
}

#[derive(Debug, Clone)]
struct Member {
    info: Option<Value>,
    sockets: u32,
}

/// The members of one presence channel.
#[derive(Debug, Clone, Default)]
pub(crate) struct Presence {
    members: BTreeMap<String, Member>,
}

impl Presence {
    /// One more socket of `identity` joined. Returns true when the user was
    /// not yet a member (the others get `pubb:member_added`). A later
    /// socket's `user_info` does not replace the first one's.
    pub(crate) fn join(&mut self, identity: &Identity) -> bool {
        match self.members.get_mut(&identity.user_id) {
            Some(member) => {
                member.sockets += 1;
                false
            }
            None => {
                let member = Member {
                    info: identity.user_info.clone(),
                    sockets: 1,
                };
                self.members.insert(identity.user_id.clone(), member);
                true
            }
        }
    }

    /// One socket of `user_id` left. Returns true when it was the user's
    /// last socket (the others get `pubb:member_removed`).
    pub(crate) fn leave(&mut self, user_id: &str) -> bool {
        let Some(member) = self.members.get_mut(user_id) else {
            return false;
        };
        member.sockets = member.sockets.saturating_sub(1);
        if member.sockets == 0 {
            self.members.remove(user_id);
            true
        } else {
            false
        }
    }

    /// The member's user info.
    pub(crate) fn info(&self, user_id: &str) -> Option<&Value> {
        self.members.get(user_id).and_then(|m| m.info.as_ref())
    }

    /// `{"ids":[…],"hash":{id: user_info|null},"count":n}`.
    pub(crate) fn snapshot(&self) -> Value {
        let ids: Vec<Value> = self
            .members
            .keys()
            .map(|id| Value::String(id.clone()))
            .collect();
        let hash: Map<String, Value> = self
            .members
            .iter()
            .map(|(id, m)| (id.clone(), m.info.clone().unwrap_or(Value::Null)))
            .collect();
        serde_json::json!({ "ids": ids, "hash": hash, "count": self.members.len() })
    }

    /// The number of distinct users.
    #[cfg(test)]
    pub(crate) fn count(&self) -> usize {
        self.members.len()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn id(user: &str, name: &str) -> Identity {
        Identity {
            user_id: user.into(),
            user_info: Some(json!({ "name": name })),
        }
    }

    #[test]
    fn parses_channel_data() {
        assert_eq!(
            Identity::parse(r#"{"user_id":"42","user_info":{"name":"Alex"}}"#),
            Some(id("42", "Alex"))
        );
        assert_eq!(
            Identity::parse(r#"{"user_id":"42"}"#),
            Some(Identity {
                user_id: "42".into(),
                user_info: None
            })
        );
        for bad in [
            "",
            "[]",
            r#"{"user_id":""}"#,
            r#"{"user_id":42}"#,
            r#"{"user_info":{}}"#,
            r#"{"user_id":"42","user_info":"Alex"}"#,
        ] {
            assert_eq!(Identity::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn one_member_per_user_across_sockets() {
        let mut p = Presence::default();
        assert!(p.join(&id("42", "Alex")));
        assert!(!p.join(&id("42", "Other name")));
        assert!(p.join(&id("43", "Sam")));
        assert_eq!(p.count(), 2);
        assert_eq!(p.info("42"), Some(&json!({ "name": "Alex" })));
        assert_eq!(
            p.snapshot(),
            json!({
                "ids": ["42", "43"],
                "hash": { "42": { "name": "Alex" }, "43": { "name": "Sam" } },
                "count": 2
            })
        );
        assert!(!p.leave("42"));
        assert!(p.leave("42"));
        assert!(!p.leave("42"));
        assert!(p.leave("43"));
        assert_eq!(p.count(), 0);
        assert_eq!(p.snapshot(), json!({ "ids": [], "hash": {}, "count": 0 }));
    }
}
