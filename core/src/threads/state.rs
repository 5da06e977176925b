//! Every thread's metadata as the engine sees it (durable plus pending), and
//! the events appended but not yet durable.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::engine::Misuse;
use crate::ids::{PrincipalId, ThreadId};
use crate::model::{BubbleThread, Participant, StoredEvent};
use crate::policy::{effective_capabilities, CapabilitySet, Role};
use crate::store::{EventStore, Snapshot, StoreError};

/// Who is asking, as the policy needs to know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Caller {
    pub(crate) principal: PrincipalId,
    pub(crate) admin: bool,
}

/// An appended event whose batch is not yet durable.
#[derive(Debug, Clone)]
struct Pending {
    event: StoredEvent,
    key: Option<String>,
}

/// One thread's state.
#[derive(Debug, Clone)]
pub(crate) struct ThreadState {
    pub(crate) parent: Option<ThreadId>,
    pub(crate) title: Option<String>,
    pub(crate) created_at: String,
    /// The highest assigned seq (durable or pending).
    pub(crate) head_seq: u64,
    /// The highest durable seq: history up to here is read from the store.
    durable_seq: u64,
    pub(crate) grants: BTreeMap<PrincipalId, Role>,
    pub(crate) participants: Vec<Participant>,
    pub(crate) children: BTreeSet<ThreadId>,
    pending: VecDeque<Pending>,
}

impl ThreadState {
    /// A new, empty thread.
    pub(crate) fn new(parent: Option<ThreadId>, created_at: String) -> ThreadState {
        ThreadState {
            parent,
            title: None,
            created_at,
            head_seq: 0,
            durable_seq: 0,
            grants: BTreeMap::new(),
            participants: Vec::new(),
            children: BTreeSet::new(),
            pending: VecDeque::new(),
        }
    }

    /// The participant row of `principal`, if any.
    pub(crate) fn participant(&self, principal: &PrincipalId) -> Option<&Participant> {
        self.participants
            .iter()
            .find(|p| &p.principal_id == principal)
    }
}

/// All threads, ordered by id, plus the order in which pending events
/// become durable.
#[derive(Debug, Default)]
pub(crate) struct Table {
    threads: BTreeMap<ThreadId, ThreadState>,
    /// `(batch, thread)` of every pending event, in append order.
    pending: VecDeque<(u64, ThreadId)>,
}

impl Table {
    /// Rebuilds the table from a start-up snapshot, checking that every
    /// parent exists and that no parent chain loops.
    pub(crate) fn from_snapshot(snapshot: Snapshot) -> Result<Table, Misuse> {
        let mut table = Table::default();
        for record in snapshot.threads {
            let mut state = ThreadState::new(record.parent_thread_id, record.created_at);
            state.title = record.title;
            state.head_seq = record.head_seq;
            state.durable_seq = record.head_seq;
            state.grants = record.grants.into_iter().collect();
            state.participants = record.participants;
            if table
                .threads
                .insert(record.thread_id.clone(), state)
                .is_some()
            {
                return Err(Misuse::InvalidSnapshot(format!(
                    "thread {} appears twice",
                    record.thread_id
                )));
            }
        }
        let links: Vec<(ThreadId, ThreadId)> = table
            .threads
            .iter()
            .filter_map(|(id, t)| Some((t.parent.clone()?, id.clone())))
            .collect();
        for (parent, child) in links {
            let parent_state = table.threads.get_mut(&parent).ok_or_else(|| {
                Misuse::InvalidSnapshot(format!("thread {child} has unknown parent {parent}"))
            })?;
            parent_state.children.insert(child);
        }
        let limit = table.threads.len();
        for id in table.threads.keys() {
            if table.ancestors(id).nth(limit).is_some() {
                return Err(Misuse::InvalidSnapshot(format!(
                    "thread {id} has a parent cycle"
                )));
            }
        }
        Ok(table)
    }

    pub(crate) fn get(&self, id: &ThreadId) -> Option<&ThreadState> {
        self.threads.get(id)
    }

    pub(crate) fn get_mut(&mut self, id: &ThreadId) -> Option<&mut ThreadState> {
        self.threads.get_mut(id)
    }

    pub(crate) fn contains(&self, id: &ThreadId) -> bool {
        self.threads.contains_key(id)
    }

    /// Adds a new thread (and links it under its parent).
    pub(crate) fn insert(&mut self, id: ThreadId, state: ThreadState) {
        if let Some(parent) = state.parent.clone().and_then(|p| self.threads.get_mut(&p)) {
            parent.children.insert(id.clone());
        }
        self.threads.insert(id, state);
    }

    /// Threads with ids after `cursor`, in id order.
    pub(crate) fn after<'a>(
        &'a self,
        cursor: Option<&ThreadId>,
    ) -> impl Iterator<Item = (&'a ThreadId, &'a ThreadState)> + 'a {
        use std::ops::Bound;
        let start = cursor.map_or(Bound::Unbounded, |c| Bound::Excluded(c.clone()));
        self.threads.range((start, Bound::Unbounded))
    }

    /// The direct children of `parent` with ids after `cursor`, in id order.
    pub(crate) fn children_after<'a>(
        &'a self,
        parent: &ThreadId,
        cursor: Option<&ThreadId>,
    ) -> impl Iterator<Item = &'a ThreadId> + 'a {
        use std::ops::Bound;
        let start = cursor.map_or(Bound::Unbounded, |c| Bound::Excluded(c.clone()));
        self.threads
            .get(parent)
            .into_iter()
            .flat_map(move |t| t.children.range((start.clone(), Bound::Unbounded)))
    }

    /// The parent, grandparent, … of `id`.
    fn ancestors<'a>(&'a self, id: &ThreadId) -> impl Iterator<Item = &'a ThreadState> + 'a {
        let first = self.threads.get(id).and_then(|t| t.parent.as_ref());
        std::iter::successors(first.and_then(|p| self.threads.get(p)), move |t| {
            t.parent.as_ref().and_then(|p| self.threads.get(p))
        })
    }

    /// What `caller` holds on `id`; `None` when the thread does not exist.
    pub(crate) fn capabilities(&self, caller: &Caller, id: &ThreadId) -> Option<CapabilitySet> {
        let thread = self.threads.get(id)?;
        let own = thread.grants.get(&caller.principal).copied();
        let ancestors = self
            .ancestors(id)
            .map(|t| t.grants.get(&caller.principal).copied());
        Some(effective_capabilities(caller.admin, own, ancestors))
    }

    /// `id` and every thread below it.
    pub(crate) fn subtree(&self, id: &ThreadId) -> Vec<ThreadId> {
        let mut out = vec![id.clone()];
        let mut next = 0;
        while let Some(current) = out.get(next) {
            if let Some(t) = self.threads.get(current) {
                out.extend(t.children.iter().cloned());
            }
            next += 1;
        }
        out
    }

    /// The `BubbleThread` snapshot of `id`.
    pub(crate) fn snapshot(&self, id: &ThreadId) -> Option<BubbleThread> {
        let t = self.threads.get(id)?;
        Some(BubbleThread {
            thread_id: id.clone(),
            parent_thread_id: t.parent.clone(),
            title: t.title.clone(),
            head_seq: t.head_seq,
            created_at: t.created_at.clone(),
            participants: t.participants.clone(),
        })
    }

    /// Records an event appended in `batch` at the thread's next seq.
    pub(crate) fn push_pending(
        &mut self,
        id: &ThreadId,
        batch: u64,
        event: StoredEvent,
        key: Option<String>,
    ) {
        if let Some(t) = self.threads.get_mut(id) {
            t.head_seq = event.seq;
            t.pending.push_back(Pending { event, key });
            self.pending.push_back((batch, id.clone()));
        }
    }

    /// The pending event of `id` appended with idempotency key `key`.
    pub(crate) fn pending_with_key(&self, id: &ThreadId, key: &str) -> Option<StoredEvent> {
        let t = self.threads.get(id)?;
        t.pending
            .iter()
            .find(|p| p.key.as_deref() == Some(key))
            .map(|p| p.event.clone())
    }

    /// Every batch up to `batch` is durable: its events become history.
    pub(crate) fn persisted(&mut self, batch: u64) {
        while self.pending.front().is_some_and(|(b, _)| *b <= batch) {
            let Some((_, id)) = self.pending.pop_front() else {
                break;
            };
            if let Some(t) = self.threads.get_mut(&id) {
                if let Some(p) = t.pending.pop_front() {
                    t.durable_seq = p.event.seq;
                }
            }
        }
    }

    /// Events of `id` with `from <= seq <= through`, at most `limit`:
    /// durable ones from `store`, pending ones from memory.
    pub(crate) fn read(
        &self,
        store: &dyn EventStore,
        id: &ThreadId,
        from: u64,
        through: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let Some(t) = self.threads.get(id) else {
            return Ok(Vec::new());
        };
        let through = through.min(t.head_seq);
        let from = from.max(1);
        if from > through || limit == 0 {
            return Ok(Vec::new());
        }
        let mut events = Vec::new();
        if from <= t.durable_seq {
            let last = through.min(t.durable_seq);
            events = store.read_events(id, from, last, limit)?;
            let expected = usize::try_from(last - from + 1)
                .unwrap_or(usize::MAX)
                .min(limit);
            if events.len() != expected || events.first().is_some_and(|e| e.seq != from) {
                return Err(StoreError(format!(
                    "history of {id} from seq {from} is incomplete"
                )));
            }
        }
        let next = events
            .last()
            .map_or(from, |e| e.seq + 1)
            .max(t.durable_seq + 1);
        if events.len() < limit && next <= through {
            let skip = usize::try_from(next - t.durable_seq - 1).unwrap_or(usize::MAX);
            let wanted = usize::try_from(through - next + 1).unwrap_or(usize::MAX);
            let room = limit - events.len();
            events.extend(
                t.pending
                    .iter()
                    .skip(skip)
                    .take(wanted.min(room))
                    .map(|p| p.event.clone()),
            );
        }
        Ok(events)
    }
}
