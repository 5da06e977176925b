//! The JSON the adapter exchanges with the host's storage: `persist` batches
//! going out, read results coming back. It is the core's serde form with two
//! changes that keep it lossless through JavaScript:
//!
//! - version tokens (`expect.version`, `record.version`) are decimal strings,
//!   since they use 63 bits and a JavaScript number holds 53;
//! - an appended event is its JSON text (`appendEvent.event` is a string),
//!   so the host stores and returns it byte for byte without parsing it.
//!
//! Read results name their kind, matching the query's:
//! `{"events":[<event>,…]}`, `{"event":<event>|null}`,
//! `{"thread":<record>|null}`, `{"threads":[<record>,…]}`, where `<event>` is
//! a stored event's JSON (its `seq` is read from it) and `<record>` a thread
//! record as a `persist` output carried it.

use std::sync::Arc;

use bubble_core::ids::{PrincipalId, ThreadId};
use bubble_core::model::{Participant, StoredEvent};
use bubble_core::policy::Role;
use bubble_core::store::{Batch, ReadResult, ThreadRecord, Version, Write};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::value::RawValue;

/// `batch` as the JSON of a `persist` output's `writes`.
pub(crate) fn batch_json(batch: &Batch) -> Result<String, serde_json::Error> {
    let threads: Vec<Group<'_>> = batch
        .threads
        .iter()
        .map(|g| Group {
            thread_id: &g.thread_id,
            expect: g.expect.map(Expect),
            record: Record(&g.record),
            writes: g.writes.iter().map(WriteOut::from).collect(),
        })
        .collect();
    serde_json::to_string(&BatchOut { threads })
}

/// A read result as the host's storage answered it.
pub(crate) fn read_result(json: &str) -> Result<ReadResult, serde_json::Error> {
    Ok(match serde_json::from_str(json)? {
        ResultIn::Events(events) => {
            ReadResult::Events(events.into_iter().map(event).collect::<Result<_, _>>()?)
        }
        ResultIn::Event(found) => ReadResult::Event(found.map(event).transpose()?),
        ResultIn::Thread(found) => ReadResult::Thread(found.map(|r| r.0)),
        ResultIn::Threads(records) => {
            ReadResult::Threads(records.into_iter().map(|r| r.0).collect())
        }
    })
}

fn event(raw: &RawValue) -> Result<StoredEvent, serde_json::Error> {
    #[derive(Deserialize)]
    struct Seq {
        seq: u64,
    }
    let Seq { seq } = serde_json::from_str(raw.get())?;
    Ok(StoredEvent {
        seq,
        json: Arc::from(raw.get()),
    })
}

#[derive(Serialize)]
struct BatchOut<'a> {
    threads: Vec<Group<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Group<'a> {
    thread_id: &'a ThreadId,
    expect: Option<Expect>,
    record: Record<'a>,
    writes: Vec<WriteOut<'a>>,
}

/// `{headSeq, version}` with the version as a string.
struct Expect(Version);

impl Serialize for Expect {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Out {
            head_seq: u64,
            version: String,
        }
        Out {
            head_seq: self.0.head_seq,
            version: self.0.version.to_string(),
        }
        .serialize(s)
    }
}

/// A thread record with its version as a string (both directions).
#[derive(Serialize, Deserialize)]
#[serde(remote = "ThreadRecord", rename_all = "camelCase", deny_unknown_fields)]
struct RecordDef {
    thread_id: ThreadId,
    parent_thread_id: Option<ThreadId>,
    title: Option<String>,
    created_at: String,
    head_seq: u64,
    #[serde(with = "token")]
    version: u64,
    grants: Vec<(PrincipalId, Role)>,
    participants: Vec<Participant>,
}

struct Record<'a>(&'a ThreadRecord);

impl Serialize for Record<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        RecordDef::serialize(self.0, s)
    }
}

#[derive(Deserialize)]
struct RecordIn(#[serde(with = "RecordDef")] ThreadRecord);

/// A write as the core serializes it, except an append's event, which is
/// its JSON text.
#[derive(Serialize)]
#[serde(untagged)]
enum WriteOut<'a> {
    #[serde(rename_all = "camelCase")]
    Append {
        append_event: Append<'a>,
    },
    Other(&'a Write),
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Append<'a> {
    thread_id: &'a ThreadId,
    seq: u64,
    idempotency_key: Option<&'a str>,
    event: &'a str,
}

impl<'a> From<&'a Write> for WriteOut<'a> {
    fn from(write: &'a Write) -> WriteOut<'a> {
        match write {
            Write::AppendEvent {
                thread_id,
                seq,
                idempotency_key,
                json,
            } => WriteOut::Append {
                append_event: Append {
                    thread_id,
                    seq: *seq,
                    idempotency_key: idempotency_key.as_deref(),
                    event: json,
                },
            },
            other => WriteOut::Other(other),
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
enum ResultIn<'a> {
    Events(#[serde(borrow)] Vec<&'a RawValue>),
    Event(#[serde(borrow)] Option<&'a RawValue>),
    Thread(Option<RecordIn>),
    Threads(Vec<RecordIn>),
}

/// A version token as a decimal string.
mod token {
    use super::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(version: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(version)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use bubble_core::store::ThreadWrites;

    use super::*;

    fn thread(id: &str) -> ThreadId {
        ThreadId::parse(id).unwrap()
    }

    fn record() -> ThreadRecord {
        ThreadRecord {
            thread_id: thread("t"),
            parent_thread_id: Some(thread("p")),
            title: Some("Plans".into()),
            created_at: "2026-01-01T00:00:00.000Z".into(),
            head_seq: 1,
            version: (1 << 62) + 1,
            grants: vec![(PrincipalId::new("bob"), Role::Member)],
            participants: vec![Participant {
                principal_id: PrincipalId::new("alice"),
                role: Role::Owner,
                joined_at: "2026-01-01T00:00:00.000Z".into(),
            }],
        }
    }

    #[test]
    fn a_batch_keeps_versions_and_events_exact() {
        let event = r#"{"seq":1,"threadId":"t","x":1.50,"n":12345678901234567890}"#;
        let batch = Batch {
            threads: vec![ThreadWrites {
                thread_id: thread("t"),
                expect: Some(Version {
                    head_seq: 0,
                    version: u64::MAX >> 1,
                }),
                record: record(),
                writes: vec![
                    Write::SetTitle {
                        thread_id: thread("t"),
                        title: Some("Plans".into()),
                    },
                    Write::AppendEvent {
                        thread_id: thread("t"),
                        seq: 1,
                        idempotency_key: Some("k".into()),
                        json: Arc::from(event),
                    },
                ],
            }],
        };
        let json: serde_json::Value = serde_json::from_str(&batch_json(&batch).unwrap()).unwrap();
        let group = &json["threads"][0];
        assert_eq!(group["threadId"], "t");
        assert_eq!(
            group["expect"],
            serde_json::json!({"headSeq": 0, "version": "9223372036854775807"})
        );
        assert_eq!(group["record"]["version"], "4611686018427387905");
        assert_eq!(
            group["record"]["grants"][0],
            serde_json::json!(["bob", "member"])
        );
        assert_eq!(group["writes"][0]["setTitle"]["title"], "Plans");
        let append = &group["writes"][1]["appendEvent"];
        assert_eq!(append["event"], event, "the event is its JSON text");
        assert_eq!(append["idempotencyKey"], "k");
        assert_eq!(append["seq"], 1);
    }

    #[test]
    fn results_read_back_what_a_batch_carried() {
        let batch = Batch {
            threads: vec![ThreadWrites {
                thread_id: thread("t"),
                expect: None,
                record: record(),
                writes: vec![],
            }],
        };
        let json: serde_json::Value = serde_json::from_str(&batch_json(&batch).unwrap()).unwrap();
        let stored = json["threads"][0]["record"].to_string();
        assert_eq!(
            read_result(&format!(r#"{{"thread":{stored}}}"#)).unwrap(),
            ReadResult::Thread(Some(record()))
        );
        assert_eq!(
            read_result(&format!(r#"{{"threads":[{stored},{stored}]}}"#)).unwrap(),
            ReadResult::Threads(vec![record(), record()])
        );
        assert_eq!(
            read_result(r#"{"thread":null}"#).unwrap(),
            ReadResult::Thread(None)
        );

        let event = r#"{"seq":7,"x":1.50}"#;
        let expected = StoredEvent {
            seq: 7,
            json: Arc::from(event),
        };
        assert_eq!(
            read_result(&format!(r#"{{"events":[{event}]}}"#)).unwrap(),
            ReadResult::Events(vec![expected.clone()])
        );
        assert_eq!(
            read_result(&format!(r#"{{"event":{event}}}"#)).unwrap(),
            ReadResult::Event(Some(expected))
        );
        assert_eq!(
            read_result(r#"{"event":null}"#).unwrap(),
            ReadResult::Event(None)
        );
    }

    #[test]
    fn malformed_results_are_refused() {
        for bad in [
            r#"{"events":[{"type":"no seq"}]}"#,
            r#"{"thread":{"threadId":"no spaces"}}"#,
            r#"{"records":[]}"#,
            r#"[]"#,
        ] {
            assert!(read_result(bad).is_err(), "{bad}");
        }
    }
}
