//! The PostgreSQL backend: threads of several server processes (a cluster)
//! in one schema of one database.
//!
//! Every handle ([`PostgresStore`], the writer; [`PostgresReader`], for
//! reads and readiness probes) owns one connection, driven synchronously on
//! a runtime of its own, and connects again after losing it (see
//! `postgres_session.rs`). Every connection's `search_path` is the store's
//! schema: the tables, and sqlx's `_sqlx_migrations`, live there, so two
//! schemas of one database are two independent stores.
//!
//! Opening creates the schema when missing and runs the migrations of
//! `migrations/postgres`. Nodes starting at once are safe: sqlx holds a
//! database-wide advisory lock while it migrates, so one node migrates and
//! the others then find the schema up to date. There is no one-server lock:
//! writes are conditional (see `postgres_write.rs`), so several servers may
//! write the same threads.
//!
//! Durability: [`PostgresStore::apply`] returns only after `COMMIT`
//! returned, so what it reported is durable as the server's settings make
//! commits (`synchronous_commit`, replication). A connection lost during
//! `COMMIT` leaves the outcome unknown: `apply` then reads back, once the
//! database answers again, which groups landed, and answers that (the
//! `Backend` contract: `Unavailable` means nothing was applied). It gives
//! up after a minute with a store failure, which ends the server.

use std::cell::Cell;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bubble_core::ids::ThreadId;
use bubble_core::store::{Backend, Batch, ReadQuery, ReadResult, StoreError, ThreadWrites, Write};
use sqlx::postgres::PgConnection;
use sqlx::{AssertSqlSafe, Executor as _};

use super::postgres_session::{connect_options, migrate_err, sql_err, sqlstate, Session};
use super::{
    postgres_read, postgres_url, postgres_write, read_functions, with_readers, Opened, Probe,
};

/// The schema's migrations, embedded at build time.
static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

/// Where a thread stands in the store: `(head_seq, version)`, `None` when
/// it does not exist.
pub type Committed = Option<(u64, u64)>;

/// The writer: applies batches on its own connection (and answers reads).
#[derive(Debug)]
pub struct PostgresStore {
    session: Mutex<Session>,
}

/// A connection for the engine's reads and readiness probes.
#[derive(Debug)]
pub struct PostgresReader {
    session: Session,
}

impl PostgresStore {
    /// Connects to `url`, creates `schema` when missing and brings it up
    /// to date. Blocks: call it outside any async runtime.
    pub fn open(url: &str, schema: &str) -> Result<PostgresStore, StoreError> {
        postgres_url::check_schema(schema).map_err(|e| StoreError::Failed(e.to_string()))?;
        let mut session = Session::new(connect_options(url, schema)?)?;
        session.run("opening the store", async |conn| {
            prepare(conn, schema).await
        })?;
        Ok(PostgresStore {
            session: Mutex::new(session),
        })
    }

    /// A reader on a connection of its own (made on its first call).
    pub fn reader(&self) -> Result<PostgresReader, StoreError> {
        let session = self.session().another()?;
        Ok(PostgresReader { session })
    }

    /// Where each of `threads` stands in the store: `(head_seq, version)`,
    /// `None` when it does not exist. After an apply whose commit outcome is
    /// unknown, a thread at the version a group recorded tells that the
    /// commit landed (each group records a fresh random version).
    pub fn committed_versions(
        &mut self,
        threads: &[ThreadId],
    ) -> Result<Vec<(ThreadId, Committed)>, StoreError> {
        self.session_mut().run("reading versions", async |conn| {
            postgres_read::versions(conn, threads).await
        })
    }

    fn session(&self) -> std::sync::MutexGuard<'_, Session> {
        self.session.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn session_mut(&mut self) -> &mut Session {
        self.session
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl PostgresReader {
    /// Answers one of the engine's reads.
    pub fn read(&mut self, query: &ReadQuery) -> Result<ReadResult, StoreError> {
        self.session
            .run("read", async |conn| postgres_read::read(conn, query).await)
    }

    /// A trivial query: the store answers.
    pub fn probe(&mut self) -> Result<(), StoreError> {
        self.session.run("probe", async |conn| {
            conn.execute("SELECT 1")
                .await
                .map(drop)
                .map_err(sql_err("probe"))
        })
    }
}

impl Backend for PostgresStore {
    fn read(&self, query: &ReadQuery) -> Result<ReadResult, StoreError> {
        self.session()
            .run("read", async |conn| postgres_read::read(conn, query).await)
    }

    fn apply(&mut self, batches: &[&Batch]) -> Result<Vec<Vec<ThreadId>>, StoreError> {
        let committing = Cell::new(false);
        let applied = self.session_mut().run_unless_applied(
            "commit",
            || !committing.get(),
            async |conn| postgres_write::apply(conn, batches, &committing).await,
        );
        match applied {
            Err(StoreError::Unavailable(e)) if committing.get() => {
                tracing::warn!(error = %e, "connection lost during COMMIT: finding out whether it landed");
                self.resolve(batches)
            }
            other => other,
        }
    }
}

/// How long a commit whose outcome is unknown is looked for before the
/// store gives up (the server then exits; a restart reloads the store).
const RESOLVE_FOR: Duration = Duration::from_secs(60);

impl PostgresStore {
    /// After a connection lost during `COMMIT`: which groups of `batches`
    /// are refused, read back once the database answers again. A group
    /// landed when its thread is at the version it recorded, or holds its
    /// last event at its seq (another writer may have moved the thread on
    /// since). Groups with neither sign are reported refused: the engine
    /// decides them again (an append without such a sign did not land).
    fn resolve(&mut self, batches: &[&Batch]) -> Result<Vec<Vec<ThreadId>>, StoreError> {
        let deadline = Instant::now() + RESOLVE_FOR;
        let mut wait = Duration::from_millis(100);
        loop {
            match self.landed(batches) {
                Ok(landed) => {
                    return Ok(batches
                        .iter()
                        .zip(landed)
                        .map(|(batch, landed)| {
                            batch
                                .threads
                                .iter()
                                .zip(landed)
                                .filter(|(_, landed)| !landed)
                                .map(|(group, _)| group.thread_id.clone())
                                .collect()
                        })
                        .collect());
                }
                Err(StoreError::Unavailable(e)) if Instant::now() < deadline => {
                    tracing::warn!(error = %e, "the commit's outcome is still unknown");
                    std::thread::sleep(wait);
                    wait = (wait * 2).min(Duration::from_secs(2));
                }
                Err(e) => {
                    return Err(StoreError::Failed(format!(
                        "the outcome of a commit is unknown: {e}"
                    )))
                }
            }
        }
    }

    /// Per batch, per group: whether it shows a sign of having landed.
    fn landed(&mut self, batches: &[&Batch]) -> Result<Vec<Vec<bool>>, StoreError> {
        let threads: Vec<ThreadId> = batches
            .iter()
            .flat_map(|b| b.threads.iter().map(|g| g.thread_id.clone()))
            .collect();
        let now: std::collections::HashMap<ThreadId, Committed> =
            self.committed_versions(&threads)?.into_iter().collect();
        let mut landed = Vec::with_capacity(batches.len());
        for batch in batches {
            let mut groups = Vec::with_capacity(batch.threads.len());
            for group in &batch.threads {
                let at_version = now
                    .get(&group.thread_id)
                    .copied()
                    .flatten()
                    .is_some_and(|(_, version)| version == group.record.version);
                groups.push(at_version || self.holds_last_event(group)?);
            }
            landed.push(groups);
        }
        Ok(landed)
    }

    /// Whether the store holds `group`'s last appended event at its seq.
    fn holds_last_event(&mut self, group: &ThreadWrites) -> Result<bool, StoreError> {
        let last = group.writes.iter().rev().find_map(|w| match w {
            Write::AppendEvent { seq, json, .. } => Some((*seq, json.clone())),
            _ => None,
        });
        let Some((seq, json)) = last else {
            return Ok(false);
        };
        let query = ReadQuery::Events {
            thread_id: group.thread_id.clone(),
            from_seq: seq,
            through_seq: seq,
            limit: 1,
        };
        let read = self
            .session_mut()
            .run("reading back an event", async |conn| {
                postgres_read::read(conn, &query).await
            })?;
        Ok(matches!(read, ReadResult::Events(events)
            if events.first().is_some_and(|e| e.json == json)))
    }
}

/// Creates `schema` when missing and runs the migrations in it.
async fn prepare(conn: &mut PgConnection, schema: &str) -> Result<(), StoreError> {
    let exists: bool =
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)")
            .bind(schema)
            .fetch_one(&mut *conn)
            .await
            .map_err(sql_err("looking up the schema"))?;
    if !exists {
        // `schema` is a checked identifier. Two nodes creating it at once
        // can both pass IF NOT EXISTS; the loser meets the catalog's unique
        // index, and the schema exists all the same.
        let created = conn
            .execute(AssertSqlSafe(format!(
                "CREATE SCHEMA IF NOT EXISTS \"{schema}\""
            )))
            .await;
        match created {
            Ok(_) => {}
            Err(e) if matches!(sqlstate(&e).as_deref(), Some("23505" | "42P06")) => {}
            Err(e) => return Err(sql_err("creating the schema")(e)),
        }
    }
    MIGRATOR.run(&mut *conn).await.map_err(migrate_err)
}

/// Opens the store for a server: the writer, `readers` reader connections
/// (at least one) and a probe connection. Blocks (on a thread of its own,
/// so that an async caller is not blocked inside its runtime).
pub(super) fn open(url: &str, schema: &str, readers: usize) -> Result<Opened, StoreError> {
    let opening = || {
        let store = PostgresStore::open(url, schema)?;
        let functions = read_functions(readers, || {
            let mut reader = store.reader()?;
            Ok(Box::new(move |query: &ReadQuery| reader.read(query)))
        })?;
        let probe = Probe::Postgres(Arc::new(Mutex::new(store.reader()?)));
        Ok(with_readers(Box::new(store), functions, probe))
    };
    std::thread::scope(|scope| match scope.spawn(opening).join() {
        Ok(opened) => opened,
        Err(panic) => std::panic::resume_unwind(panic),
    })
}
