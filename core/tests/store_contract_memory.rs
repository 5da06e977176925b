//! The store contract, run for the in-memory backend with reads answered at
//! once and with reads completing in a shuffled order.

use bubble_core::store::contract::{self, ContractBackend, Reads};
use bubble_core::store::MemoryStore;

/// A memory store; reopening hands out the same tables again.
#[derive(Default)]
struct Memory(MemoryStore, Option<u64>);

impl ContractBackend for Memory {
    type Store = MemoryStore;

    fn open(&self) -> MemoryStore {
        self.0.clone()
    }

    fn reads(&self) -> Reads {
        self.1.map_or(Reads::AtOnce, Reads::Shuffled)
    }
}

bubble_core::store_contract_tests!(Memory::default());

#[test]
fn run_all_covers_every_case() {
    assert_eq!(contract::cases::<Memory>().len(), 18);
}

#[test]
fn every_case_with_shuffled_reads() {
    for seed in 1..=8 {
        contract::run_all(|| Memory(MemoryStore::default(), Some(seed)));
    }
}
