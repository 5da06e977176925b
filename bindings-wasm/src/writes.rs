//! [`Write`]s as JSON (their serde form in `bubble-core`), for the host's
//! storage: each write is an object with one key naming the operation, e.g.
//! `{"appendEvent":{"threadId":"t","seq":1,"idempotencyKey":null,"event":{…}}}`.
//! The event is embedded verbatim, so a log read back restores byte-identical
//! history.

use bubble_core::store::Write;

/// `writes` as a JSON array.
pub(crate) fn to_json(writes: &[Write]) -> Result<String, serde_json::Error> {
    serde_json::to_string(writes)
}

/// A JSON array of writes, as [`to_json`] produced it.
pub(crate) fn from_json(json: &str) -> Result<Vec<Write>, serde_json::Error> {
    serde_json::from_str(json)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bubble_core::ids::{PrincipalId, ThreadId};
    use bubble_core::model::Participant;
    use bubble_core::policy::Role;

    use super::*;

    fn thread(id: &str) -> ThreadId {
        ThreadId::parse(id).unwrap()
    }

    #[test]
    fn every_write_round_trips() {
        let alice = PrincipalId::new("alice");
        let writes = vec![
            Write::CreateThread {
                thread_id: thread("t"),
                parent_thread_id: Some(thread("p")),
                created_at: "2026-01-01T00:00:00.000Z".into(),
            },
            Write::SetTitle {
                thread_id: thread("t"),
                title: Some("Plans".into()),
            },
            Write::SetTitle {
                thread_id: thread("t"),
                title: None,
            },
            Write::AppendEvent {
                thread_id: thread("t"),
                seq: 1,
                idempotency_key: Some("k".into()),
                json: Arc::from(r#"{"seq":1,"threadId":"t","x":1.50}"#),
            },
            Write::PutGrant {
                thread_id: thread("t"),
                principal_id: alice.clone(),
                role: Role::Member,
            },
            Write::DeleteGrant {
                thread_id: thread("t"),
                principal_id: alice.clone(),
            },
            Write::PutParticipant {
                thread_id: thread("t"),
                participant: Participant {
                    principal_id: alice.clone(),
                    role: Role::Owner,
                    joined_at: "2026-01-01T00:00:00.000Z".into(),
                },
            },
            Write::DeleteParticipant {
                thread_id: thread("t"),
                principal_id: alice,
            },
        ];
        let json = to_json(&writes).unwrap();
        assert!(
            json.contains(r#""event":{"seq":1,"threadId":"t","x":1.50}"#),
            "{json}"
        );
        assert_eq!(from_json(&json).unwrap(), writes);
    }

    #[test]
    fn an_invalid_thread_id_is_refused() {
        let json = r#"[{"setTitle":{"threadId":"no spaces","title":null}}]"#;
        assert!(from_json(json).is_err());
    }
}
