//! The storage seam.
//!
//! The engine owns no store. It decides every store rule (seq assignment,
//! idempotency, thread creation, title events, grants, participants) over a
//! bounded cache of thread records and asks the host for what it needs:
//! [`Output::Read`](crate::Output::Read) with a [`ReadQuery`], answered by
//! [`Input::ReadDone`](crate::Input::ReadDone) with a [`ReadResult`], and
//! [`Output::Persist`](crate::Output::Persist) with a [`Batch`], answered by
//! [`Input::Persisted`](crate::Input::Persisted) or
//! [`Input::PersistFailed`](crate::Input::PersistFailed).
//!
//! Writes are conditional: each thread's writes in a batch carry the
//! [`Version`] they were decided on. A backend applies them only if the
//! thread is still at that version (or, for a new thread, does not exist
//! yet) and reports the threads it refused; the engine reloads those and
//! decides again. A backend therefore stores, compares versions and reads
//! back: it never re-implements a rule. [`Backend`] is that contract for
//! hosts that answer reads and writes synchronously (the memory and SQLite
//! backends, the contract suite).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::ids::{PrincipalId, ThreadId};
use crate::model::{Participant, StoredEvent};
use crate::policy::Role;

/// A storage failure; the host logs the detail.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The store could not be reached (a lost connection, a database that
    /// is down): nothing was read or written, and trying again later may
    /// succeed. Peers see `unavailable`.
    #[error("store unavailable: {0}")]
    Unavailable(String),
    /// The store answered with a failure. Peers see `internal`.
    #[error("store failure: {0}")]
    Failed(String),
}

impl StoreError {
    /// What a peer is told: `unavailable` or `internal`.
    pub fn to_bubble_error(&self) -> crate::error::BubbleError {
        match self {
            StoreError::Unavailable(_) => crate::error::BubbleError::Unavailable(
                "The store is unavailable; try again later.".into(),
            ),
            StoreError::Failed(_) => crate::error::BubbleError::Internal,
        }
    }
}

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

/// Where a thread stands: its durable head and an opaque version that
/// changes with every commit that touches the thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Version {
    /// The highest durable seq (0 when empty).
    pub head_seq: u64,
    /// The version token (drawn at random by the deciding engine, so two
    /// engines never produce the same one for the same thread).
    pub version: u64,
}

/// One thread's durable metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
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
    /// The version token of the last commit.
    pub version: u64,
    /// Grants on this thread.
    pub grants: Vec<(PrincipalId, Role)>,
    /// Participants, in join order.
    pub participants: Vec<Participant>,
}

impl ThreadRecord {
    /// The record's head and version.
    pub fn at(&self) -> Version {
        Version {
            head_seq: self.head_seq,
            version: self.version,
        }
    }
}

/// One thread's share of a batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ThreadWrites {
    /// The thread.
    pub thread_id: ThreadId,
    /// The version the writes were decided on; `None`: the thread must not
    /// exist yet (the writes create it).
    pub expect: Option<Version>,
    /// The thread's whole record once the writes are applied (backends that
    /// store a record per thread write it as it is).
    pub record: ThreadRecord,
    /// The writes, in order.
    pub writes: Vec<Write>,
}

/// The writes of one [`Output::Persist`](crate::Output::Persist), grouped by
/// thread. Each thread's group commits or is refused whole.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Batch {
    /// Per-thread groups, each thread at most once.
    pub threads: Vec<ThreadWrites>,
}

/// What the engine asks a store to read. Only durable data is read.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ReadQuery {
    /// Events of `thread_id` with `from_seq <= seq <= through_seq`,
    /// ascending, at most `limit` ([`ReadResult::Events`]).
    Events {
        /// The thread.
        thread_id: ThreadId,
        /// The first seq.
        from_seq: u64,
        /// The last seq.
        through_seq: u64,
        /// At most this many.
        limit: usize,
    },
    /// The event of `thread_id` appended with idempotency key `key`
    /// ([`ReadResult::Event`]).
    Idempotent {
        /// The thread.
        thread_id: ThreadId,
        /// The key.
        key: String,
    },
    /// One thread's record ([`ReadResult::Thread`]).
    Thread {
        /// The thread.
        thread_id: ThreadId,
    },
    /// Thread records in id order after `after`: the direct children of
    /// `parent`, or every thread when `parent` is `None`
    /// ([`ReadResult::Threads`]).
    Threads {
        /// Whose children; `None` for all threads.
        parent: Option<ThreadId>,
        /// Only ids greater than this one.
        after: Option<ThreadId>,
        /// At most this many.
        limit: usize,
    },
}

/// A store's answer to a [`ReadQuery`] of the same kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadResult {
    /// Answers [`ReadQuery::Events`].
    Events(Vec<StoredEvent>),
    /// Answers [`ReadQuery::Idempotent`].
    Event(Option<StoredEvent>),
    /// Answers [`ReadQuery::Thread`].
    Thread(Option<ThreadRecord>),
    /// Answers [`ReadQuery::Threads`].
    Threads(Vec<ThreadRecord>),
}

/// A backend that answers reads and applies batches synchronously. Hosts
/// run it off the engine's thread and feed the answers back as inputs.
pub trait Backend {
    /// Answers one read.
    fn read(&self, query: &ReadQuery) -> Result<ReadResult, StoreError>;

    /// Applies `batches` in order, atomically (one commit); on `Ok` every
    /// group whose expectation held is durable. Returns, per batch, the
    /// threads whose groups were refused (and so not applied).
    /// [`StoreError::Unavailable`] promises that nothing was applied (a
    /// backend that lost its connection while committing finds out whether
    /// the commit landed before it answers).
    fn apply(&mut self, batches: &[&Batch]) -> Result<Vec<Vec<ThreadId>>, StoreError>;

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
