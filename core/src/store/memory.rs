//! The in-memory backend: thread records, one growing vector of events per
//! thread, and the idempotency index.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::ids::ThreadId;
use crate::maps::HashMap;
use crate::model::StoredEvent;
use crate::store::{Backend, Batch, ReadQuery, ReadResult, StoreError, ThreadWrites, Write};

#[derive(Debug, Default)]
struct Tables {
    records: BTreeMap<ThreadId, crate::store::ThreadRecord>,
    children: HashMap<ThreadId, BTreeSet<ThreadId>>,
    events: HashMap<ThreadId, Vec<StoredEvent>>,
    idempotency: HashMap<(ThreadId, String), u64>,
}

/// An in-memory [`Backend`]. Clones share the same tables, so several
/// engines (a cluster in miniature) or a reader and a writer can share one.
#[derive(Debug, Clone, Default)]
pub struct MemoryStore(Arc<Mutex<Tables>>);

impl MemoryStore {
    fn tables(&self) -> MutexGuard<'_, Tables> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

fn after(cursor: Option<&ThreadId>) -> Bound<ThreadId> {
    cursor.map_or(Bound::Unbounded, |c| Bound::Excluded(c.clone()))
}

impl Tables {
    fn read(&self, query: &ReadQuery) -> ReadResult {
        match query {
            ReadQuery::Events {
                thread_id,
                from_seq,
                through_seq,
                limit,
            } => {
                let events = self.events.get(thread_id).map_or(&[][..], Vec::as_slice);
                let start = usize::try_from(from_seq.max(&1) - 1)
                    .unwrap_or(usize::MAX)
                    .min(events.len());
                ReadResult::Events(
                    events[start..]
                        .iter()
                        .take_while(|e| e.seq <= *through_seq)
                        .take(*limit)
                        .cloned()
                        .collect(),
                )
            }
            ReadQuery::Idempotent { thread_id, key } => ReadResult::Event(
                self.idempotency
                    .get(&(thread_id.clone(), key.clone()))
                    .and_then(|seq| {
                        let events = self.events.get(thread_id)?;
                        events.get(usize::try_from(seq - 1).ok()?).cloned()
                    }),
            ),
            ReadQuery::Thread { thread_id } => {
                ReadResult::Thread(self.records.get(thread_id).cloned())
            }
            ReadQuery::Threads {
                parent,
                after: cursor,
                limit,
            } => {
                let range = (after(cursor.as_ref()), Bound::Unbounded);
                let records: Vec<_> = match parent {
                    None => self
                        .records
                        .range(range)
                        .take(*limit)
                        .map(|(_, r)| r.clone())
                        .collect(),
                    Some(parent) => self
                        .children
                        .get(parent)
                        .into_iter()
                        .flat_map(|c| c.range(range.clone()))
                        .filter_map(|id| self.records.get(id).cloned())
                        .take(*limit)
                        .collect(),
                };
                ReadResult::Threads(records)
            }
        }
    }

    /// Whether `group` may commit: its expectation holds, its seqs follow
    /// the head, and none of its idempotency keys is taken.
    fn admits(&self, group: &ThreadWrites) -> bool {
        let id = &group.thread_id;
        let current = self.records.get(id).map(crate::store::ThreadRecord::at);
        if group.expect != current {
            return false;
        }
        let mut head = current.map_or(0, |v| v.head_seq);
        for write in &group.writes {
            if let Write::AppendEvent {
                seq,
                idempotency_key,
                ..
            } = write
            {
                let key_taken = idempotency_key
                    .as_ref()
                    .is_some_and(|k| self.idempotency.contains_key(&(id.clone(), k.clone())));
                if *seq != head + 1 || key_taken {
                    return false;
                }
                head = *seq;
            }
        }
        true
    }

    fn commit(&mut self, group: &ThreadWrites) {
        let id = &group.thread_id;
        for write in &group.writes {
            if let Write::AppendEvent {
                seq,
                idempotency_key,
                json,
                ..
            } = write
            {
                if let Some(key) = idempotency_key {
                    self.idempotency.insert((id.clone(), key.clone()), *seq);
                }
                self.events
                    .entry(id.clone())
                    .or_default()
                    .push(StoredEvent {
                        seq: *seq,
                        json: json.clone(),
                    });
            }
        }
        if let Some(parent) = &group.record.parent_thread_id {
            self.children
                .entry(parent.clone())
                .or_default()
                .insert(id.clone());
        }
        self.records.insert(id.clone(), group.record.clone());
    }
}

impl Backend for MemoryStore {
    fn read(&self, query: &ReadQuery) -> Result<ReadResult, StoreError> {
        Ok(self.tables().read(query))
    }

    fn apply(&mut self, batches: &[&Batch]) -> Result<Vec<Vec<ThreadId>>, StoreError> {
        let mut tables = self.tables();
        Ok(batches
            .iter()
            .map(|batch| {
                let mut refused = Vec::new();
                for group in &batch.threads {
                    if tables.admits(group) {
                        tables.commit(group);
                    } else {
                        refused.push(group.thread_id.clone());
                    }
                }
                refused
            })
            .collect())
    }
}
