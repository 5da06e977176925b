//! Conditional writes: every batch of one commit in one transaction, each
//! thread's group applied only when the thread is still where the group
//! expects it.
//!
//! Locks: before anything else the transaction takes a transaction-scoped
//! advisory lock on each thread it creates, then locks the row of every
//! existing thread it touches (`FOR UPDATE`), each set in one fixed order.
//! Another node committing overlapping threads waits for this one instead
//! of deadlocking with it, and while a thread's row is locked no other
//! writer can add its events, grants or participants.
//!
//! A group first claims its thread in one statement: the `UPDATE` to the
//! recorded head, version and title on condition that the row still has
//! the expected head and version and that none of the group's idempotency
//! keys is taken (under the row lock, that check is exact), or, for a group
//! creating its thread, the `INSERT … ON CONFLICT DO NOTHING` of the row.
//! The same statement inserts the group's events, only if the claim
//! succeeded. A group whose claim fails has written nothing and is
//! reported refused; later groups for that thread then expect a version it
//! never reached and are refused too. So a refusal needs no savepoint: no
//! constraint can refuse a write once its thread is claimed, and one that
//! does anyway is a store failure, as in the SQLite backend.

use std::cell::Cell;
use std::collections::HashSet;

use bubble_core::ids::ThreadId;
use bubble_core::store::{Batch, StoreError, ThreadWrites, Version, Write};
use sqlx::postgres::PgConnection;
use sqlx::Connection as _;

use super::postgres_read::bound;
use super::postgres_session::sql_err;

/// Applies `batches` in one transaction, setting `committing` once `COMMIT`
/// is sent. Returns, per batch, the threads whose groups were refused.
pub(super) async fn apply(
    conn: &mut PgConnection,
    batches: &[&Batch],
    committing: &Cell<bool>,
) -> Result<Vec<Vec<ThreadId>>, StoreError> {
    for group in batches.iter().flat_map(|b| &b.threads) {
        check_group(group)?;
    }
    let mut tx = conn.begin().await.map_err(sql_err("begin"))?;
    match apply_groups(&mut tx, batches).await {
        Ok(refused) => {
            committing.set(true);
            tx.commit().await.map_err(sql_err("commit"))?;
            Ok(refused)
        }
        Err(e) => {
            // The database refused a statement: roll back now rather than
            // leave the session idle in a failed transaction. (A lost
            // connection is dropped; the server rolls back.)
            if matches!(e, StoreError::Failed(_)) {
                let _ = tx.rollback().await;
            }
            Err(e)
        }
    }
}

/// Locks the threads of `batches`, then applies their groups in order.
async fn apply_groups(
    conn: &mut PgConnection,
    batches: &[&Batch],
) -> Result<Vec<Vec<ThreadId>>, StoreError> {
    lock_threads(conn, batches.iter().flat_map(|b| &b.threads)).await?;
    let mut refused = Vec::with_capacity(batches.len());
    for batch in batches {
        let mut mine = Vec::new();
        for group in &batch.threads {
            if !apply_group(conn, group).await? {
                mine.push(group.thread_id.clone());
            }
        }
        refused.push(mine);
    }
    Ok(refused)
}

/// The engine assigns seqs gapless from the head it expects; anything else
/// is a bug, refused before anything is written. So is a title holding
/// U+0000, which PostgreSQL text cannot store (the engine accepts it).
fn check_group(group: &ThreadWrites) -> Result<(), StoreError> {
    let thread = &group.thread_id;
    if group
        .record
        .title
        .as_deref()
        .is_some_and(|t| t.contains('\0'))
    {
        return Err(StoreError::Failed(format!(
            "the title of {thread} holds U+0000, which PostgreSQL cannot store"
        )));
    }
    let mut head = group.expect.map_or(0, |v| v.head_seq);
    for write in &group.writes {
        if write_thread(write) != thread {
            return Err(StoreError::Failed(format!(
                "a write to {} in the group of {thread}",
                write_thread(write)
            )));
        }
        if let Write::AppendEvent { seq, .. } = write {
            if *seq != head + 1 {
                return Err(StoreError::Failed(format!(
                    "append of seq {seq} after {head} on {thread}"
                )));
            }
            head = *seq;
        }
    }
    if head != group.record.head_seq {
        return Err(StoreError::Failed(format!(
            "group of {thread} ends at seq {head}, its record at {}",
            group.record.head_seq
        )));
    }
    Ok(())
}

fn write_thread(write: &Write) -> &ThreadId {
    match write {
        Write::CreateThread { thread_id, .. }
        | Write::SetTitle { thread_id, .. }
        | Write::AppendEvent { thread_id, .. }
        | Write::PutGrant { thread_id, .. }
        | Write::DeleteGrant { thread_id, .. }
        | Write::PutParticipant { thread_id, .. }
        | Write::DeleteParticipant { thread_id, .. } => thread_id,
    }
}

/// Takes the advisory locks of the threads created (in key order), then
/// the row locks of the existing threads touched (in id order).
async fn lock_threads<'a>(
    conn: &mut PgConnection,
    groups: impl Iterator<Item = &'a ThreadWrites>,
) -> Result<(), StoreError> {
    let mut touched = Vec::new();
    let mut created = Vec::new();
    for group in groups {
        touched.push(group.thread_id.as_str());
        if group.expect.is_none() {
            created.push(group.thread_id.as_str());
        }
    }
    if !created.is_empty() {
        // A thread being created has no row to lock yet: two nodes creating
        // the same threads in different orders would otherwise wait on each
        // other's inserts.
        sqlx::query(
            "SELECT count(pg_advisory_xact_lock(key)) FROM \
             (SELECT DISTINCT hashtextextended(id, 0) AS key FROM unnest($1::text[]) AS id \
              ORDER BY key) AS keys",
        )
        .bind(&created)
        .execute(&mut *conn)
        .await
        .map_err(sql_err("lock new threads"))?;
    }
    sqlx::query("SELECT 1 FROM threads WHERE thread_id = ANY($1) ORDER BY thread_id FOR UPDATE")
        .bind(&touched)
        .execute(&mut *conn)
        .await
        .map_err(sql_err("lock threads"))?;
    Ok(())
}

/// The group's appends as columns: seqs, idempotency keys, event JSON.
struct Appends<'a> {
    seqs: Vec<i64>,
    keys: Vec<Option<&'a str>>,
    json: Vec<&'a str>,
}

impl<'a> Appends<'a> {
    /// The appends of `group`; `None` when two of them carry the same key
    /// (the second could never be stored: the group is refused).
    fn of(group: &'a ThreadWrites) -> Option<Appends<'a>> {
        let mut appends = Appends {
            seqs: Vec::new(),
            keys: Vec::new(),
            json: Vec::new(),
        };
        let mut seen = HashSet::new();
        for write in &group.writes {
            if let Write::AppendEvent {
                seq,
                idempotency_key,
                json,
                ..
            } = write
            {
                if let Some(key) = idempotency_key {
                    if !seen.insert(key.as_str()) {
                        return None;
                    }
                }
                appends.seqs.push(bound(*seq));
                appends.keys.push(idempotency_key.as_deref());
                appends.json.push(json);
            }
        }
        Some(appends)
    }
}

/// Applies `group` unless its thread moved or one of its idempotency keys
/// is taken; false when refused (nothing of it was applied).
async fn apply_group(conn: &mut PgConnection, group: &ThreadWrites) -> Result<bool, StoreError> {
    let Some(appends) = Appends::of(group) else {
        return Ok(false);
    };
    let claimed = match group.expect {
        Some(expect) => advance(conn, group, expect, &appends).await?,
        None => create(conn, group, &appends).await?,
    };
    if !claimed {
        return Ok(false);
    }
    for write in &group.writes {
        apply_access(conn, write).await?;
    }
    Ok(true)
}

/// Moves the thread from `expect` to the group's record and appends its
/// events, if the thread is still at `expect` and the keys are free.
async fn advance(
    conn: &mut PgConnection,
    group: &ThreadWrites,
    expect: Version,
    appends: &Appends<'_>,
) -> Result<bool, StoreError> {
    let record = &group.record;
    let claimed: i64 = sqlx::query_scalar(
        "WITH claimed AS ( \
             UPDATE threads SET head_seq = $2, version = $3, title = $4 \
             WHERE thread_id = $1 AND head_seq = $5 AND version = $6 \
             AND NOT EXISTS (SELECT 1 FROM events WHERE events.thread_id = $1 \
                 AND events.idempotency_key IS NOT NULL \
                 AND events.idempotency_key = ANY($8::text[])) \
             RETURNING thread_id), \
         appended AS ( \
             INSERT INTO events (thread_id, seq, idempotency_key, json) \
             SELECT claimed.thread_id, e.seq, e.idempotency_key, e.json \
             FROM claimed, unnest($7::bigint[], $8::text[], $9::text[]) \
                 AS e (seq, idempotency_key, json)) \
         SELECT count(*) FROM claimed",
    )
    .bind(group.thread_id.as_str())
    .bind(bound(record.head_seq))
    // Versions are u64 tokens stored as bigint: `as` round-trips them.
    .bind(record.version as i64)
    .bind(record.title.as_deref())
    .bind(bound(expect.head_seq))
    .bind(expect.version as i64)
    .bind(&appends.seqs)
    .bind(&appends.keys)
    .bind(&appends.json)
    .fetch_one(&mut *conn)
    .await
    .map_err(sql_err("advance thread"))?;
    Ok(claimed == 1)
}

/// Creates the thread as the group records it (its `CreateThread` write
/// says the same), with its events, unless it exists.
async fn create(
    conn: &mut PgConnection,
    group: &ThreadWrites,
    appends: &Appends<'_>,
) -> Result<bool, StoreError> {
    let record = &group.record;
    let created: i64 = sqlx::query_scalar(
        "WITH claimed AS ( \
             INSERT INTO threads \
                 (thread_id, parent_thread_id, title, created_at, head_seq, version) \
             VALUES ($1, $2, $3, $4, $5, $6) \
             ON CONFLICT (thread_id) DO NOTHING \
             RETURNING thread_id), \
         appended AS ( \
             INSERT INTO events (thread_id, seq, idempotency_key, json) \
             SELECT claimed.thread_id, e.seq, e.idempotency_key, e.json \
             FROM claimed, unnest($7::bigint[], $8::text[], $9::text[]) \
                 AS e (seq, idempotency_key, json)) \
         SELECT count(*) FROM claimed",
    )
    .bind(group.thread_id.as_str())
    .bind(record.parent_thread_id.as_ref().map(ThreadId::as_str))
    .bind(record.title.as_deref())
    .bind(&record.created_at)
    .bind(bound(record.head_seq))
    .bind(record.version as i64)
    .bind(&appends.seqs)
    .bind(&appends.keys)
    .bind(&appends.json)
    .fetch_one(&mut *conn)
    .await
    .map_err(sql_err("create thread"))?;
    Ok(created == 1)
}

/// Applies a grant or participant write; the others were applied with the
/// claim (the thread row is written from the group's record, the events
/// with it).
async fn apply_access(conn: &mut PgConnection, write: &Write) -> Result<(), StoreError> {
    let (what, statement) = match write {
        Write::CreateThread { .. } | Write::SetTitle { .. } | Write::AppendEvent { .. } => {
            return Ok(())
        }
        Write::PutGrant {
            thread_id,
            principal_id,
            role,
        } => (
            "put grant",
            // A replaced grant moves to the end, as in the other backends.
            sqlx::query(
                "INSERT INTO grants (thread_id, principal_id, role, grant_order) \
                 VALUES ($1, $2, $3, \
                     (SELECT COALESCE(max(grant_order), 0) + 1 FROM grants WHERE thread_id = $1)) \
                 ON CONFLICT (thread_id, principal_id) \
                 DO UPDATE SET role = excluded.role, grant_order = excluded.grant_order",
            )
            .bind(thread_id.as_str())
            .bind(principal_id.as_str())
            .bind(role.as_str()),
        ),
        Write::DeleteGrant {
            thread_id,
            principal_id,
        } => (
            "delete grant",
            sqlx::query("DELETE FROM grants WHERE thread_id = $1 AND principal_id = $2")
                .bind(thread_id.as_str())
                .bind(principal_id.as_str()),
        ),
        Write::PutParticipant {
            thread_id,
            participant,
        } => (
            "put participant",
            // A replaced row keeps its place: participants stay in join order.
            sqlx::query(
                "INSERT INTO participants (thread_id, principal_id, role, joined_at, join_order) \
                 VALUES ($1, $2, $3, $4, \
                     (SELECT COALESCE(max(join_order), 0) + 1 FROM participants \
                      WHERE thread_id = $1)) \
                 ON CONFLICT (thread_id, principal_id) \
                 DO UPDATE SET role = excluded.role, joined_at = excluded.joined_at",
            )
            .bind(thread_id.as_str())
            .bind(participant.principal_id.as_str())
            .bind(participant.role.as_str())
            .bind(&participant.joined_at),
        ),
        Write::DeleteParticipant {
            thread_id,
            principal_id,
        } => (
            "delete participant",
            sqlx::query("DELETE FROM participants WHERE thread_id = $1 AND principal_id = $2")
                .bind(thread_id.as_str())
                .bind(principal_id.as_str()),
        ),
    };
    statement
        .execute(&mut *conn)
        .await
        .map(drop)
        .map_err(sql_err(what))
}
