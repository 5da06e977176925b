//! Presence bookkeeping: one member per user id, however many sockets.

use std::collections::{BTreeMap, BTreeSet};

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

    /// Reads a Pusher socket's `channel_data`, as Pusher's libraries write
    /// it: `user_id` a nonempty string or a number (kept as its decimal
    /// text), `user_info` any JSON value but `null`.
    pub(crate) fn parse_pusher(channel_data: &str) -> Option<Identity> {
        let Ok(Value::Object(mut fields)) = serde_json::from_str::<Value>(channel_data) else {
            return None;
        };
        let user_id = match fields.remove("user_id") {
            Some(Value::String(id)) if !id.is_empty() => id,
            Some(Value::Number(n)) => n.to_string(),
            _ => return None,
        };
        let user_info = fields.remove("user_info").filter(|info| !info.is_null());
        Some(Identity { user_id, user_info })
    }
}

/// A member: present while it has a socket here or on another node.
#[derive(Debug, Clone)]
struct Member {
    info: Option<Value>,
    /// Sockets on this node.
    local: u32,
    /// Other nodes where the user has at least one socket.
    nodes: BTreeSet<String>,
}

impl Member {
    fn present(&self) -> bool {
        self.local > 0 || !self.nodes.is_empty()
    }
}

/// What a local join changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Arrival {
    /// The user's first socket on this node (other nodes must hear of it).
    pub(crate) first_here: bool,
    /// The user was no member anywhere: subscribers hear `member_added`.
    pub(crate) new_member: bool,
}

/// What a local leave changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Departure {
    /// The user's last socket on this node left (other nodes must hear of it).
    pub(crate) last_here: bool,
    /// The user is no member anywhere now: subscribers hear `member_removed`.
    pub(crate) gone: bool,
}

/// One presence channel's members, across sockets and nodes.
#[derive(Debug, Clone, Default)]
pub(crate) struct Presence {
    members: BTreeMap<String, Member>,
}

impl Presence {
    /// A socket of `identity` on this node joined.
    pub(crate) fn join(&mut self, identity: &Identity) -> Arrival {
        let member = self
            .members
            .entry(identity.user_id.clone())
            .or_insert_with(|| Member {
                info: identity.user_info.clone(),
                local: 0,
                nodes: BTreeSet::new(),
            });
        let new_member = !member.present();
        member.local += 1;
        Arrival {
            first_here: member.local == 1,
            new_member,
        }
    }

    /// A socket of `user_id` on this node left.
    pub(crate) fn leave(&mut self, user_id: &str) -> Departure {
        let unchanged = Departure {
            last_here: false,
            gone: false,
        };
        let Some(member) = self.members.get_mut(user_id) else {
            return unchanged;
        };
        if member.local == 0 {
            return unchanged;
        }
        member.local -= 1;
        let departure = Departure {
            last_here: member.local == 0,
            gone: !member.present(),
        };
        if departure.gone {
            self.members.remove(user_id);
        }
        departure
    }

    /// `user_id` has a socket on `node`; true when that makes a new member.
    pub(crate) fn join_remote(&mut self, node: &str, user_id: &str, info: Option<Value>) -> bool {
        let member = self
            .members
            .entry(user_id.to_owned())
            .or_insert_with(|| Member {
                info,
                local: 0,
                nodes: BTreeSet::new(),
            });
        let new_member = !member.present();
        member.nodes.insert(node.to_owned());
        new_member
    }

    /// `user_id` has no socket on `node` any more; true when the member is gone.
    pub(crate) fn leave_remote(&mut self, node: &str, user_id: &str) -> bool {
        let Some(member) = self.members.get_mut(user_id) else {
            return false;
        };
        if !member.nodes.remove(node) || member.present() {
            return false;
        }
        self.members.remove(user_id);
        true
    }

    /// Every `(node, user)` pair held for other nodes.
    pub(crate) fn remote_pairs(&self) -> Vec<(String, String)> {
        self.members
            .iter()
            .flat_map(|(user, m)| m.nodes.iter().map(|n| (n.clone(), user.clone())))
            .collect()
    }

    /// Users with a socket on this node, with their info.
    pub(crate) fn local_members(&self) -> impl Iterator<Item = (&str, Option<&Value>)> {
        self.members
            .iter()
            .filter(|(_, m)| m.local > 0)
            .map(|(id, m)| (id.as_str(), m.info.as_ref()))
    }

    /// True when nobody is a member.
    pub(crate) fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// A member's `user_info`.
    pub(crate) fn info(&self, user_id: &str) -> Option<&Value> {
        self.members.get(user_id).and_then(|m| m.info.as_ref())
    }

    /// The `presence` object of a presence subscription's acknowledgement.
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

    /// How many members the channel has.
    pub(crate) fn count(&self) -> usize {
        self.members.len()
    }

    /// The members' user ids, in order.
    pub(crate) fn user_ids(&self) -> impl Iterator<Item = &str> {
        self.members.keys().map(String::as_str)
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
    fn parses_pusher_channel_data() {
        assert_eq!(
            Identity::parse_pusher(r#"{"user_id":42,"user_info":"Alex"}"#),
            Some(Identity {
                user_id: "42".into(),
                user_info: Some(json!("Alex"))
            })
        );
        assert_eq!(
            Identity::parse_pusher(r#"{"user_id":"a"}"#).map(|i| i.user_id),
            Some("a".into())
        );
        for bad in ["", r#"{"user_id":""}"#, r#"{"user_id":true}"#, "[]"] {
            assert_eq!(Identity::parse_pusher(bad), None, "{bad}");
        }
    }

    #[test]
    fn one_member_per_user_across_sockets() {
        let mut p = Presence::default();
        let first = Arrival {
            first_here: true,
            new_member: true,
        };
        assert_eq!(p.join(&id("42", "Alex")), first);
        assert_eq!(
            p.join(&id("42", "Other name")),
            Arrival {
                first_here: false,
                new_member: false
            }
        );
        assert_eq!(p.join(&id("43", "Sam")), first);
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
        let last = Departure {
            last_here: true,
            gone: true,
        };
        assert_eq!(
            p.leave("42"),
            Departure {
                last_here: false,
                gone: false
            }
        );
        assert_eq!(p.leave("42"), last);
        assert_eq!(
            p.leave("42"),
            Departure {
                last_here: false,
                gone: false
            }
        );
        assert_eq!(p.leave("43"), last);
        assert!(p.is_empty());
        assert_eq!(p.snapshot(), json!({ "ids": [], "hash": {}, "count": 0 }));
    }

    #[test]
    fn one_member_per_user_across_nodes() {
        let mut p = Presence::default();
        assert!(p.join_remote("n2", "42", Some(json!({ "name": "Alex" }))));
        assert!(!p.join_remote("n3", "42", None));
        assert!(
            !p.join_remote("n3", "42", None),
            "a repeated join is idempotent"
        );
        assert_eq!(
            p.join(&id("42", "Alex")),
            Arrival {
                first_here: true,
                new_member: false
            }
        );
        assert!(!p.leave_remote("n2", "42"));
        assert_eq!(
            p.leave("42"),
            Departure {
                last_here: true,
                gone: false
            },
            "still on n3"
        );
        assert_eq!(p.remote_pairs(), vec![("n3".to_owned(), "42".to_owned())]);
        assert!(!p.leave_remote("n2", "42"), "not on n2 any more");
        assert!(p.leave_remote("n3", "42"));
        assert!(p.is_empty());
    }
}
