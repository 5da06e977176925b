//! The store contract, run for the in-memory backend.

use bubble_core::store::contract::{self, ContractBackend};
use bubble_core::store::{EventStore, MemoryStore};

/// A memory store; reopening hands out the same tables again.
#[derive(Default)]
struct Memory(MemoryStore);

impl ContractBackend for Memory {
    type Writer = MemoryStore;

    fn open(&self) -> (MemoryStore, Box<dyn EventStore>) {
        (self.0.clone(), Box::new(self.0.clone()))
    }
}

bubble_core::store_contract_tests!(Memory::default());

#[test]
fn run_all_covers_every_case() {
    assert_eq!(contract::cases::<Memory>().len(), 15);
}
