//! The core's store contract suite, run against the SQLite backend, with
//! reads answered at once and in a shuffled order. Every `open` is a new
//! connection to the same file, so the two-writer cases run two engines over
//! one database file.

use bubble_core::store::contract::{self, ContractBackend, Reads};
use bubble_server::store::SqliteStore;

/// A SQLite database in its own temp dir; `open` opens the same file again.
struct Sqlite(tempfile::TempDir, Option<u64>);

impl Sqlite {
    fn new_temp() -> Sqlite {
        Sqlite(tempfile::tempdir().expect("temp dir"), None)
    }
}

impl ContractBackend for Sqlite {
    type Store = SqliteStore;

    fn open(&self) -> SqliteStore {
        SqliteStore::open_shared(&self.0.path().join("data").join("bubble.db")).expect("open")
    }

    fn reads(&self) -> Reads {
        self.1.map_or(Reads::AtOnce, Reads::Shuffled)
    }
}

bubble_core::store_contract_tests!(Sqlite::new_temp());

#[test]
fn every_case_with_shuffled_reads() {
    for seed in [3, 8] {
        contract::run_all(|| Sqlite(tempfile::tempdir().expect("temp dir"), Some(seed)));
    }
}
