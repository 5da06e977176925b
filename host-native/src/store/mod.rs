//! Storage backends and the `--store` setting.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use bubble_core::store::{Backend, EventStore, MemoryStore, Snapshot, StoreError};

mod checkpoint;
pub mod lock;
mod migrations;
pub mod sqlite;

pub use sqlite::{SqliteReader, SqliteStore};

/// Where threads are stored (`--store`, `BUBBLE_STORE`, `store =`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreSpec {
    /// Everything in RAM; gone when the process exits.
    Memory,
    /// An embedded SQLite file.
    Sqlite(PathBuf),
}

/// A `--store` value this build cannot serve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreSpecError {
    /// `postgres://…`
    #[error("PostgreSQL store is not available in this build (use \"sqlite:PATH\" or \"memory\")")]
    Postgres,
    /// Anything else.
    #[error("unknown store {0:?}: expected \"memory\" or \"sqlite:PATH\"")]
    Unknown(String),
}

impl StoreSpec {
    /// The default: `sqlite:./bubble-data/bubble.db`.
    pub fn default_sqlite() -> StoreSpec {
        StoreSpec::Sqlite(PathBuf::from("./bubble-data/bubble.db"))
    }

    /// Parses `memory`, `sqlite:PATH` or `postgres://…`.
    pub fn parse(raw: &str) -> Result<StoreSpec, StoreSpecError> {
        let raw = raw.trim();
        if raw == "memory" {
            Ok(StoreSpec::Memory)
        } else if let Some(path) = raw.strip_prefix("sqlite:").filter(|p| !p.is_empty()) {
            Ok(StoreSpec::Sqlite(PathBuf::from(
                path.strip_prefix("//").unwrap_or(path),
            )))
        } else if raw.starts_with("postgres://") || raw.starts_with("postgresql://") {
            Err(StoreSpecError::Postgres)
        } else {
            Err(StoreSpecError::Unknown(raw.to_owned()))
        }
    }
}

impl std::fmt::Display for StoreSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreSpec::Memory => f.write_str("memory"),
            StoreSpec::Sqlite(path) => write!(f, "sqlite:{}", path.display()),
        }
    }
}

/// Why a store could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// Another server has the store open.
    #[error(transparent)]
    Locked(#[from] lock::LockError),
    /// The store failed to open or load.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Answers readiness probes: does the store respond?
#[derive(Debug, Clone)]
pub enum Probe {
    /// The memory store always answers.
    Memory,
    /// A dedicated SQLite read connection.
    Sqlite(Arc<Mutex<SqliteReader>>),
}

impl Probe {
    /// Runs a trivial query (blocking).
    pub fn check(&self) -> Result<(), StoreError> {
        match self {
            Probe::Memory => Ok(()),
            Probe::Sqlite(reader) => reader
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .probe(),
        }
    }
}

/// An opened backend: the writer for the persistence worker, a reader for
/// the engine, a probe for `/readyz` and the start-up snapshot.
pub struct Opened {
    /// Applies batches (owned by the persistence worker).
    pub writer: Box<dyn Backend + Send>,
    /// History reads (owned by the engine).
    pub reader: Box<dyn EventStore + Send>,
    /// Readiness probe.
    pub probe: Probe,
    /// What the engine starts from.
    pub snapshot: Snapshot,
}

/// Opens the store named by `spec`, running migrations.
pub fn open(spec: &StoreSpec) -> Result<Opened, OpenError> {
    match spec {
        StoreSpec::Memory => {
            let store = MemoryStore::default();
            let snapshot = store.load()?;
            Ok(Opened {
                writer: Box::new(store.clone()),
                reader: Box::new(store),
                probe: Probe::Memory,
                snapshot,
            })
        }
        StoreSpec::Sqlite(path) => {
            let store = SqliteStore::open_exclusive(path)?;
            let snapshot = store.load()?;
            let reader = store.reader()?;
            let probe = Probe::Sqlite(Arc::new(Mutex::new(store.reader()?)));
            Ok(Opened {
                writer: Box::new(store),
                reader: Box::new(reader),
                probe,
                snapshot,
            })
        }
    }
}
