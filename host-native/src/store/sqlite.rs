//! The embedded SQLite backend: one file, WAL journal, `synchronous=FULL`.
//!
//! Durability: [`SqliteStore::apply`] runs its writes in one transaction and
//! returns only after `COMMIT`. With `journal_mode=WAL` and
//! `synchronous=FULL`, SQLite fsyncs the WAL on every commit, so a write that
//! `apply` reported is on stable storage: it survives `kill -9` of the server
//! and a power loss. The host reports a batch durable to the engine only
//! after `apply` returned, and the engine releases every acknowledgement and
//! delivery that depends on a write only then.
//!
//! Readers ([`SqliteReader`]) use their own connections; WAL lets them read
//! committed data while the writer commits. The writer checkpoints the WAL
//! itself between commits, never inside one (see `checkpoint.rs`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use bubble_core::ids::{PrincipalId, ThreadId};
use bubble_core::model::{Participant, StoredEvent};
use bubble_core::policy::Role;
use bubble_core::store::{Backend, EventStore, Snapshot, StoreError, ThreadRecord, Write};
use rusqlite::{params, Connection, OpenFlags, OptionalExtension};

use super::checkpoint::{Checkpoints, WAL_SIZE_LIMIT};
use super::lock::{self, StoreLock};
use super::{migrations, OpenError};

/// How long a connection waits for a lock held by another connection.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The writer: owns the only read-write connection and applies batches.
#[derive(Debug)]
pub struct SqliteStore {
    conn: Connection,
    path: PathBuf,
    /// When the next WAL checkpoint is due.
    checkpoints: Checkpoints,
    /// Held while the store is open: one server per file.
    _lock: StoreLock,
}

/// A read-only connection for history reads and readiness probes.
#[derive(Debug)]
pub struct SqliteReader {
    conn: Connection,
}

fn store_err(context: &str) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    move |e| StoreError(format!("{context}: {e}"))
}

impl SqliteStore {
    /// Opens (creating it and its directory when missing) the database at
    /// `path` and runs the migrations. Fails when another process has it
    /// open (see [`SqliteStore::open_exclusive`]).
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        SqliteStore::open_exclusive(path).map_err(|e| match e {
            OpenError::Store(e) => e,
            locked @ OpenError::Locked(_) => StoreError(locked.to_string()),
        })
    }

    /// Like [`SqliteStore::open`], telling a store held by another process
    /// (its `<path>.lock` is locked) apart from other failures.
    pub fn open_exclusive(path: &Path) -> Result<SqliteStore, OpenError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| StoreError(format!("creating {}: {e}", dir.display())))?;
        }
        let lock = lock::acquire(path)?;
        let conn = Connection::open(path).map_err(store_err("opening the database"))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(store_err("busy_timeout"))?;
        let mode: String = conn
            .query_row("PRAGMA journal_mode=WAL", [], |row| row.get(0))
            .map_err(store_err("journal_mode"))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError(format!("the database refused WAL mode (got {mode})")).into());
        }
        conn.execute_batch("PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;")
            .map_err(store_err("pragmas"))?;
        // The writer checkpoints after commits, not inside them.
        conn.pragma_update(None, "wal_autocheckpoint", 0)
            .map_err(store_err("wal_autocheckpoint"))?;
        conn.pragma_update(None, "journal_size_limit", WAL_SIZE_LIMIT)
            .map_err(store_err("journal_size_limit"))?;
        let mut conn = conn;
        migrations::run(&mut conn)?;
        Ok(SqliteStore {
            conn,
            path: path.to_owned(),
            checkpoints: Checkpoints::default(),
            _lock: lock,
        })
    }

    /// A new read-only connection to the same database.
    pub fn reader(&self) -> Result<SqliteReader, StoreError> {
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(&self.path, flags)
            .map_err(store_err("opening a reader"))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(store_err("busy_timeout"))?;
        Ok(SqliteReader { conn })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl SqliteReader {
    /// A trivial query: the store answers.
    pub fn probe(&self) -> Result<(), StoreError> {
        self.conn
            .query_row("SELECT count(*) FROM schema_version", [], |row| {
                row.get::<_, i64>(0)
            })
            .map(drop)
            .map_err(store_err("probe"))
    }
}

fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

fn read_events(
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
        .map_err(store_err("read_events"))?;
    let rows = stmt
        .query_map(
            params![
                thread.as_str(),
                to_i64(from_seq),
                to_i64(through_seq),
                to_i64(limit as u64)
            ],
            |row| {
                let seq: i64 = row.get(0)?;
                let json: String = row.get(1)?;
                Ok(StoredEvent {
                    seq: u64::try_from(seq).unwrap_or(0),
                    json: json.into(),
                })
            },
        )
        .map_err(store_err("read_events"))?;
    rows.collect::<Result<_, _>>()
        .map_err(store_err("read_events"))
}

fn find_idempotent(
    conn: &Connection,
    thread: &ThreadId,
    key: &str,
) -> Result<Option<StoredEvent>, StoreError> {
    conn.prepare_cached(
        "SELECT seq, json FROM events WHERE thread_id = ?1 AND idempotency_key = ?2",
    )
    .and_then(|mut stmt| {
        stmt.query_row(params![thread.as_str(), key], |row| {
            let seq: i64 = row.get(0)?;
            let json: String = row.get(1)?;
            Ok(StoredEvent {
                seq: u64::try_from(seq).unwrap_or(0),
                json: json.into(),
            })
        })
        .optional()
    })
    .map_err(store_err("find_idempotent"))
}

impl EventStore for SqliteReader {
    fn read_events(
        &self,
        thread: &ThreadId,
        from_seq: u64,
        through_seq: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        read_events(&self.conn, thread, from_seq, through_seq, limit)
    }

    fn find_idempotent(
        &self,
        thread: &ThreadId,
        key: &str,
    ) -> Result<Option<StoredEvent>, StoreError> {
        find_idempotent(&self.conn, thread, key)
    }
}

impl EventStore for SqliteStore {
    fn read_events(
        &self,
        thread: &ThreadId,
        from_seq: u64,
        through_seq: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        read_events(&self.conn, thread, from_seq, through_seq, limit)
    }

    fn find_idempotent(
        &self,
        thread: &ThreadId,
        key: &str,
    ) -> Result<Option<StoredEvent>, StoreError> {
        find_idempotent(&self.conn, thread, key)
    }
}

fn parse_role(raw: &str) -> Result<Role, StoreError> {
    [Role::Owner, Role::ThreadManager, Role::Member, Role::Reader]
        .into_iter()
        .find(|r| r.as_str() == raw)
        .ok_or_else(|| StoreError(format!("unknown role {raw:?} in the database")))
}

impl Backend for SqliteStore {
    fn load(&self) -> Result<Snapshot, StoreError> {
        let err = store_err("load");
        let mut threads = Vec::new();
        let mut index = std::collections::HashMap::new();
        let mut stmt = self
            .conn
            .prepare("SELECT thread_id, parent_thread_id, title, created_at, head_seq FROM threads ORDER BY rowid")
            .map_err(&err)?;
        let mut rows = stmt.query([]).map_err(&err)?;
        while let Some(row) = rows.next().map_err(&err)? {
            let id: String = row.get(0).map_err(&err)?;
            let parent: Option<String> = row.get(1).map_err(&err)?;
            let head: i64 = row.get(4).map_err(&err)?;
            let thread_id = parse_thread(&id)?;
            index.insert(id.clone(), threads.len());
            threads.push(ThreadRecord {
                thread_id,
                parent_thread_id: parent.as_deref().map(parse_thread).transpose()?,
                title: row.get(2).map_err(&err)?,
                created_at: row.get(3).map_err(&err)?,
                head_seq: u64::try_from(head)
                    .map_err(|_| StoreError(format!("negative head_seq on {id}")))?,
                grants: Vec::new(),
                participants: Vec::new(),
            });
        }
        let mut stmt = self
            .conn
            .prepare("SELECT thread_id, principal_id, role FROM grants ORDER BY rowid")
            .map_err(&err)?;
        let mut rows = stmt.query([]).map_err(&err)?;
        while let Some(row) = rows.next().map_err(&err)? {
            let id: String = row.get(0).map_err(&err)?;
            let principal: String = row.get(1).map_err(&err)?;
            let role: String = row.get(2).map_err(&err)?;
            let record = record_of(&mut threads, &index, &id)?;
            record
                .grants
                .push((PrincipalId::new(principal), parse_role(&role)?));
        }
        let mut stmt = self
            .conn
            .prepare(
                "SELECT thread_id, principal_id, role, joined_at FROM participants ORDER BY rowid",
            )
            .map_err(&err)?;
        let mut rows = stmt.query([]).map_err(&err)?;
        while let Some(row) = rows.next().map_err(&err)? {
            let id: String = row.get(0).map_err(&err)?;
            let principal: String = row.get(1).map_err(&err)?;
            let role: String = row.get(2).map_err(&err)?;
            let record = record_of(&mut threads, &index, &id)?;
            record.participants.push(Participant {
                principal_id: PrincipalId::new(principal),
                role: parse_role(&role)?,
                joined_at: row.get(3).map_err(&err)?,
            });
        }
        Ok(Snapshot { threads })
    }

    fn apply(&mut self, writes: &[Write]) -> Result<(), StoreError> {
        let tx = self.conn.transaction().map_err(store_err("begin"))?;
        for write in writes {
            apply_one(&tx, write)?;
        }
        tx.commit().map_err(store_err("commit"))
    }

    fn after_commit(&mut self) -> Result<(), StoreError> {
        self.checkpoints.after_commit(&self.conn)
    }
}

fn parse_thread(raw: &str) -> Result<ThreadId, StoreError> {
    ThreadId::parse(raw).map_err(|e| StoreError(format!("bad thread id in the database: {e}")))
}

fn record_of<'t>(
    threads: &'t mut [ThreadRecord],
    index: &std::collections::HashMap<String, usize>,
    id: &str,
) -> Result<&'t mut ThreadRecord, StoreError> {
    let i = *index
        .get(id)
        .ok_or_else(|| StoreError(format!("row of unknown thread {id}")))?;
    Ok(&mut threads[i])
}

fn ensure_changed(changed: usize, what: &str, thread: &ThreadId) -> Result<(), StoreError> {
    if changed == 1 {
        Ok(())
    } else {
        Err(StoreError(format!(
            "{what}: no such thread {thread} or out-of-order write"
        )))
    }
}

fn ensure_thread(tx: &Connection, thread: &ThreadId) -> Result<(), StoreError> {
    let exists = tx
        .prepare_cached("SELECT 1 FROM threads WHERE thread_id = ?1")
        .and_then(|mut s| s.exists(params![thread.as_str()]))
        .map_err(store_err("thread lookup"))?;
    if exists {
        Ok(())
    } else {
        Err(StoreError(format!("write to unknown thread {thread}")))
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

fn apply_one(tx: &Connection, write: &Write) -> Result<(), StoreError> {
    match write {
        Write::CreateThread {
            thread_id,
            parent_thread_id,
            created_at,
        } => {
            exec(
                tx,
                "create thread",
                "INSERT INTO threads (thread_id, parent_thread_id, title, created_at, head_seq) \
                 VALUES (?1, ?2, NULL, ?3, 0)",
                params![
                    thread_id.as_str(),
                    parent_thread_id.as_ref().map(ThreadId::as_str),
                    created_at
                ],
            )?;
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
            let seq = to_i64(*seq);
            let n = exec(
                tx,
                "append",
                "UPDATE threads SET head_seq = ?2 WHERE thread_id = ?1 AND head_seq = ?2 - 1",
                params![thread_id.as_str(), seq],
            )?;
            ensure_changed(n, "append", thread_id)?;
            exec(
                tx,
                "append",
                "INSERT INTO events (thread_id, seq, idempotency_key, json) VALUES (?1, ?2, ?3, ?4)",
                params![thread_id.as_str(), seq, idempotency_key, &**json],
            )?;
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
            ensure_thread(tx, thread_id)?;
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
            ensure_thread(tx, thread_id)?;
            exec(
                tx,
                "delete participant",
                "DELETE FROM participants WHERE thread_id = ?1 AND principal_id = ?2",
                params![thread_id.as_str(), principal_id.as_str()],
            )?;
        }
    }
    Ok(())
}
