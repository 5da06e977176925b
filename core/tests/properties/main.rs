//! Property tests: random interleavings of thread creation, appends (some
//! repeating an idempotency key), history reads, subscribes with random
//! `fromSeq`, unsubscribes, grant changes and crashes (the engine dropped
//! and a new one started over the store) across several connections, with
//! random persistence and drain delays, checked against a small reference
//! model. Here the store is the memory one; `host-native/tests/
//! properties_sqlite.rs` runs the same scenarios on SQLite.
//!
//! Invariants:
//! - every thread's seqs are 1..=head, gapless, and head counts exactly the
//!   appends that were not idempotent repeats, across crashes;
//! - every history page is the seqs from `fromSeq` on, at most `limit`,
//!   with the `runId` each was appended with, resting on a head between
//!   the durable one and the model's when it was asked, and `nextSeq` is
//!   the next seq unless the page reached that head;
//! - every subscription delivers `fromSeq..=head` (or from `throughSeq + 1`
//!   when `fromSeq` is beyond the head) in order, once: backlog then live,
//!   however appends race the registration and the backlog pages;
//! - `throughSeq` is the head at registration;
//! - a connection receives only events its principal could read when they
//!   were appended, and loses its subscription (error, then
//!   `subscription_closed{not_found}`) when it can no longer read;
//! - every answer and error matches the model; nothing is acknowledged or
//!   delivered before it is durable (checked by the harness on every output).

mod check;
#[path = "../common/mod.rs"]
mod common;
mod model;
mod run;
mod scenario;

use bubble_core::store::MemoryStore;
use proptest::prelude::*;
use run::{cases, run, transcript};
use scenario::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(128), ..ProptestConfig::default() })]

    #[test]
    fn threads_behave_like_the_model(s in scenario()) {
        run(&s, MemoryStore::default())?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(32), ..ProptestConfig::default() })]

    /// Same inputs, same outputs: the engine has no hidden clock or randomness.
    #[test]
    fn same_inputs_same_outputs(s in scenario()) {
        prop_assert_eq!(
            transcript(&s, MemoryStore::default()),
            transcript(&s, MemoryStore::default())
        );
    }
}

/// The fixed interleaving of [`fixed_interleaving`] (every op kind), so a
/// plain failure here is easier to read than a shrunk random case.
#[test]
fn fixed_interleaving() {
    for s in fixed_scenarios() {
        if let Err(e) = run(&s, MemoryStore::default()) {
            panic!("{s:?}: {e}");
        }
    }
}
