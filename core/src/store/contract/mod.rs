//! The store contract: behaviour every storage backend must keep.
//!
//! Each case drives a real [`Engine`](crate::Engine) over the backend under
//! test through the HTTP API, applying every
//! [`Output::Persist`](crate::Output::Persist) batch to the backend and
//! answering every [`Output::Read`](crate::Output::Read) from it, at once or
//! in a shuffled order ([`Reads`]). The `reopen` cases drop the engine and
//! the backend handle and start a new engine over the same data, as a
//! restarted server would; the `two_writers` cases run two engines over the
//! same data at once, as a cluster does.
//!
//! A backend's test file implements [`ContractBackend`] and either calls
//! [`run_all`] or lists the cases with [`store_contract_tests!`]:
//!
//! ```no_run
//! # use bubble_core::store::contract::ContractBackend;
//! # use bubble_core::store::MemoryStore;
//! struct Memory(MemoryStore);
//! impl ContractBackend for Memory {
//!     type Store = MemoryStore;
//!     fn open(&self) -> MemoryStore {
//!         self.0.clone()
//!     }
//! }
//! bubble_core::store_contract_tests!(Memory(MemoryStore::default()));
//! ```

use crate::store::Backend;

mod access;
mod events;
mod node;
mod reopen;
mod threads;
mod two_writers;

pub use access::{grants, participants};
pub use events::{
    failed_read_answers_internal, history_paging, idempotency_keys, seqs_are_gapless,
};
pub use node::Reads;
pub use reopen::{
    reopen_continues_seqs, reopen_keeps_grants_and_participants, reopen_keeps_idempotency_keys,
    reopen_keeps_threads_and_events,
};
pub use threads::{
    create_thread_is_idempotent, create_thread_rejections, create_thread_returns_empty_snapshot,
    get_thread_shape, head_seq_counts_appends, title_set_and_clear,
};
pub use two_writers::{two_writers_append_and_create, two_writers_idempotency_and_grants};

/// A backend under test.
pub trait ContractBackend {
    /// A handle on the backend's data: answers reads, applies batches.
    type Store: Backend;

    /// Opens the backend's data.
    ///
    /// Each case starts from a value whose data is empty. `open` is called
    /// again on the same value to simulate a restart over the same data
    /// (the previous handle is dropped first), and twice without dropping
    /// for two engines sharing the data.
    fn open(&self) -> Self::Store;

    /// How the engine's reads are answered (at once by default).
    fn reads(&self) -> Reads {
        Reads::AtOnce
    }
}

/// A named contract case.
pub type Case<C> = (&'static str, fn(&C));

/// Every case, by name, for backends that run them in a loop.
pub fn cases<C: ContractBackend>() -> Vec<Case<C>> {
    vec![
        (
            "create_thread_returns_empty_snapshot",
            create_thread_returns_empty_snapshot::<C>,
        ),
        (
            "create_thread_is_idempotent",
            create_thread_is_idempotent::<C>,
        ),
        ("create_thread_rejections", create_thread_rejections::<C>),
        ("get_thread_shape", get_thread_shape::<C>),
        ("head_seq_counts_appends", head_seq_counts_appends::<C>),
        ("title_set_and_clear", title_set_and_clear::<C>),
        ("seqs_are_gapless", seqs_are_gapless::<C>),
        ("idempotency_keys", idempotency_keys::<C>),
        ("history_paging", history_paging::<C>),
        (
            "failed_read_answers_internal",
            failed_read_answers_internal::<C>,
        ),
        (
            "two_writers_append_and_create",
            two_writers_append_and_create::<C>,
        ),
        (
            "two_writers_idempotency_and_grants",
            two_writers_idempotency_and_grants::<C>,
        ),
        ("grants", grants::<C>),
        ("participants", participants::<C>),
        (
            "reopen_keeps_threads_and_events",
            reopen_keeps_threads_and_events::<C>,
        ),
        (
            "reopen_keeps_grants_and_participants",
            reopen_keeps_grants_and_participants::<C>,
        ),
        (
            "reopen_keeps_idempotency_keys",
            reopen_keeps_idempotency_keys::<C>,
        ),
        ("reopen_continues_seqs", reopen_continues_seqs::<C>),
    ]
}

/// Runs every case, each on a fresh value from `fresh`.
pub fn run_all<C: ContractBackend>(fresh: impl Fn() -> C) {
    for (_name, case) in cases::<C>() {
        case(&fresh());
    }
}

/// Declares one `#[test]` per contract case; `$fresh` is an expression that
/// builds a fresh [`ContractBackend`] (evaluated once per case).
#[macro_export]
macro_rules! store_contract_tests {
    ($fresh:expr) => {
        $crate::store_contract_tests!(@cases $fresh;
            create_thread_returns_empty_snapshot, create_thread_is_idempotent,
            create_thread_rejections, get_thread_shape, head_seq_counts_appends,
            title_set_and_clear, seqs_are_gapless, idempotency_keys, history_paging,
            failed_read_answers_internal, two_writers_append_and_create,
            two_writers_idempotency_and_grants,
            grants, participants, reopen_keeps_threads_and_events,
            reopen_keeps_grants_and_participants, reopen_keeps_idempotency_keys,
            reopen_continues_seqs);
    };
    (@cases $fresh:expr; $($case:ident),*) => {
        $(
            #[test]
            fn $case() {
                $crate::store::contract::$case(&$fresh);
            }
        )*
    };
}
