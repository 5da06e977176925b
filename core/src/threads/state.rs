//! One thread as the engine sees it: its durable record, the writes decided
//! on top of it that are not durable yet, and who the caller is.

use std::collections::{BTreeMap, VecDeque};

use crate::ids::{PrincipalId, ThreadId};
use crate::model::{BubbleThread, Participant, StoredEvent};
use crate::policy::Role;
use crate::store::{ThreadRecord, Version};

/// Who is asking, as the policy needs to know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Caller {
    pub(crate) principal: PrincipalId,
    pub(crate) admin: bool,
}

/// An appended event whose batch is not yet durable.
#[derive(Debug, Clone)]
struct Pending {
    batch: u64,
    event: StoredEvent,
    key: Option<String>,
}

/// One thread's state: durable, plus decided but not yet durable.
#[derive(Debug, Clone)]
pub(crate) struct ThreadState {
    pub(crate) parent: Option<ThreadId>,
    pub(crate) title: Option<String>,
    pub(crate) created_at: String,
    /// The highest assigned seq (durable or pending).
    pub(crate) head_seq: u64,
    /// The version after the last decided write (durable or pending).
    pub(crate) version: u64,
    /// Where the store is known to stand.
    durable: Version,
    pub(crate) grants: BTreeMap<PrincipalId, Role>,
    pub(crate) participants: Vec<Participant>,
    pending: VecDeque<Pending>,
    /// Head and version after each batch not yet durable, in batch order.
    commits: VecDeque<(u64, Version)>,
    /// Another writer changed the thread while writes of ours were in
    /// flight: reload once they are settled.
    pub(crate) stale: bool,
    /// The highest durable head another writer announced while the thread
    /// waits for that reload (0: none).
    pub(crate) announced_head: u64,
}

impl ThreadState {
    /// A new, empty thread (not durable until its first batch is).
    pub(crate) fn new(parent: Option<ThreadId>, created_at: String) -> ThreadState {
        ThreadState {
            parent,
            title: None,
            created_at,
            head_seq: 0,
            version: 0,
            durable: Version {
                head_seq: 0,
                version: 0,
            },
            grants: BTreeMap::new(),
            participants: Vec::new(),
            pending: VecDeque::new(),
            commits: VecDeque::new(),
            stale: false,
            announced_head: 0,
        }
    }

    /// The state of a record read from the store.
    pub(crate) fn from_record(record: ThreadRecord) -> ThreadState {
        ThreadState {
            parent: record.parent_thread_id,
            title: record.title,
            created_at: record.created_at,
            head_seq: record.head_seq,
            version: record.version,
            durable: Version {
                head_seq: record.head_seq,
                version: record.version,
            },
            grants: record.grants.into_iter().collect(),
            participants: record.participants,
            pending: VecDeque::new(),
            commits: VecDeque::new(),
            stale: false,
            announced_head: 0,
        }
    }

    /// The record as it will be once every decided write is durable.
    pub(crate) fn record(&self, id: &ThreadId) -> ThreadRecord {
        ThreadRecord {
            thread_id: id.clone(),
            parent_thread_id: self.parent.clone(),
            title: self.title.clone(),
            created_at: self.created_at.clone(),
            head_seq: self.head_seq,
            version: self.version,
            grants: self.grants.iter().map(|(p, r)| (p.clone(), *r)).collect(),
            participants: self.participants.clone(),
        }
    }

    /// The head and version every decided write leads to.
    pub(crate) fn decided(&self) -> Version {
        Version {
            head_seq: self.head_seq,
            version: self.version,
        }
    }

    /// The head a subscription opened now is pinned at: every decided seq,
    /// and what another writer announced (made durable) that this engine
    /// has not read yet.
    pub(crate) fn known_head(&self) -> u64 {
        self.head_seq.max(self.announced_head)
    }

    /// Where the store stands, as far as this engine knows.
    pub(crate) fn durable(&self) -> Version {
        self.durable
    }

    /// Whether `version` is one this engine decided or knows to be durable
    /// (a broker echoing our own commit).
    pub(crate) fn knows_version(&self, version: u64) -> bool {
        self.durable.version == version
            || self.version == version
            || self.commits.iter().any(|(_, at)| at.version == version)
    }

    /// Writes of this thread are in flight (decided, not yet durable).
    pub(crate) fn in_flight(&self) -> bool {
        !self.commits.is_empty()
    }

    /// The participant row of `principal`, if any.
    pub(crate) fn participant(&self, principal: &PrincipalId) -> Option<&Participant> {
        self.participants
            .iter()
            .find(|p| &p.principal_id == principal)
    }

    /// The `BubbleThread` snapshot.
    pub(crate) fn snapshot(&self, id: &ThreadId) -> BubbleThread {
        BubbleThread {
            thread_id: id.clone(),
            parent_thread_id: self.parent.clone(),
            title: self.title.clone(),
            head_seq: self.head_seq,
            created_at: self.created_at.clone(),
            participants: self.participants.clone(),
        }
    }

    /// Records an event decided in `batch` at the thread's next seq.
    pub(crate) fn push_pending(&mut self, batch: u64, event: StoredEvent, key: Option<String>) {
        self.head_seq = event.seq;
        self.pending.push_back(Pending { batch, event, key });
    }

    /// The pending event appended with idempotency key `key`.
    pub(crate) fn pending_with_key(&self, key: &str) -> Option<StoredEvent> {
        self.pending
            .iter()
            .find(|p| p.key.as_deref() == Some(key))
            .map(|p| p.event.clone())
    }

    /// Pending events with `seq >= from`, in order.
    pub(crate) fn pending_from(&self, from: u64) -> impl Iterator<Item = &StoredEvent> + '_ {
        self.pending
            .iter()
            .map(|p| &p.event)
            .filter(move |e| e.seq >= from)
    }

    /// The writes of the current input were sealed into `batch`, leading
    /// the thread to `version`.
    pub(crate) fn sealed(&mut self, batch: u64, version: u64) {
        self.version = version;
        self.commits.push_back((batch, self.decided()));
    }

    /// Every batch up to `batch` is durable; `durable` gets each event that
    /// became durable, in seq order.
    pub(crate) fn persisted(&mut self, batch: u64, mut durable: impl FnMut(StoredEvent)) {
        while self.pending.front().is_some_and(|p| p.batch <= batch) {
            if let Some(pending) = self.pending.pop_front() {
                durable(pending.event);
            }
        }
        while let Some(&(b, at)) = self.commits.front() {
            if b > batch {
                break;
            }
            self.durable = at;
            self.commits.pop_front();
        }
    }
}
