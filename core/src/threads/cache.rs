//! The bounded cache of thread state.
//!
//! Nothing is loaded at start-up: a thread's record is read on first use
//! and kept while it is used. Past `limits.thread_cache` entries, the least
//! recently used ones are evicted, except those the caller pins (threads
//! with live subscriptions, writes in flight, or the ancestors of such
//! threads) and those used since the oldest operation still waiting for a
//! read began, so that an operation's re-run finds what its reads loaded.
//! A thread known not to exist is cached too, as [`Slot::Absent`].

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::ids::ThreadId;
use crate::policy::{effective_capabilities, CapabilitySet};
use crate::threads::state::{Caller, ThreadState};

/// What the cache knows of a thread.
#[derive(Debug)]
pub(crate) enum Slot {
    /// The thread exists.
    Present(Box<ThreadState>),
    /// The store had no such thread when it was read.
    Absent,
}

#[derive(Debug)]
struct Entry {
    slot: Slot,
    used: u64,
}

/// What authorization over a parent chain lacks: the thread to load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Missing(pub(crate) ThreadId);

/// Cached threads with their last use.
#[derive(Debug, Default)]
pub(crate) struct Cache {
    entries: HashMap<ThreadId, Entry>,
    lru: BTreeMap<u64, ThreadId>,
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
        self.lru.remove(&entry.used);
        entry.used = self.tick;
        self.lru.insert(self.tick, id.clone());
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
        if let Some(old) = self.entries.insert(
            id.clone(),
            Entry {
                slot,
                used: self.tick,
            },
        ) {
            self.lru.remove(&old.used);
        }
        self.lru.insert(self.tick, id);
    }

    /// Forgets `id` (to reload it).
    pub(crate) fn remove(&mut self, id: &ThreadId) -> Option<Slot> {
        let entry = self.entries.remove(id)?;
        self.lru.remove(&entry.used);
        Some(entry.slot)
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

    /// Evicts least recently used entries until at most `capacity` remain,
    /// keeping entries used at or after `recent` and those in `pinned`.
    pub(crate) fn trim(&mut self, capacity: usize, recent: u64, pinned: &HashSet<ThreadId>) {
        if self.entries.len() <= capacity {
            return;
        }
        let victims: Vec<(u64, ThreadId)> = self
            .lru
            .range(..recent)
            .filter(|(_, id)| !pinned.contains(*id))
            .take(self.entries.len() - capacity)
            .map(|(used, id)| (*used, id.clone()))
            .collect();
        for (used, id) in victims {
            self.lru.remove(&used);
            self.entries.remove(&id);
        }
    }
}
