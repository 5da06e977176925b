//! Conditional writes: one thread's group of a batch, applied inside its own
//! savepoint when the thread is still where the group expects it.

use bubble_core::ids::ThreadId;
use bubble_core::store::{StoreError, ThreadWrites, Write};
use rusqlite::{params, Connection, ErrorCode};

use super::sqlite::{store_err, to_i64};

/// A write refused by a constraint: another writer's row is in the way.
enum Outcome {
    Applied,
    Refused,
}

/// Applies `group` unless its thread moved; false when refused (nothing of
/// it was applied).
///
/// A group that expects a version first advances the thread's row on that
/// condition, so one statement both checks and claims it. Only a group that
/// creates its thread or carries an idempotency key can then meet another
/// writer's row in a constraint; those run inside a savepoint, so that
/// their refusal undoes what they wrote before it.
pub(super) fn apply_group(tx: &Connection, group: &ThreadWrites) -> Result<bool, StoreError> {
    check_seqs(group)?;
    let guarded = group.expect.is_none()
        || group.writes.iter().any(|w| {
            matches!(
                w,
                Write::AppendEvent {
                    idempotency_key: Some(_),
                    ..
                }
            )
        });
    if guarded {
        statement(tx, "SAVEPOINT thread_group")?;
    }
    let applied = apply_writes(tx, group)?;
    match (applied, guarded) {
        (Step::Applied, true) => statement(tx, "RELEASE thread_group")?,
        (Step::Refused, true) => {
            statement(tx, "ROLLBACK TO thread_group")?;
            statement(tx, "RELEASE thread_group")?;
        }
        (Step::Moved | Step::Applied, false) => {}
        (Step::Moved, true) => statement(tx, "RELEASE thread_group")?,
        (Step::Refused, false) => {
            return Err(StoreError::Failed(format!(
                "a write to {} was refused by a constraint",
                group.thread_id
            )))
        }
    }
    Ok(applied == Step::Applied)
}

fn statement(tx: &Connection, sql: &str) -> Result<(), StoreError> {
    tx.prepare_cached(sql)
        .and_then(|mut s| s.execute([]))
        .map(drop)
        .map_err(store_err("savepoint"))
}

/// How far a group got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    /// Every write, and the thread's new head and version.
    Applied,
    /// Nothing: the thread is no longer at the expected version.
    Moved,
    /// A constraint refused a write; what came before it stands until
    /// rolled back.
    Refused,
}

/// The group's writes and the thread's new head and version, stopping as
/// soon as the thread turns out to have moved or a constraint refuses a
/// write.
fn apply_writes(tx: &Connection, group: &ThreadWrites) -> Result<Step, StoreError> {
    let thread = group.thread_id.as_str();
    let (head, version) = (to_i64(group.record.head_seq), to_i64(group.record.version));
    if let Some(expect) = group.expect {
        let n = exec(
            tx,
            "advance thread",
            "UPDATE threads SET head_seq = ?2, version = ?3 \
             WHERE thread_id = ?1 AND head_seq = ?4 AND version = ?5",
            params![
                thread,
                head,
                version,
                to_i64(expect.head_seq),
                to_i64(expect.version)
            ],
        )?;
        if n == 0 {
            return Ok(Step::Moved);
        }
    }
    for write in &group.writes {
        if let Outcome::Refused = apply_one(tx, write)? {
            return Ok(Step::Refused);
        }
    }
    if group.expect.is_none() {
        let n = exec(
            tx,
            "advance thread",
            "UPDATE threads SET head_seq = ?2, version = ?3 WHERE thread_id = ?1",
            params![thread, head, version],
        )?;
        ensure_changed(n, "advance thread", &group.thread_id)?;
    }
    Ok(Step::Applied)
}

/// The engine assigns seqs gapless from the head it expects; anything else
/// is a bug, refused before it reaches the table.
fn check_seqs(group: &ThreadWrites) -> Result<(), StoreError> {
    let mut head = group.expect.map_or(0, |v| v.head_seq);
    for write in &group.writes {
        if let Write::AppendEvent { seq, .. } = write {
            if *seq != head + 1 {
                return Err(StoreError::Failed(format!(
                    "append of seq {seq} after {head} on {}",
                    group.thread_id
                )));
            }
            head = *seq;
        }
    }
    if head != group.record.head_seq {
        return Err(StoreError::Failed(format!(
            "group of {} ends at seq {head}, its record at {}",
            group.thread_id, group.record.head_seq
        )));
    }
    Ok(())
}

/// A constraint violation refuses the group; any other error is a failure.
fn refused_or(e: rusqlite::Error, what: &str) -> Result<Outcome, StoreError> {
    match &e {
        rusqlite::Error::SqliteFailure(f, _) if f.code == ErrorCode::ConstraintViolation => {
            Ok(Outcome::Refused)
        }
        _ => Err(StoreError::Failed(format!("{what}: {e}"))),
    }
}

fn ensure_changed(changed: usize, what: &str, thread: &ThreadId) -> Result<(), StoreError> {
    if changed == 1 {
        Ok(())
    } else {
        Err(StoreError::Failed(format!(
            "{what}: no such thread {thread}"
        )))
    }
}

fn exec(
    tx: &Connection,
    what: &str,
    sql: &str,
    args: impl rusqlite::Params,
) -> Result<usize, StoreError> {
    tx.prepare_cached(sql)
        .and_then(|mut s| s.execute(args))
        .map_err(store_err(what))
}

/// Like [`exec`], with a constraint violation reported as a refusal.
fn insert(
    tx: &Connection,
    what: &str,
    sql: &str,
    args: impl rusqlite::Params,
) -> Result<Outcome, StoreError> {
    match tx.prepare_cached(sql).and_then(|mut s| s.execute(args)) {
        Ok(_) => Ok(Outcome::Applied),
        Err(e) => refused_or(e, what),
    }
}

fn apply_one(tx: &Connection, write: &Write) -> Result<Outcome, StoreError> {
    match write {
        Write::CreateThread {
            thread_id,
            parent_thread_id,
            created_at,
        } => {
            return insert(
                tx,
                "create thread",
                "INSERT INTO threads (thread_id, parent_thread_id, title, created_at, head_seq) \
                 VALUES (?1, ?2, NULL, ?3, 0)",
                params![
                    thread_id.as_str(),
                    parent_thread_id.as_ref().map(ThreadId::as_str),
                    created_at
                ],
            );
        }
        Write::SetTitle { thread_id, title } => {
            let n = exec(
                tx,
                "set title",
                "UPDATE threads SET title = ?2 WHERE thread_id = ?1",
                params![thread_id.as_str(), title],
            )?;
            ensure_changed(n, "set title", thread_id)?;
        }
        Write::AppendEvent {
            thread_id,
            seq,
            idempotency_key,
            json,
        } => {
            return insert(
                tx,
                "append",
                "INSERT INTO events (thread_id, seq, idempotency_key, json) VALUES (?1, ?2, ?3, ?4)",
                params![thread_id.as_str(), to_i64(*seq), idempotency_key, &**json],
            );
        }
        Write::PutGrant {
            thread_id,
            principal_id,
            role,
        } => {
            // REPLACE deletes the old row, so a replaced grant moves to the
            // end, as in the memory backend.
            exec(
                tx,
                "put grant",
                "INSERT OR REPLACE INTO grants (thread_id, principal_id, role) VALUES (?1, ?2, ?3)",
                params![thread_id.as_str(), principal_id.as_str(), role.as_str()],
            )?;
        }
        Write::DeleteGrant {
            thread_id,
            principal_id,
        } => {
            exec(
                tx,
                "delete grant",
                "DELETE FROM grants WHERE thread_id = ?1 AND principal_id = ?2",
                params![thread_id.as_str(), principal_id.as_str()],
            )?;
        }
        Write::PutParticipant {
            thread_id,
            participant,
        } => {
            // An upsert keeps the row in place: participants stay in join order.
            exec(
                tx,
                "put participant",
                "INSERT INTO participants (thread_id, principal_id, role, joined_at) \
                 VALUES (?1, ?2, ?3, ?4) ON CONFLICT (thread_id, principal_id) \
                 DO UPDATE SET role = excluded.role, joined_at = excluded.joined_at",
                params![
                    thread_id.as_str(),
                    participant.principal_id.as_str(),
                    participant.role.as_str(),
                    participant.joined_at
                ],
            )?;
        }
        Write::DeleteParticipant {
            thread_id,
            principal_id,
        } => {
            exec(
                tx,
                "delete participant",
                "DELETE FROM participants WHERE thread_id = ?1 AND principal_id = ?2",
                params![thread_id.as_str(), principal_id.as_str()],
            )?;
        }
    }
    Ok(Outcome::Applied)
}
