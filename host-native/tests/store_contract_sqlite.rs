//! The core's store contract suite, run against the SQLite backend.

use bubble_core::store::contract::ContractBackend;
use bubble_core::store::EventStore;
use bubble_server::store::SqliteStore;

/// A SQLite database in its own temp dir; `open` reopens the same file.
struct Sqlite(tempfile::TempDir);

impl Sqlite {
    fn new_temp() -> Sqlite {
        Sqlite(tempfile::tempdir().expect("temp dir"))
    }
}

impl ContractBackend for Sqlite {
    type Writer = SqliteStore;

    fn open(&self) -> (SqliteStore, Box<dyn EventStore>) {
        let writer =
            SqliteStore::open(&self.0.path().join("data").join("bubble.db")).expect("open");
        let reader = writer.reader().expect("reader");
        (writer, Box::new(reader))
    }
}

bubble_core::store_contract_tests!(Sqlite::new_temp());
