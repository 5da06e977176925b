//! The engine's reads, answered from a SQLite connection.

use bubble_core::ids::{PrincipalId, ThreadId};
use bubble_core::model::{Participant, StoredEvent};
use bubble_core::policy::Role;
use bubble_core::store::{ReadQuery, ReadResult, StoreError, ThreadRecord};
use rusqlite::{params, Connection, OptionalExtension};

use super::sqlite::{store_err, to_i64};

/// Answers `query` from `conn`.
pub(super) fn read(conn: &Connection, query: &ReadQuery) -> Result<ReadResult, StoreError> {
    Ok(match query {
        ReadQuery::Events {
            thread_id,
            from_seq,
            through_seq,
            limit,
        } => ReadResult::Events(events(conn, thread_id, *from_seq, *through_seq, *limit)?),
        ReadQuery::Idempotent { thread_id, key } => {
            ReadResult::Event(idempotent(conn, thread_id, key)?)
        }
        ReadQuery::Thread { thread_id } => ReadResult::Thread(record(conn, thread_id)?),
        ReadQuery::Threads {
            parent,
            after,
            limit,
        } => ReadResult::Threads(records(conn, parent.as_ref(), after.as_ref(), *limit)?),
    })
}

fn event_row(row: &rusqlite::Row<'_>) -> rusqlite::Result<StoredEvent> {
    let seq: i64 = row.get(0)?;
    let json: String = row.get(1)?;
    Ok(StoredEvent {
        seq: u64::try_from(seq).unwrap_or(0),
        json: json.into(),
    })
}

fn events(
    conn: &Connection,
    thread: &ThreadId,
    from_seq: u64,
    through_seq: u64,
    limit: usize,
) -> Result<Vec<StoredEvent>, StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT seq, json FROM events WHERE thread_id = ?1 AND seq >= ?2 AND seq <= ?3 \
             ORDER BY seq LIMIT ?4",
        )
        .map_err(store_err("read events"))?;
    let rows = stmt
        .query_map(
            params![
                thread.as_str(),
                to_i64(from_seq),
                to_i64(through_seq),
                to_i64(limit as u64)
            ],
            event_row,
        )
        .map_err(store_err("read events"))?;
    rows.collect::<Result<_, _>>()
        .map_err(store_err("read events"))
}

fn idempotent(
    conn: &Connection,
    thread: &ThreadId,
    key: &str,
) -> Result<Option<StoredEvent>, StoreError> {
    conn.prepare_cached(
        "SELECT seq, json FROM events WHERE thread_id = ?1 AND idempotency_key = ?2",
    )
    .and_then(|mut stmt| {
        stmt.query_row(params![thread.as_str(), key], event_row)
            .optional()
    })
    .map_err(store_err("read idempotency key"))
}

fn parse_role(raw: &str) -> Result<Role, StoreError> {
    Role::parse(raw)
        .ok_or_else(|| StoreError::Failed(format!("unknown role {raw:?} in the database")))
}

fn parse_thread(raw: &str) -> Result<ThreadId, StoreError> {
    ThreadId::parse(raw)
        .map_err(|e| StoreError::Failed(format!("bad thread id in the database: {e}")))
}

fn record(conn: &Connection, thread: &ThreadId) -> Result<Option<ThreadRecord>, StoreError> {
    let err = store_err("read thread");
    let row = conn
        .prepare_cached(
            "SELECT parent_thread_id, title, created_at, head_seq, version \
             FROM threads WHERE thread_id = ?1",
        )
        .and_then(|mut stmt| {
            stmt.query_row(params![thread.as_str()], |row| {
                Ok((
                    row.get::<_, Option<String>>(0)?,
                    row.get::<_, Option<String>>(1)?,
                    row.get::<_, String>(2)?,
                    row.get::<_, i64>(3)?,
                    row.get::<_, i64>(4)?,
                ))
            })
            .optional()
        })
        .map_err(&err)?;
    let Some((parent, title, created_at, head, version)) = row else {
        return Ok(None);
    };
    let mut grants = Vec::new();
    let mut stmt = conn
        .prepare_cached("SELECT principal_id, role FROM grants WHERE thread_id = ?1 ORDER BY rowid")
        .map_err(&err)?;
    let mut rows = stmt.query(params![thread.as_str()]).map_err(&err)?;
    while let Some(row) = rows.next().map_err(&err)? {
        let principal: String = row.get(0).map_err(&err)?;
        let role: String = row.get(1).map_err(&err)?;
        grants.push((PrincipalId::new(principal), parse_role(&role)?));
    }
    let mut participants = Vec::new();
    let mut stmt = conn
        .prepare_cached(
            "SELECT principal_id, role, joined_at FROM participants WHERE thread_id = ?1 \
             ORDER BY rowid",
        )
        .map_err(&err)?;
    let mut rows = stmt.query(params![thread.as_str()]).map_err(&err)?;
    while let Some(row) = rows.next().map_err(&err)? {
        let principal: String = row.get(0).map_err(&err)?;
        let role: String = row.get(1).map_err(&err)?;
        participants.push(Participant {
            principal_id: PrincipalId::new(principal),
            role: parse_role(&role)?,
            joined_at: row.get(2).map_err(&err)?,
        });
    }
    Ok(Some(ThreadRecord {
        thread_id: thread.clone(),
        parent_thread_id: parent.as_deref().map(parse_thread).transpose()?,
        title,
        created_at,
        head_seq: u64::try_from(head)
            .map_err(|_| StoreError::Failed(format!("negative head_seq on {thread}")))?,
        version: u64::try_from(version).unwrap_or(0),
        grants,
        participants,
    }))
}

fn records(
    conn: &Connection,
    parent: Option<&ThreadId>,
    after: Option<&ThreadId>,
    limit: usize,
) -> Result<Vec<ThreadRecord>, StoreError> {
    let err = store_err("list threads");
    let sql = match parent {
        Some(_) => {
            "SELECT thread_id FROM threads WHERE parent_thread_id = ?1 \
             AND (?2 IS NULL OR thread_id > ?2) ORDER BY thread_id LIMIT ?3"
        }
        None => {
            "SELECT thread_id FROM threads WHERE ?1 IS NULL \
             AND (?2 IS NULL OR thread_id > ?2) ORDER BY thread_id LIMIT ?3"
        }
    };
    let ids: Vec<String> = conn
        .prepare_cached(sql)
        .and_then(|mut stmt| {
            stmt.query_map(
                params![
                    parent.map(ThreadId::as_str),
                    after.map(ThreadId::as_str),
                    to_i64(limit as u64)
                ],
                |row| row.get(0),
            )?
            .collect()
        })
        .map_err(&err)?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some(record) = record(conn, &parse_thread(&id)?)? {
            out.push(record);
        }
    }
    Ok(out)
}
