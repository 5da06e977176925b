//! The storage seam.
//!
//! The engine decides every store rule (seq assignment, idempotency, thread
//! creation, title events, grants, participants) over its in-memory view of
//! thread metadata, and asks the host to make the result durable with
//! [`Output::Persist`](crate::Output::Persist) batches of [`Write`]s. A
//! backend therefore only stores and reads back: it never re-implements a rule.
//!
//! Reads of event history go through [`EventStore`], which the engine calls
//! synchronously and only for seqs that are already durable. At start-up the
//! host rebuilds the engine from [`Backend::load`].

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::ids::{PrincipalId, ThreadId};
use crate::model::{Participant, StoredEvent};
use crate::policy::Role;

/// A storage failure; the host logs the detail, peers see `internal`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("store failure: {0}")]
pub struct StoreError(pub String);

/// One durable mutation, decided by the engine. Its JSON form (for hosts
/// that keep a log of writes) names the operation as the one key, e.g.
/// `{"appendEvent":{"threadId":"t","seq":1,"idempotencyKey":null,"event":{…}}}`,
/// with the event embedded verbatim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(
    rename_all = "camelCase",
    rename_all_fields = "camelCase",
    deny_unknown_fields
)]
pub enum Write {
    /// A new, empty thread.
    CreateThread {
        /// The new thread.
        thread_id: ThreadId,
        /// Its parent, for a subthread.
        parent_thread_id: Option<ThreadId>,
        /// RFC 3339 creation time.
        created_at: String,
    },
    /// The title was set (`Some`) or cleared (`None`).
    SetTitle {
        /// The thread.
        thread_id: ThreadId,
        /// The new title.
        title: Option<String>,
    },
    /// An event at the next seq; `seq` is exactly the thread's head + 1.
    AppendEvent {
        /// The thread.
        thread_id: ThreadId,
        /// The event's seq.
        seq: u64,
        /// The append's idempotency key, if any (unique per thread).
        idempotency_key: Option<String>,
        /// The persisted event's JSON.
        #[serde(rename = "event", with = "raw_json")]
        json: Arc<str>,
    },
    /// A grant was created or replaced.
    PutGrant {
        /// The thread.
        thread_id: ThreadId,
        /// The grantee.
        principal_id: PrincipalId,
        /// The role.
        role: Role,
    },
    /// A grant was revoked.
    DeleteGrant {
        /// The thread.
        thread_id: ThreadId,
        /// The former grantee.
        principal_id: PrincipalId,
    },
    /// A participant row was added or replaced.
    PutParticipant {
        /// The thread.
        thread_id: ThreadId,
        /// The row.
        participant: Participant,
    },
    /// A participant row was removed.
    DeleteParticipant {
        /// The thread.
        thread_id: ThreadId,
        /// Who left.
        principal_id: PrincipalId,
    },
}

/// Everything but event bodies: what the engine needs to start.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Every thread, in any order.
    pub threads: Vec<ThreadRecord>,
}

/// One thread's durable metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ThreadRecord {
    /// The thread.
    pub thread_id: ThreadId,
    /// Its parent, for a subthread.
    pub parent_thread_id: Option<ThreadId>,
    /// Its title.
    pub title: Option<String>,
    /// RFC 3339 creation time.
    pub created_at: String,
    /// The highest durable seq (0 when empty).
    pub head_seq: u64,
    /// Grants on this thread.
    pub grants: Vec<(PrincipalId, Role)>,
    /// Participants, in join order.
    pub participants: Vec<Participant>,
}

/// The read side of a backend, called by the engine for durable seqs only.
pub trait EventStore {
    /// Events of `thread` with `from_seq <= seq <= through_seq`, ascending,
    /// at most `limit` of them.
    fn read_events(
        &self,
        thread: &ThreadId,
        from_seq: u64,
        through_seq: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, StoreError>;

    /// The event appended to `thread` with idempotency key `key`, if any.
    fn find_idempotent(
        &self,
        thread: &ThreadId,
        key: &str,
    ) -> Result<Option<StoredEvent>, StoreError>;
}

/// A complete backend: reads, start-up load, and durable batch writes.
pub trait Backend: EventStore {
    /// The metadata of every thread, to rebuild the engine.
    fn load(&self) -> Result<Snapshot, StoreError>;

    /// Applies `writes` atomically; on `Ok` they are durable.
    fn apply(&mut self, writes: &[Write]) -> Result<(), StoreError>;

    /// Housekeeping the host runs after it reported a commit durable, off
    /// the acknowledgement path (SQLite checkpoints its WAL here). Nothing
    /// by default.
    fn after_commit(&mut self) -> Result<(), StoreError> {
        Ok(())
    }
}

#[cfg(feature = "contract")]
pub mod contract;
mod memory;
mod raw_json;

pub use memory::MemoryStore;
