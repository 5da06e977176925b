//! The in-memory backend: one growing vector of events per thread.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use crate::ids::{PrincipalId, ThreadId};
use crate::model::StoredEvent;
use crate::store::{Backend, EventStore, Snapshot, StoreError, ThreadRecord, Write};

#[derive(Debug, Default)]
struct Tables {
    threads: Vec<ThreadRecord>,
    index: HashMap<ThreadId, usize>,
    events: HashMap<ThreadId, Vec<StoredEvent>>,
    idempotency: HashMap<(ThreadId, String), u64>,
}

/// An in-memory [`Backend`]. Clones share the same tables, so the engine can
/// read through one clone while the host applies writes through another.
#[derive(Debug, Clone, Default)]
pub struct MemoryStore(Arc<Mutex<Tables>>);

impl MemoryStore {
    fn tables(&self) -> MutexGuard<'_, Tables> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl EventStore for MemoryStore {
    fn read_events(
        &self,
        thread: &ThreadId,
        from_seq: u64,
        through_seq: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        let tables = self.tables();
        let Some(events) = tables.events.get(thread) else {
            return Ok(Vec::new());
        };
        let start = usize::try_from(from_seq.max(1) - 1)
            .unwrap_or(usize::MAX)
            .min(events.len());
        Ok(events[start..]
            .iter()
            .take_while(|e| e.seq <= through_seq)
            .take(limit)
            .cloned()
            .collect())
    }

    fn find_idempotent(
        &self,
        thread: &ThreadId,
        key: &str,
    ) -> Result<Option<StoredEvent>, StoreError> {
        let tables = self.tables();
        let Some(&seq) = tables.idempotency.get(&(thread.clone(), key.to_owned())) else {
            return Ok(None);
        };
        let event = tables
            .events
            .get(thread)
            .and_then(|events| events.get(usize::try_from(seq - 1).ok()?))
            .cloned();
        Ok(event)
    }
}

impl Backend for MemoryStore {
    fn load(&self) -> Result<Snapshot, StoreError> {
        Ok(Snapshot {
            threads: self.tables().threads.clone(),
        })
    }

    fn apply(&mut self, writes: &[Write]) -> Result<(), StoreError> {
        let mut tables = self.tables();
        for write in writes {
            apply_one(&mut tables, write)?;
        }
        Ok(())
    }
}

fn record<'t>(
    tables: &'t mut Tables,
    thread: &ThreadId,
) -> Result<&'t mut ThreadRecord, StoreError> {
    let index = *tables
        .index
        .get(thread)
        .ok_or_else(|| StoreError(format!("write to unknown thread {thread}")))?;
    Ok(&mut tables.threads[index])
}

fn remove_grant(record: &mut ThreadRecord, principal: &PrincipalId) {
    record.grants.retain(|(p, _)| p != principal);
}

fn apply_one(tables: &mut Tables, write: &Write) -> Result<(), StoreError> {
    match write {
        Write::CreateThread {
            thread_id,
            parent_thread_id,
            created_at,
        } => {
            if tables.index.contains_key(thread_id) {
                return Err(StoreError(format!("thread {thread_id} exists")));
            }
            tables.index.insert(thread_id.clone(), tables.threads.len());
            tables.threads.push(ThreadRecord {
                thread_id: thread_id.clone(),
                parent_thread_id: parent_thread_id.clone(),
                title: None,
                created_at: created_at.clone(),
                head_seq: 0,
                grants: Vec::new(),
                participants: Vec::new(),
            });
        }
        Write::SetTitle { thread_id, title } => record(tables, thread_id)?.title = title.clone(),
        Write::AppendEvent {
            thread_id,
            seq,
            idempotency_key,
            json,
        } => {
            let rec = record(tables, thread_id)?;
            if *seq != rec.head_seq + 1 {
                return Err(StoreError(format!("seq {seq} is not next on {thread_id}")));
            }
            rec.head_seq = *seq;
            if let Some(key) = idempotency_key {
                tables
                    .idempotency
                    .insert((thread_id.clone(), key.clone()), *seq);
            }
            let event = StoredEvent {
                seq: *seq,
                json: json.clone(),
            };
            tables
                .events
                .entry(thread_id.clone())
                .or_default()
                .push(event);
        }
        Write::PutGrant {
            thread_id,
            principal_id,
            role,
        } => {
            let rec = record(tables, thread_id)?;
            remove_grant(rec, principal_id);
            rec.grants.push((principal_id.clone(), *role));
        }
        Write::DeleteGrant {
            thread_id,
            principal_id,
        } => {
            remove_grant(record(tables, thread_id)?, principal_id);
        }
        Write::PutParticipant {
            thread_id,
            participant,
        } => {
            let rec = record(tables, thread_id)?;
            match rec
                .participants
                .iter_mut()
                .find(|p| p.principal_id == participant.principal_id)
            {
                Some(row) => *row = participant.clone(),
                None => rec.participants.push(participant.clone()),
            }
        }
        Write::DeleteParticipant {
            thread_id,
            principal_id,
        } => {
            record(tables, thread_id)?
                .participants
                .retain(|p| &p.principal_id != principal_id);
        }
    }
    Ok(())
}
