//! The engine's reads, answered from a PostgreSQL connection. A thread
//! record (its row, grants and participants) is read by one statement, so
//! it is one consistent snapshot.

use bubble_core::ids::{PrincipalId, ThreadId};
use bubble_core::model::{Participant, StoredEvent};
use bubble_core::policy::Role;
use bubble_core::store::{ReadQuery, ReadResult, StoreError, ThreadRecord};
use sqlx::postgres::PgConnection;

use super::postgres_session::sql_err;

/// A query bound: a u64 counter as bigint, saturating (seqs and limits
/// never come near 2^63).
pub(super) fn bound(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// Answers `query` on `conn`.
pub(super) async fn read(
    conn: &mut PgConnection,
    query: &ReadQuery,
) -> Result<ReadResult, StoreError> {
    Ok(match query {
        ReadQuery::Events {
            thread_id,
            from_seq,
            through_seq,
            limit,
        } => ReadResult::Events(events(conn, thread_id, *from_seq, *through_seq, *limit).await?),
        ReadQuery::Idempotent { thread_id, key } => {
            ReadResult::Event(idempotent(conn, thread_id, key).await?)
        }
        ReadQuery::Thread { thread_id } => ReadResult::Thread(record(conn, thread_id).await?),
        ReadQuery::Threads {
            parent,
            after,
            limit,
        } => ReadResult::Threads(records(conn, parent.as_ref(), after.as_ref(), *limit).await?),
    })
}

fn stored_event((seq, json): (i64, String)) -> Result<StoredEvent, StoreError> {
    Ok(StoredEvent {
        seq: u64::try_from(seq)
            .map_err(|_| StoreError::Failed(format!("negative seq {seq} in the database")))?,
        json: json.into(),
    })
}

async fn events(
    conn: &mut PgConnection,
    thread: &ThreadId,
    from_seq: u64,
    through_seq: u64,
    limit: usize,
) -> Result<Vec<StoredEvent>, StoreError> {
    let rows: Vec<(i64, String)> = sqlx::query_as(
        "SELECT seq, json FROM events WHERE thread_id = $1 AND seq >= $2 AND seq <= $3 \
         ORDER BY seq LIMIT $4",
    )
    .bind(thread.as_str())
    .bind(bound(from_seq))
    .bind(bound(through_seq))
    .bind(bound(limit as u64))
    .fetch_all(conn)
    .await
    .map_err(sql_err("read events"))?;
    rows.into_iter().map(stored_event).collect()
}

async fn idempotent(
    conn: &mut PgConnection,
    thread: &ThreadId,
    key: &str,
) -> Result<Option<StoredEvent>, StoreError> {
    let row: Option<(i64, String)> = sqlx::query_as(
        "SELECT seq, json FROM events WHERE thread_id = $1 AND idempotency_key = $2",
    )
    .bind(thread.as_str())
    .bind(key)
    .fetch_optional(conn)
    .await
    .map_err(sql_err("read idempotency key"))?;
    row.map(stored_event).transpose()
}

/// `SELECT` of whole records from `threads t`, followed by `$where`: the
/// row, then grants and participants as arrays in their order (`NULL`
/// when there are none).
macro_rules! select_records {
    ($where:literal) => {
        concat!(
            "SELECT t.thread_id, t.parent_thread_id, t.title, t.created_at, t.head_seq, \
             t.version, g.principals, g.roles, p.principals, p.roles, p.joined \
             FROM threads t \
             CROSS JOIN LATERAL (SELECT array_agg(principal_id ORDER BY grant_order) AS principals, \
                 array_agg(role ORDER BY grant_order) AS roles \
                 FROM grants WHERE grants.thread_id = t.thread_id) g \
             CROSS JOIN LATERAL (SELECT array_agg(principal_id ORDER BY join_order) AS principals, \
                 array_agg(role ORDER BY join_order) AS roles, \
                 array_agg(joined_at ORDER BY join_order) AS joined \
                 FROM participants WHERE participants.thread_id = t.thread_id) p ",
            $where
        )
    };
}

/// One row of [`select_records!`].
type RecordRow = (
    String,
    Option<String>,
    Option<String>,
    String,
    i64,
    i64,
    Option<Vec<String>>,
    Option<Vec<String>>,
    Option<Vec<String>>,
    Option<Vec<String>>,
    Option<Vec<String>>,
);

fn parse_role(raw: &str) -> Result<Role, StoreError> {
    Role::parse(raw)
        .ok_or_else(|| StoreError::Failed(format!("unknown role {raw:?} in the database")))
}

fn parse_thread(raw: &str) -> Result<ThreadId, StoreError> {
    ThreadId::parse(raw)
        .map_err(|e| StoreError::Failed(format!("bad thread id in the database: {e}")))
}

/// Arrays aggregated side by side must be as long as each other.
fn same_length(thread: &str, lengths: &[usize]) -> Result<(), StoreError> {
    if lengths.windows(2).all(|w| w[0] == w[1]) {
        Ok(())
    } else {
        Err(StoreError::Failed(format!(
            "grants or participants of {thread} read back misaligned"
        )))
    }
}

fn record_of(row: RecordRow) -> Result<ThreadRecord, StoreError> {
    let (
        id,
        parent,
        title,
        created_at,
        head,
        version,
        g_principals,
        g_roles,
        p_principals,
        p_roles,
        p_joined,
    ) = row;
    let (g_principals, g_roles) = (
        g_principals.unwrap_or_default(),
        g_roles.unwrap_or_default(),
    );
    let (p_principals, p_roles, p_joined) = (
        p_principals.unwrap_or_default(),
        p_roles.unwrap_or_default(),
        p_joined.unwrap_or_default(),
    );
    same_length(&id, &[g_principals.len(), g_roles.len()])?;
    same_length(&id, &[p_principals.len(), p_roles.len(), p_joined.len()])?;
    let grants = g_principals
        .into_iter()
        .zip(g_roles)
        .map(|(principal, role)| Ok((PrincipalId::new(principal), parse_role(&role)?)))
        .collect::<Result<_, StoreError>>()?;
    let participants = p_principals
        .into_iter()
        .zip(p_roles)
        .zip(p_joined)
        .map(|((principal, role), joined_at)| {
            Ok(Participant {
                principal_id: PrincipalId::new(principal),
                role: parse_role(&role)?,
                joined_at,
            })
        })
        .collect::<Result<_, StoreError>>()?;
    Ok(ThreadRecord {
        parent_thread_id: parent.as_deref().map(parse_thread).transpose()?,
        title,
        created_at,
        head_seq: u64::try_from(head)
            .map_err(|_| StoreError::Failed(format!("negative head_seq on {id}")))?,
        // Stored through `as i64`; every u64 round-trips.
        version: version as u64,
        grants,
        participants,
        thread_id: parse_thread(&id)?,
    })
}

async fn record(
    conn: &mut PgConnection,
    thread: &ThreadId,
) -> Result<Option<ThreadRecord>, StoreError> {
    let row: Option<RecordRow> = sqlx::query_as(select_records!("WHERE t.thread_id = $1"))
        .bind(thread.as_str())
        .fetch_optional(conn)
        .await
        .map_err(sql_err("read thread"))?;
    row.map(record_of).transpose()
}

/// Records in id order after `after` (ids are never empty, so `''` is
/// below them all), children of `parent` or all of them.
async fn records(
    conn: &mut PgConnection,
    parent: Option<&ThreadId>,
    after: Option<&ThreadId>,
    limit: usize,
) -> Result<Vec<ThreadRecord>, StoreError> {
    let after = after.map(ThreadId::as_str);
    let limit = bound(limit as u64);
    let rows: Vec<RecordRow> = match parent {
        Some(parent) => {
            sqlx::query_as(select_records!(
                "WHERE t.parent_thread_id = $1 AND t.thread_id > COALESCE($2, '') \
                 ORDER BY t.thread_id LIMIT $3"
            ))
            .bind(parent.as_str())
            .bind(after)
            .bind(limit)
            .fetch_all(conn)
            .await
        }
        None => {
            sqlx::query_as(select_records!(
                "WHERE t.thread_id > COALESCE($1, '') ORDER BY t.thread_id LIMIT $2"
            ))
            .bind(after)
            .bind(limit)
            .fetch_all(conn)
            .await
        }
    }
    .map_err(sql_err("list threads"))?;
    rows.into_iter().map(record_of).collect()
}

/// `(head_seq, version)` of each of `threads`, in their order; `None` for
/// a thread that does not exist.
pub(super) async fn versions(
    conn: &mut PgConnection,
    threads: &[ThreadId],
) -> Result<Vec<(ThreadId, super::postgres::Committed)>, StoreError> {
    let ids: Vec<&str> = threads.iter().map(ThreadId::as_str).collect();
    let rows: Vec<(String, i64, i64)> = sqlx::query_as(
        "SELECT thread_id, head_seq, version FROM threads WHERE thread_id = ANY($1)",
    )
    .bind(&ids)
    .fetch_all(conn)
    .await
    .map_err(sql_err("read versions"))?;
    let mut found = std::collections::HashMap::with_capacity(rows.len());
    for (id, head, version) in rows {
        let head = u64::try_from(head)
            .map_err(|_| StoreError::Failed(format!("negative head_seq on {id}")))?;
        found.insert(id, (head, version as u64));
    }
    Ok(threads
        .iter()
        .map(|t| (t.clone(), found.get(t.as_str()).copied()))
        .collect())
}
