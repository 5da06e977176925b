//! Storage backends and the `--store` setting.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use bubble_core::store::{Backend, MemoryStore, ReadQuery, ReadResult, StoreError};

mod checkpoint;
pub mod lock;
mod migrations;
pub mod sqlite;
mod sqlite_read;
mod sqlite_write;

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

/// Answers the engine's reads on one connection (a reader thread owns it).
pub type ReadFn = Box<dyn FnMut(&ReadQuery) -> Result<ReadResult, StoreError> + Send>;

/// What the engine task needs of a backend: the writer for the persistence
/// worker and what answers the engine's reads.
pub struct EngineStore {
    /// Applies batches (owned by the persistence worker).
    pub writer: Box<dyn Backend + Send>,
    /// One read function per reader thread; empty when reads are cheap
    /// enough to answer on the engine's thread (the memory store).
    pub readers: Vec<ReadFn>,
    /// Answers reads on the engine's thread when `readers` is empty.
    pub inline_reads: Option<MemoryStore>,
}

/// An opened backend: its engine side and a probe for `/readyz`.
pub struct Opened {
    /// The writer and readers.
    pub engine: EngineStore,
    /// Readiness probe.
    pub probe: Probe,
}

/// Opens the store named by `spec`, running migrations, with `readers`
/// reader connections for SQLite.
pub fn open(spec: &StoreSpec, readers: usize) -> Result<Opened, OpenError> {
    match spec {
        StoreSpec::Memory => {
            let store = MemoryStore::default();
            Ok(Opened {
                engine: EngineStore {
                    writer: Box::new(store.clone()),
                    readers: Vec::new(),
                    inline_reads: Some(store),
                },
                probe: Probe::Memory,
            })
        }
        StoreSpec::Sqlite(path) => {
            let store = SqliteStore::open_exclusive(path)?;
            let mut functions: Vec<ReadFn> = Vec::with_capacity(readers.max(1));
            for _ in 0..readers.max(1) {
                let reader = store.reader()?;
                functions.push(Box::new(move |query: &ReadQuery| reader.read(query)));
            }
            let probe = Probe::Sqlite(Arc::new(Mutex::new(store.reader()?)));
            Ok(Opened {
                engine: EngineStore {
                    writer: Box::new(store),
                    readers: functions,
                    inline_reads: None,
                },
                probe,
            })
        }
    }
}
