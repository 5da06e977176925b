//! The bounded cache of thread state.
//!
//! Nothing is loaded at start-up: a thread's record is read on first use
//! and kept while it is used. Past `limits.thread_cache` entries, the least
//! recently used ones are evicted, except those the caller pins (threads
//! with live subscriptions, writes in flight, or the ancestors of such
//! threads) and those used since the oldest operation still waiting for a
//! read began, so that an operation's re-run finds what its reads loaded.
//! A thread known not to exist is cached too, as [`Slot::Absent`] (in a
//! cluster, only a read of the operation's own confirms it before a
//! request is refused: another node may have created the thread since).

use crate::ids::ThreadId;
use crate::maps::{HashMap, HashSet};
use crate::policy::{effective_capabilities, CapabilitySet};
use crate::store::ThreadRecord;
use crate::threads::state::{Caller, ThreadState};

/// What the cache knows of a thread.
#[derive(Debug)]
pub(crate) enum Slot {
    /// The thread exists.
    Present(Box<ThreadState>),
    /// The store had no such thread when it was read.
    Absent,
}

impl Slot {
    /// What a read of a thread's record says: present with its state, or
    /// absent.
    pub(crate) fn read(record: Option<&ThreadRecord>) -> Slot {
        match record {
            Some(record) => Slot::Present(Box::new(ThreadState::from_record(record.clone()))),
            None => Slot::Absent,
        }
    }
}

#[derive(Debug)]
struct Entry {
    slot: Slot,
    used: u64,
}

/// What authorization over a parent chain lacks: the thread to load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Missing(pub(crate) ThreadId);

/// Cached threads with their last use. A use only stamps the entry; the
/// order is worked out when the cache is trimmed, which is rare (see
/// [`Cache::trim`]), so the hot path does no bookkeeping beyond the stamp.
#[derive(Debug, Default)]
pub(crate) struct Cache {
    entries: HashMap<ThreadId, Entry>,
    tick: u64,
}

impl Cache {
    /// The current use counter (entries used at or after it are recent).
    pub(crate) fn tick(&self) -> u64 {
        self.tick
    }

    /// How many threads are cached.
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }

    /// What is known of `id`, marking it used; `None` when not cached.
    pub(crate) fn touch(&mut self, id: &ThreadId) -> Option<&Slot> {
        let entry = self.entries.get_mut(id)?;
        self.tick += 1;
        entry.used = self.tick;
        Some(&entry.slot)
    }

    /// Whether `id` is cached (present or absent).
    pub(crate) fn knows(&self, id: &ThreadId) -> bool {
        self.entries.contains_key(id)
    }

    /// The state of `id` when cached and present.
    pub(crate) fn get(&self, id: &ThreadId) -> Option<&ThreadState> {
        match &self.entries.get(id)?.slot {
            Slot::Present(state) => Some(state),
            Slot::Absent => None,
        }
    }

    /// The state of `id` when cached and present.
    pub(crate) fn get_mut(&mut self, id: &ThreadId) -> Option<&mut ThreadState> {
        match &mut self.entries.get_mut(id)?.slot {
            Slot::Present(state) => Some(state),
            Slot::Absent => None,
        }
    }

    /// Caches `slot` for `id`, replacing what was there.
    pub(crate) fn put(&mut self, id: ThreadId, slot: Slot) {
        self.tick += 1;
        let used = self.tick;
        self.entries.insert(id, Entry { slot, used });
    }

    /// Forgets `id` (to reload it).
    pub(crate) fn remove(&mut self, id: &ThreadId) -> Option<Slot> {
        self.entries.remove(id).map(|e| e.slot)
    }

    /// The parent, grandparent, … of `id`, as far as they are cached.
    pub(crate) fn ancestors<'a>(
        &'a self,
        id: &ThreadId,
    ) -> impl Iterator<Item = &'a ThreadId> + 'a {
        let first = self.get(id).and_then(|t| t.parent.as_ref());
        std::iter::successors(first, move |p| self.get(p).and_then(|t| t.parent.as_ref()))
    }

    /// What `caller` holds on `id`: `Ok(None)` when the thread does not
    /// exist, `Err` naming the first thread of the chain that is not cached.
    pub(crate) fn capabilities(
        &mut self,
        caller: &Caller,
        id: &ThreadId,
    ) -> Result<Option<CapabilitySet>, Missing> {
        let mut own = None;
        let mut inherited = Vec::new();
        let mut current = id.clone();
        let mut depth = 0usize;
        loop {
            let state = match self.touch(&current) {
                None => return Err(Missing(current)),
                Some(Slot::Absent) if depth == 0 => return Ok(None),
                // A parent that vanished: the chain ends (nothing inherited).
                Some(Slot::Absent) => break,
                Some(Slot::Present(state)) => state,
            };
            let grant = state.grants.get(&caller.principal).copied();
            if depth == 0 {
                own = grant;
            } else {
                inherited.push(grant);
            }
            match state.parent.clone() {
                // A chain longer than the cache can only be a cycle.
                Some(parent) if depth <= self.entries.len() => current = parent,
                _ => break,
            }
            depth += 1;
        }
        Ok(Some(effective_capabilities(caller.admin, own, inherited)))
    }

    /// Evicts least recently used entries, keeping entries used at or after
    /// `recent` and those in `pinned`, down to 7/8 of `capacity` so that the
    /// next trim is `capacity / 8` loads away (each trim sorts the cache).
    pub(crate) fn trim(&mut self, capacity: usize, recent: u64, pinned: &HashSet<ThreadId>) {
        if self.entries.len() <= capacity {
            return;
        }
        let keep = capacity - capacity / 8;
        let mut candidates: Vec<(u64, &ThreadId)> = self
            .entries
            .iter()
            .filter(|(id, e)| e.used < recent && !pinned.contains(*id))
            .map(|(id, e)| (e.used, id))
            .collect();
        candidates.sort_unstable_by_key(|(used, _)| *used);
        let excess = self.entries.len().saturating_sub(keep);
        let victims: Vec<ThreadId> = candidates
            .into_iter()
            .take(excess)
            .map(|(_, id)| id.clone())
            .collect();
        for id in victims {
            self.entries.remove(&id);
        }
    }
}
