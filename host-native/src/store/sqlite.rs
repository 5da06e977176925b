//! The embedded SQLite backend: one file, WAL journal, `synchronous=FULL`.
//!
//! Durability: [`SqliteStore::apply`] runs its writes in one transaction and
//! returns only after `COMMIT`. With `journal_mode=WAL` and
//! `synchronous=FULL`, SQLite syncs the WAL on every commit, so a write that
//! `apply` reported is on stable storage: it survives `kill -9` of the server
//! and a power loss. The sync is an `fdatasync` (SQLite is built with
//! `HAVE_FDATASYNC`, set in the workspace's `.cargo/config.toml`): the WAL's
//! frames and, when the file grew, its size, without forcing out the file's
//! timestamps (a journal commit, on a journaling file system). The host
//! reports a batch durable to the engine only after `apply` returned, and
//! the engine releases every acknowledgement and delivery that depends on a
//! write only then.
//!
//! Writes are conditional: each thread's group in a batch commits only if
//! the thread's row still has the head and version the group expects (no
//! row, for a group that creates the thread), inside a savepoint of its own,
//! so a refused group leaves the rest of the commit standing. A duplicate
//! idempotency key also refuses the group: another writer's event holds it.
//!
//! Readers ([`SqliteReader`]) use their own connections; WAL lets them read
//! committed data while the writer commits. The writer checkpoints the WAL
//! itself between commits, never inside one (see `checkpoint.rs`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use bubble_core::ids::ThreadId;
use bubble_core::store::{Backend, Batch, ReadQuery, ReadResult, StoreError};
use rusqlite::{Connection, OpenFlags};

use super::checkpoint::{Checkpoints, WAL_SIZE_LIMIT};
use super::lock::{self, StoreLock};
use super::{migrations, sqlite_read, sqlite_write, OpenError};

/// Prepared statements kept per connection: more than a commit uses.
const STATEMENT_CACHE: usize = 32;

/// The page size of a database this store creates (one it opens keeps its
/// own). An append rewrites a few pages, each written whole to the WAL and
/// checksummed there, then copied into the database file at the next
/// checkpoint; an event row is a few hundred bytes. Half SQLite's default
/// 4 KiB writes and checksums half as much per commit while a history read
/// still finds a few rows per page. Measured against 4 KiB pages, durable
/// appends cost less CPU each and went further, and a catch-up read as
/// fast (1 KiB pages read a third slower; `BENCHMARKS.md`, run AM).
const PAGE_SIZE: i64 = 2048;

/// How long a connection waits for a lock held by another connection.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The writer: owns the only read-write connection and applies batches.
#[derive(Debug)]
pub struct SqliteStore {
    conn: Connection,
    path: PathBuf,
    /// When the next WAL checkpoint is due.
    checkpoints: Checkpoints,
    /// Held while the store is open: one server per file (none for a
    /// shared handle).
    _lock: Option<StoreLock>,
}

/// The durability settings in force on the writer's connection, as SQLite
/// reports them (read back, not assumed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Durability {
    /// `PRAGMA journal_mode`: `wal`.
    pub journal_mode: String,
    /// `PRAGMA synchronous`: 2 is `FULL` (an fsync of the WAL per commit).
    pub synchronous: i64,
}

/// A read-only connection for history reads and readiness probes.
#[derive(Debug)]
pub struct SqliteReader {
    conn: Connection,
}

pub(super) fn store_err(context: &str) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    move |e| StoreError::Failed(format!("{context}: {e}"))
}

impl SqliteStore {
    /// Opens (creating it and its directory when missing) the database at
    /// `path` and runs the migrations. Fails when another process has it
    /// open (see [`SqliteStore::open_exclusive`]).
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        SqliteStore::open_exclusive(path).map_err(|e| match e {
            OpenError::Store(e) => e,
            locked @ OpenError::Locked(_) => StoreError::Failed(locked.to_string()),
        })
    }

    /// Like [`SqliteStore::open`], telling a store held by another process
    /// (its `<path>.lock` is locked) apart from other failures.
    pub fn open_exclusive(path: &Path) -> Result<SqliteStore, OpenError> {
        create_dir(path)?;
        let lock = lock::acquire(path)?;
        SqliteStore::connect(path, Some(lock)).map_err(OpenError::from)
    }

    /// Opens the database at `path` without taking the one-server lock: for
    /// several engines of one process writing the same file (their writes
    /// are conditional, so they can), as in tests of concurrent writers.
    pub fn open_shared(path: &Path) -> Result<SqliteStore, StoreError> {
        SqliteStore::connect(path, None)
    }

    fn connect(path: &Path, lock: Option<StoreLock>) -> Result<SqliteStore, StoreError> {
        create_dir(path)?;
        let conn = Connection::open(path).map_err(store_err("opening the database"))?;
        conn.busy_timeout(BUSY_TIMEOUT)
            .map_err(store_err("busy_timeout"))?;
        // Before WAL mode: only a new database takes it.
        conn.pragma_update(None, "page_size", PAGE_SIZE)
            .map_err(store_err("page_size"))?;
        let mode: String = conn
            .query_row("PRAGMA journal_mode=WAL", [], |row| row.get(0))
            .map_err(store_err("journal_mode"))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(StoreError::Failed(format!(
                "the database refused WAL mode (got {mode})"
            )));
        }
        conn.execute_batch("PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;")
            .map_err(store_err("pragmas"))?;
        // The writer checkpoints after commits, not inside them.
        conn.pragma_update(None, "wal_autocheckpoint", 0)
            .map_err(store_err("wal_autocheckpoint"))?;
        conn.pragma_update(None, "journal_size_limit", WAL_SIZE_LIMIT)
            .map_err(store_err("journal_size_limit"))?;
        // Every statement a commit runs stays prepared (about fifteen).
        conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
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

    /// The journal mode and sync level the writer's connection runs with.
    pub fn durability(&self) -> Result<Durability, StoreError> {
        let journal_mode = self
            .conn
            .query_row("PRAGMA journal_mode", [], |row| row.get(0))
            .map_err(store_err("journal_mode"))?;
        let synchronous = self
            .conn
            .query_row("PRAGMA synchronous", [], |row| row.get(0))
            .map_err(store_err("synchronous"))?;
        Ok(Durability {
            journal_mode,
            synchronous,
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl SqliteReader {
    /// Answers one of the engine's reads.
    pub fn read(&self, query: &ReadQuery) -> Result<ReadResult, StoreError> {
        sqlite_read::read(&self.conn, query)
    }

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

/// Creates the database's directory when missing.
fn create_dir(path: &Path) -> Result<(), StoreError> {
    match path.parent().filter(|d| !d.as_os_str().is_empty()) {
        Some(dir) => std::fs::create_dir_all(dir)
            .map_err(|e| StoreError::Failed(format!("creating {}: {e}", dir.display()))),
        None => Ok(()),
    }
}

/// Runs a statement without parameters, prepared once per connection.
fn run_cached(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.execute([]).map(drop)
}

/// Applies each batch's groups inside the open transaction; per batch, the
/// threads whose groups were refused.
fn apply_batches(tx: &Connection, batches: &[&Batch]) -> Result<Vec<Vec<ThreadId>>, StoreError> {
    let mut refused = Vec::with_capacity(batches.len());
    for batch in batches {
        let mut mine = Vec::new();
        for group in &batch.threads {
            if !sqlite_write::apply_group(tx, group)? {
                mine.push(group.thread_id.clone());
            }
        }
        refused.push(mine);
    }
    Ok(refused)
}

pub(super) fn to_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Backend for SqliteStore {
    fn read(&self, query: &ReadQuery) -> Result<ReadResult, StoreError> {
        sqlite_read::read(&self.conn, query)
    }

    /// One transaction for all of `batches`. Its `BEGIN` and `COMMIT`
    /// are prepared once and kept, like every statement of a commit, so a
    /// commit parses no SQL.
    fn apply(&mut self, batches: &[&Batch]) -> Result<Vec<Vec<ThreadId>>, StoreError> {
        run_cached(&self.conn, "BEGIN IMMEDIATE").map_err(store_err("begin"))?;
        let applied = apply_batches(&self.conn, batches).and_then(|refused| {
            run_cached(&self.conn, "COMMIT").map_err(store_err("commit"))?;
            Ok(refused)
        });
        if applied.is_err() && !self.conn.is_autocommit() {
            // Nothing of a failed commit stands. A rollback that fails
            // leaves nothing to do: the error below ends the process.
            let _ = self.conn.execute_batch("ROLLBACK");
        }
        applied
    }

    fn after_commit(&mut self) -> Result<(), StoreError> {
        self.checkpoints.after_commit(&self.conn)
    }
}
