//! Conditional writes: one thread's group of a batch, applied inside its own
//! savepoint when the thread is still where the group expects it.

use bubble_core::ids::ThreadId;
use bubble_core::store::{StoreError, ThreadWrites, Write};
use rusqlite::{params, Connection, ErrorCode};

use super::sqlite::{store_err, to_i64};
use super::sqlite_read::version;

/// A write refused by a constraint: another writer's row is in the way.
enum Outcome {
    Applied,
    Refused,
}

/// Applies `group` unless its thread moved; false when refused (nothing of
/// it was applied).
pub(super) fn apply_group(tx: &Connection, group: &ThreadWrites) -> Result<bool, StoreError> {
    if version(tx, &group.thread_id)? != group.expect {
        return Ok(false);
    }
    check_seqs(group)?;
    tx.execute_batch("SAVEPOINT thread_group")
        .map_err(store_err("savepoint"))?;
    let mut outcome = Outcome::Applied;
    for write in &group.writes {
        if let Outcome::Refused = apply_one(tx, write)? {
            outcome = Outcome::Refused;
            break;
        }
    }
    if let Outcome::Applied = outcome {
        let n = exec(
            tx,
            "advance thread",
            "UPDATE threads SET head_seq = ?2, version = ?3 WHERE thread_id = ?1",
            params![
                group.thread_id.as_str(),
                to_i64(group.record.head_seq),
                to_i64(group.record.version)
            ],
        )?;
        ensure_changed(n, "advance thread", &group.thread_id)?;
        tx.execute_batch("RELEASE thread_group")
            .map_err(store_err("release"))?;
        Ok(true)
    } else {
        tx.execute_batch("ROLLBACK TO thread_group; RELEASE thread_group")
            .map_err(store_err("rollback to savepoint"))?;
        Ok(false)
    }
}

/// The engine assigns seqs gapless from the head it expects; anything else
/// is a bug, refused before it reaches the table.
fn check_seqs(group: &ThreadWrites) -> Result<(), StoreError> {
    let mut head = group.expect.map_or(0, |v| v.head_seq);
    for write in &group.writes {
        if let Write::AppendEvent { seq, .. } = write {
            if *seq != head + 1 {
                return Err(StoreError(format!(
                    "append of seq {seq} after {head} on {}",
                    group.thread_id
                )));
            }
            head = *seq;
        }
    }
    if head != group.record.head_seq {
        return Err(StoreError(format!(
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
        _ => Err(StoreError(format!("{what}: {e}"))),
    }
}

fn ensure_changed(changed: usize, what: &str, thread: &ThreadId) -> Result<(), StoreError> {
    if changed == 1 {
        Ok(())
    } else {
        Err(StoreError(format!("{what}: no such thread {thread}")))
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
