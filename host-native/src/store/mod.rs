//! Storage backends and the `--store` setting.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use bubble_core::store::{Backend, MemoryStore, ReadQuery, ReadResult, StoreError};

mod checkpoint;
pub mod lock;
mod migrations;
pub mod postgres;
mod postgres_read;
mod postgres_session;
mod postgres_url;
mod postgres_write;
pub mod sqlite;
mod sqlite_read;
mod sqlite_write;

pub use postgres::{Committed, PostgresReader, PostgresStore};
pub use sqlite::{Durability, SqliteReader, SqliteStore};

/// Where threads are stored (`--store`, `BUBBLE_STORE`, `store =`).
#[derive(Clone, PartialEq, Eq)]
pub enum StoreSpec {
    /// Everything in RAM; gone when the process exits.
    Memory,
    /// An embedded SQLite file.
    Sqlite(PathBuf),
    /// A schema of a PostgreSQL database, shared by every node using it.
    Postgres {
        /// The connection URL without `schema=` (it may hold a password:
        /// shown only through [`StoreSpec`]'s `Display`, which drops it).
        url: String,
        /// The schema holding the tables (`bubble` by default).
        schema: String,
    },
}

/// A `--store` value this build cannot serve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreSpecError {
    /// A `postgres://…` URL that does not parse.
    #[error("invalid PostgreSQL URL {0}")]
    PostgresUrl(String),
    /// A `schema=` that is not a plain lowercase identifier.
    #[error(
        "invalid PostgreSQL schema {0:?}: expected 1-63 characters of [a-z0-9_], \
         not starting with a digit or \"pg_\""
    )]
    PostgresSchema(String),
    /// Anything else.
    #[error("unknown store {0:?}: expected \"memory\", \"sqlite:PATH\" or \"postgres://…\"")]
    Unknown(String),
}

impl StoreSpec {
    /// The default: `sqlite:./bubble-data/bubble.db`.
    pub fn default_sqlite() -> StoreSpec {
        StoreSpec::Sqlite(PathBuf::from("./bubble-data/bubble.db"))
    }

    /// Parses `memory`, `sqlite:PATH` or `postgres://…` (also
    /// `postgresql://…`; `schema=NAME` in the query names the schema).
    pub fn parse(raw: &str) -> Result<StoreSpec, StoreSpecError> {
        let raw = raw.trim();
        if raw == "memory" {
            Ok(StoreSpec::Memory)
        } else if let Some(path) = raw.strip_prefix("sqlite:").filter(|p| !p.is_empty()) {
            Ok(StoreSpec::Sqlite(PathBuf::from(
                path.strip_prefix("//").unwrap_or(path),
            )))
        } else if raw.starts_with("postgres://") || raw.starts_with("postgresql://") {
            let (url, schema) = postgres_url::parse(raw)?;
            Ok(StoreSpec::Postgres { url, schema })
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
            StoreSpec::Postgres { url, schema } => f.write_str(&postgres_url::display(url, schema)),
        }
    }
}

/// As `Display` for PostgreSQL, which hides the password.
impl std::fmt::Debug for StoreSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreSpec::Memory => f.write_str("Memory"),
            StoreSpec::Sqlite(path) => f.debug_tuple("Sqlite").field(path).finish(),
            StoreSpec::Postgres { .. } => write!(f, "Postgres({self})"),
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
    /// A dedicated PostgreSQL connection (`SELECT 1`).
    Postgres(Arc<Mutex<PostgresReader>>),
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
            Probe::Postgres(reader) => reader
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

/// `readers` read functions (at least one), each made by `make`.
pub(crate) fn read_functions(
    readers: usize,
    mut make: impl FnMut() -> Result<ReadFn, StoreError>,
) -> Result<Vec<ReadFn>, StoreError> {
    (0..readers.max(1)).map(|_| make()).collect()
}

/// A backend whose reads are answered by reader threads.
pub(crate) fn with_readers(
    writer: Box<dyn Backend + Send>,
    readers: Vec<ReadFn>,
    probe: Probe,
) -> Opened {
    Opened {
        engine: EngineStore {
            writer,
            readers,
            inline_reads: None,
        },
        probe,
    }
}

/// Opens the store named by `spec`, running migrations, with `readers`
/// reader connections for SQLite and PostgreSQL.
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
            let durability = store.durability()?;
            tracing::info!(
                journal_mode = %durability.journal_mode,
                synchronous = durability.synchronous,
                "sqlite durability"
            );
            let functions = read_functions(readers, || {
                let reader = store.reader()?;
                Ok(Box::new(move |query: &ReadQuery| reader.read(query)))
            })?;
            let probe = Probe::Sqlite(Arc::new(Mutex::new(store.reader()?)));
            Ok(with_readers(Box::new(store), functions, probe))
        }
        StoreSpec::Postgres { url, schema } => Ok(postgres::open(url, schema, readers)?),
    }
}
