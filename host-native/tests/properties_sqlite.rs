//! The core's property tests (`core/tests/properties/`) on the real SQLite
//! backend: the same random scenarios and reference model, the harness
//! applying every batch to a database file in a temp dir (and
//! checkpointing its WAL after each commit, as the server does), reading
//! every answer back from it, and a crash dropping the engine and the
//! connection and reopening the file. Over SQLite the clients see exactly
//! what they see over the memory store.

#[path = "../../core/tests/properties/check.rs"]
mod check;
#[path = "../../core/tests/common/mod.rs"]
mod common;
#[path = "../../core/tests/properties/model.rs"]
mod model;
#[path = "../../core/tests/properties/run.rs"]
mod run;
#[path = "../../core/tests/properties/scenario.rs"]
mod scenario;

use std::path::PathBuf;

use bubble_core::store::{Backend, Batch, MemoryStore, ReadQuery, ReadResult, StoreError};
use bubble_core::ThreadId;
use bubble_server::store::SqliteStore;
use proptest::prelude::*;
use run::{cases, run, transcript, Reopen};
use scenario::{fixed_scenarios, scenario};

/// A database file in a temp dir of its own, opened as the server opens
/// it (with the one-server lock).
struct TempSqlite {
    _dir: tempfile::TempDir,
    path: PathBuf,
    store: Option<SqliteStore>,
}

impl TempSqlite {
    fn new() -> TempSqlite {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("data").join("bubble.db");
        let store = SqliteStore::open(&path).expect("open");
        TempSqlite {
            _dir: dir,
            path,
            store: Some(store),
        }
    }

    fn open(&self) -> &SqliteStore {
        self.store.as_ref().expect("the store is open")
    }
}

impl Backend for TempSqlite {
    fn read(&self, query: &ReadQuery) -> Result<ReadResult, StoreError> {
        self.open().read(query)
    }

    fn apply(&mut self, batches: &[&Batch]) -> Result<Vec<Vec<ThreadId>>, StoreError> {
        let store = self.store.as_mut().expect("the store is open");
        let refused = store.apply(batches)?;
        store.after_commit()?;
        Ok(refused)
    }
}

/// The crashed process's connection (and its lock) goes first; the next
/// one opens the file as a starting server does.
impl Reopen for TempSqlite {
    fn reopen(&mut self) {
        self.store = None;
        self.store = Some(SqliteStore::open(&self.path).expect("reopen"));
    }
}

proptest! {
    // Every commit is an fsync: fewer cases than on the memory store.
    #![proptest_config(ProptestConfig { cases: cases(32), ..ProptestConfig::default() })]

    #[test]
    fn threads_on_sqlite_behave_like_the_model(s in scenario()) {
        run(&s, TempSqlite::new())?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(16), ..ProptestConfig::default() })]

    /// The backend changes nothing the clients see.
    #[test]
    fn sqlite_and_memory_give_the_same_transcript(s in scenario()) {
        prop_assert_eq!(
            transcript(&s, TempSqlite::new()),
            transcript(&s, MemoryStore::default())
        );
    }
}

#[test]
fn fixed_interleaving_on_sqlite() {
    for s in fixed_scenarios() {
        if let Err(e) = run(&s, TempSqlite::new()) {
            panic!("{s:?}: {e}");
        }
    }
}
