//! [`Write`]s as JSON, for the host's storage: each write is an object with
//! one key naming the operation, e.g.
//! `{"appendEvent":{"threadId":"t","seq":1,"idempotencyKey":null,"event":{…}}}`.
//! The event is embedded verbatim, so a log read back restores byte-identical
//! history.

use std::sync::Arc;

use bubble_core::ids::{PrincipalId, ThreadId};
use bubble_core::model::Participant;
use bubble_core::policy::Role;
use bubble_core::store::Write;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

#[derive(Serialize, Deserialize)]
#[serde(
    rename_all = "camelCase",
    rename_all_fields = "camelCase",
    deny_unknown_fields
)]
enum WriteJson {
    CreateThread {
        thread_id: ThreadId,
        parent_thread_id: Option<ThreadId>,
        created_at: String,
    },
    SetTitle {
        thread_id: ThreadId,
        title: Option<String>,
    },
    AppendEvent {
        thread_id: ThreadId,
        seq: u64,
        idempotency_key: Option<String>,
        event: Box<RawValue>,
    },
    PutGrant {
        thread_id: ThreadId,
        principal_id: PrincipalId,
        role: Role,
    },
    DeleteGrant {
        thread_id: ThreadId,
        principal_id: PrincipalId,
    },
    PutParticipant {
        thread_id: ThreadId,
        participant: Participant,
    },
    DeleteParticipant {
        thread_id: ThreadId,
        principal_id: PrincipalId,
    },
}

impl WriteJson {
    fn from_write(w: &Write) -> Result<WriteJson, serde_json::Error> {
        Ok(match w.clone() {
            Write::CreateThread {
                thread_id,
                parent_thread_id,
                created_at,
            } => WriteJson::CreateThread {
                thread_id,
                parent_thread_id,
                created_at,
            },
            Write::SetTitle { thread_id, title } => WriteJson::SetTitle { thread_id, title },
            Write::AppendEvent {
                thread_id,
                seq,
                idempotency_key,
                json,
            } => WriteJson::AppendEvent {
                thread_id,
                seq,
                idempotency_key,
                event: RawValue::from_string(json.to_string())?,
            },
            Write::PutGrant {
                thread_id,
                principal_id,
                role,
            } => WriteJson::PutGrant {
                thread_id,
                principal_id,
                role,
            },
            Write::DeleteGrant {
                thread_id,
                principal_id,
            } => WriteJson::DeleteGrant {
                thread_id,
                principal_id,
            },
            Write::PutParticipant {
                thread_id,
                participant,
            } => WriteJson::PutParticipant {
                thread_id,
                participant,
            },
            Write::DeleteParticipant {
                thread_id,
                principal_id,
            } => WriteJson::DeleteParticipant {
                thread_id,
                principal_id,
            },
        })
    }

    fn into_write(self) -> Write {
        match self {
            WriteJson::CreateThread {
                thread_id,
                parent_thread_id,
                created_at,
            } => Write::CreateThread {
                thread_id,
                parent_thread_id,
                created_at,
            },
            WriteJson::SetTitle { thread_id, title } => Write::SetTitle { thread_id, title },
            WriteJson::AppendEvent {
                thread_id,
                seq,
                idempotency_key,
                event,
            } => Write::AppendEvent {
                thread_id,
                seq,
                idempotency_key,
                json: Arc::from(event.get()),
            },
            WriteJson::PutGrant {
                thread_id,
                principal_id,
                role,
            } => Write::PutGrant {
                thread_id,
                principal_id,
                role,
            },
            WriteJson::DeleteGrant {
                thread_id,
                principal_id,
            } => Write::DeleteGrant {
                thread_id,
                principal_id,
            },
            WriteJson::PutParticipant {
                thread_id,
                participant,
            } => Write::PutParticipant {
                thread_id,
                participant,
            },
            WriteJson::DeleteParticipant {
                thread_id,
                principal_id,
            } => Write::DeleteParticipant {
                thread_id,
                principal_id,
            },
        }
    }
}

/// `writes` as a JSON array.
pub(crate) fn to_json(writes: &[Write]) -> Result<String, serde_json::Error> {
    let list = writes
        .iter()
        .map(WriteJson::from_write)
        .collect::<Result<Vec<_>, _>>()?;
    serde_json::to_string(&list)
}

/// A JSON array of writes, as [`to_json`] produced it.
pub(crate) fn from_json(json: &str) -> Result<Vec<Write>, serde_json::Error> {
    let list: Vec<WriteJson> = serde_json::from_str(json)?;
    Ok(list.into_iter().map(WriteJson::into_write).collect())
}

#[cfg(test)]
mod tests {
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
