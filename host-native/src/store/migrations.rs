//! Schema migrations, run at start-up in order. A migration once shipped is
//! never edited: changes are new entries at the end.

use bubble_core::store::StoreError;
use rusqlite::Connection;

/// Every migration; the schema version is the number applied.
const MIGRATIONS: &[&str] = &[
    // 1: threads, events, grants, participants. Events keep a rowid: bodies
    // reach 64 KiB, too large for a WITHOUT ROWID tree to stay compact.
    "CREATE TABLE threads (
        thread_id        TEXT PRIMARY KEY NOT NULL,
        parent_thread_id TEXT,
        title            TEXT,
        created_at       TEXT NOT NULL,
        head_seq         INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE events (
        thread_id       TEXT NOT NULL REFERENCES threads (thread_id),
        seq             INTEGER NOT NULL,
        idempotency_key TEXT,
        json            TEXT NOT NULL,
        PRIMARY KEY (thread_id, seq)
    );
    CREATE UNIQUE INDEX events_idempotency_key
        ON events (thread_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
    CREATE TABLE grants (
        thread_id    TEXT NOT NULL REFERENCES threads (thread_id),
        principal_id TEXT NOT NULL,
        role         TEXT NOT NULL,
        UNIQUE (thread_id, principal_id)
    );
    CREATE TABLE participants (
        thread_id    TEXT NOT NULL REFERENCES threads (thread_id),
        principal_id TEXT NOT NULL,
        role         TEXT NOT NULL,
        joined_at    TEXT NOT NULL,
        UNIQUE (thread_id, principal_id)
    );",
    // 2: conditional writes compare a thread's version; threads are listed
    // by parent in id order.
    "ALTER TABLE threads ADD COLUMN version INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX threads_parent ON threads (parent_thread_id, thread_id);",
];

fn err(context: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    move |e| StoreError::Failed(format!("migration ({context}): {e}"))
}

/// Brings the schema up to date, atomically per run.
pub(crate) fn run(conn: &mut Connection) -> Result<(), StoreError> {
    let tx = conn.transaction().map_err(err("begin"))?;
    tx.execute_batch("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        .map_err(err("schema_version"))?;
    let current: Option<i64> = tx
        .query_row("SELECT max(version) FROM schema_version", [], |row| {
            row.get(0)
        })
        .map_err(err("read version"))?;
    let current = usize::try_from(current.unwrap_or(0)).unwrap_or(0);
    if current > MIGRATIONS.len() {
        return Err(StoreError::Failed(format!(
            "the database has schema version {current}, newer than this build ({})",
            MIGRATIONS.len()
        )));
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(current) {
        tx.execute_batch(sql).map_err(err("apply"))?;
        tx.execute("DELETE FROM schema_version", [])
            .map_err(err("bump"))?;
        tx.execute(
            "INSERT INTO schema_version (version) VALUES (?1)",
            [i as i64 + 1],
        )
        .map_err(err("bump"))?;
    }
    tx.commit().map_err(err("commit"))
}
