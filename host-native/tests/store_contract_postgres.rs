//! The core's store contract suite, run against the PostgreSQL backend,
//! with reads answered at once and in a shuffled order. Each case gets a
//! schema of its own; every `open` is a new connection to it, so the
//! two-writer cases run two engines over one schema, as two nodes would.

mod postgres_common;

use bubble_core::store::contract::{self, ContractBackend, Reads};
use bubble_server::store::PostgresStore;
use postgres_common::Schema;

/// A fresh schema; `open` opens (and migrates) it again.
struct Postgres(Schema, Option<u64>);

impl Postgres {
    fn fresh() -> Postgres {
        Postgres(Schema::fresh(), None)
    }
}

impl ContractBackend for Postgres {
    type Store = PostgresStore;

    fn open(&self) -> PostgresStore {
        PostgresStore::open(&self.0.url, &self.0.name).expect("open")
    }

    fn reads(&self) -> Reads {
        self.1.map_or(Reads::AtOnce, Reads::Shuffled)
    }
}

bubble_core::store_contract_tests!(Postgres::fresh());

#[test]
fn every_case_with_shuffled_reads() {
    for seed in [3, 8] {
        contract::run_all(|| Postgres(Schema::fresh(), Some(seed)));
    }
}
