//! The deterministic simulator (docs/simulation.md): thousands of seeds
//! over clustered engines with every host fault, each checked after every
//! step; the same seed runs the same way twice; and the replays of what
//! it found, kept as regressions.

use bubble_core::sim::{self, Step};

/// Seeds the test command runs, in two halves that run in parallel (about
/// 30 s of one core in a debug build).
const SEEDS: u64 = 2_000;
/// Steps per seed.
const STEPS: usize = 400;

/// Runs seeds `range` and fails with the first failure, shrunk.
fn seeds_pass(range: std::ops::Range<u64>) {
    let mut events = 0;
    let count = range.end - range.start;
    for seed in range {
        match sim::check_seed(seed, STEPS) {
            Ok(stats) => events += stats.events,
            Err(failure) => panic!("{failure}"),
        }
    }
    assert!(events > count, "the runs append events ({events})");
}

#[test]
fn thousands_of_seeds_keep_every_invariant() {
    seeds_pass(0..SEEDS / 2);
}

#[test]
fn thousands_of_seeds_keep_every_invariant_second_half() {
    seeds_pass(SEEDS / 2..SEEDS);
}

#[test]
fn a_seed_replays_exactly() {
    for seed in [1, 77, 1234] {
        let steps = sim::steps_for(seed, STEPS);
        assert_eq!(steps, sim::steps_for(seed, STEPS));
        let (first, trace) = sim::trace(seed, &steps);
        let (second, again) = sim::trace(seed, &steps);
        assert_eq!(first, second);
        assert!(trace.len() > STEPS, "the trace records inputs and outputs");
        assert_eq!(trace, again, "seed {seed} ran differently the second time");
    }
}

/// Runs decoded from bytes (what the `sim_steps` fuzz target feeds the
/// simulator) are runs like any other: the same bytes decode to the same
/// steps, and a few hundred pseudo-random byte strings keep every
/// invariant.
#[test]
fn runs_decoded_from_bytes_keep_every_invariant() {
    assert!(sim::steps_from_bytes(&[]).is_empty());
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next_byte = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state.to_le_bytes()[3]
    };
    for case in 0..200u64 {
        let bytes: Vec<u8> = (0..case * 17 % 3_000).map(|_| next_byte()).collect();
        let steps = sim::steps_from_bytes(&bytes);
        assert_eq!(steps, sim::steps_from_bytes(&bytes));
        assert!(steps.len() <= sim::MAX_BYTE_STEPS);
        assert!(bytes.len() < 8 || !steps.is_empty());
        if let Err((at, message)) = sim::replay(case, &steps) {
            panic!("bytes of case {case}: step {at}: {message}\n{steps:?}");
        }
    }
}

#[test]
fn a_kept_subset_of_a_run_is_a_run() {
    let kept = [3, 17, 40, 41, 42, 99];
    let steps = sim::kept_steps(5, &kept);
    let all = sim::steps_for(5, 100);
    assert_eq!(steps, kept.map(|i| all[i]).to_vec());
    sim::replay(5, &steps).expect("the subset passes");
}

#[test]
fn a_failure_names_its_seed_and_a_shrunk_replay() {
    let failure = sim::Failure {
        seed: 9,
        message: "t0 was created twice".into(),
        steps: vec![Step::Time, Step::Recheck { node: 1 }],
        kept: vec![4, 12],
    };
    let printed = failure.to_string();
    assert!(printed.contains("seed 9 failed: t0 was created twice"));
    assert!(printed.contains("--seed 9 --keep 4,12"));
    assert!(printed.contains("    Step::Recheck { node: 1 },"));
}

/// Replays `steps` of `seed` and fails with what broke.
#[track_caller]
fn passes(seed: u64, steps: &[Step]) {
    if let Err((at, message)) = sim::replay(seed, steps) {
        panic!("seed {seed}, step {at}: {message}");
    }
}

#[test]
fn a_subscription_authorized_by_a_grant_that_is_refused_sends_nothing_until_it_stands() {
    passes(
        18,
        &[
            Step::Create {
                node: 4,
                who: 0,
                thread: 0,
            },
            Step::Settle,
            Step::Grant {
                node: 0,
                thread: 0,
                who: 1,
                role: 2,
            },
            Step::SecondWriter {
                thread: 0,
                announce: false,
            },
            Step::Persist {
                node: 0,
                count: 2,
                unavailable: false,
            },
            Step::WsOpen {
                slot: 0,
                node: 0,
                who: 1,
            },
            Step::Append {
                node: 5,
                who: 0,
                thread: 0,
                key: 0,
            },
            Step::Read {
                node: 7,
                pick: 3,
                fail: false,
            },
            Step::Persist {
                node: 1,
                count: 2,
                unavailable: false,
            },
            Step::Grant {
                node: 3,
                thread: 0,
                who: 0,
                role: 1,
            },
            Step::WsSubscribe {
                slot: 0,
                thread: 0,
                from: 1,
            },
            Step::Read {
                node: 0,
                pick: 4,
                fail: false,
            },
            Step::Persist {
                node: 5,
                count: 3,
                unavailable: false,
            },
        ],
    );
}

#[test]
fn a_subscription_decided_while_an_append_is_refused_is_decided_again_unseen() {
    passes(
        3,
        &[
            Step::Create {
                node: 7,
                who: 1,
                thread: 2,
            },
            Step::WsOpen {
                slot: 0,
                node: 3,
                who: 1,
            },
            Step::Append {
                node: 0,
                who: 0,
                thread: 2,
                key: 1,
            },
            Step::Read {
                node: 1,
                pick: 7,
                fail: false,
            },
            Step::Persist {
                node: 7,
                count: 3,
                unavailable: false,
            },
            Step::WsAppend { slot: 0, thread: 2 },
            Step::Settle,
            Step::SecondWriter {
                thread: 2,
                announce: true,
            },
            Step::Append {
                node: 6,
                who: 1,
                thread: 2,
                key: 3,
            },
            Step::Read {
                node: 6,
                pick: 7,
                fail: false,
            },
            Step::WsSubscribe {
                slot: 0,
                thread: 2,
                from: 2,
            },
        ],
    );
}

#[test]
fn a_thread_made_stale_under_two_batches_is_reloaded_once_and_repeats_no_event() {
    passes(
        252,
        &[
            Step::Create {
                node: 6,
                who: 3,
                thread: 1,
            },
            Step::Read {
                node: 4,
                pick: 6,
                fail: false,
            },
            Step::Grant {
                node: 4,
                thread: 1,
                who: 2,
                role: 1,
            },
            Step::Append {
                node: 3,
                who: 3,
                thread: 1,
                key: 0,
            },
            Step::WsOpen {
                slot: 6,
                node: 6,
                who: 2,
            },
            Step::Append {
                node: 4,
                who: 2,
                thread: 1,
                key: 1,
            },
            Step::Persist {
                node: 6,
                count: 1,
                unavailable: false,
            },
            Step::WsSubscribe {
                slot: 6,
                thread: 1,
                from: 6,
            },
            Step::Read {
                node: 1,
                pick: 6,
                fail: false,
            },
            Step::Persist {
                node: 5,
                count: 3,
                unavailable: false,
            },
            Step::Persist {
                node: 4,
                count: 2,
                unavailable: false,
            },
            Step::Relay {
                from: 4,
                to: 6,
                drop: false,
            },
        ],
    );
}

#[test]
fn a_change_announced_while_an_operation_waits_is_not_undone_by_its_earlier_read() {
    passes(
        100_006,
        &[
            Step::Create {
                node: 6,
                who: 2,
                thread: 0,
            },
            Step::Append {
                node: 7,
                who: 0,
                thread: 0,
                key: 3,
            },
            Step::Grant {
                node: 5,
                thread: 0,
                who: 1,
                role: 1,
            },
            Step::WsOpen {
                slot: 1,
                node: 5,
                who: 1,
            },
            Step::Grant {
                node: 0,
                thread: 0,
                who: 3,
                role: 1,
            },
            Step::Settle,
            Step::Append {
                node: 7,
                who: 1,
                thread: 0,
                key: 0,
            },
            Step::Append {
                node: 5,
                who: 3,
                thread: 0,
                key: 3,
            },
            Step::Read {
                node: 2,
                pick: 4,
                fail: false,
            },
            Step::Read {
                node: 4,
                pick: 2,
                fail: false,
            },
            Step::Persist {
                node: 7,
                count: 3,
                unavailable: false,
            },
            Step::Relay {
                from: 1,
                to: 2,
                drop: false,
            },
            Step::Read {
                node: 5,
                pick: 1,
                fail: false,
            },
            Step::WsSubscribe {
                slot: 1,
                thread: 0,
                from: 4,
            },
        ],
    );
}

#[test]
fn a_failed_reload_keeps_subscriptions_where_they_were_and_repeats_no_event() {
    passes(
        100_039,
        &[
            Step::Create {
                node: 2,
                who: 3,
                thread: 2,
            },
            Step::WsOpen {
                slot: 1,
                node: 4,
                who: 3,
            },
            Step::Read {
                node: 5,
                pick: 2,
                fail: false,
            },
            Step::Grant {
                node: 1,
                thread: 2,
                who: 2,
                role: 3,
            },
            Step::Persist {
                node: 5,
                count: 1,
                unavailable: false,
            },
            Step::Append {
                node: 3,
                who: 2,
                thread: 2,
                key: 0,
            },
            Step::Read {
                node: 1,
                pick: 1,
                fail: false,
            },
            Step::WsSubscribe {
                slot: 1,
                thread: 2,
                from: 4,
            },
            Step::Persist {
                node: 4,
                count: 1,
                unavailable: false,
            },
            Step::Settle,
            Step::Append {
                node: 4,
                who: 0,
                thread: 2,
                key: 1,
            },
            Step::SecondWriter {
                thread: 2,
                announce: true,
            },
            Step::WsSubscribe {
                slot: 1,
                thread: 1,
                from: 7,
            },
            Step::Read {
                node: 7,
                pick: 6,
                fail: false,
            },
            Step::Persist {
                node: 4,
                count: 1,
                unavailable: false,
            },
            Step::Read {
                node: 4,
                pick: 6,
                fail: false,
            },
            Step::Relay {
                from: 7,
                to: 7,
                drop: false,
            },
            Step::Read {
                node: 7,
                pick: 4,
                fail: true,
            },
        ],
    );
}

#[test]
fn a_subscription_revoked_before_its_grant_stands_delivers_no_event() {
    passes(
        10_821,
        &[
            Step::WsOpen {
                slot: 6,
                node: 6,
                who: 3,
            },
            Step::Create {
                node: 6,
                who: 1,
                thread: 2,
            },
            Step::Read {
                node: 2,
                pick: 0,
                fail: false,
            },
            Step::Append {
                node: 0,
                who: 0,
                thread: 2,
                key: 3,
            },
            Step::Grant {
                node: 4,
                thread: 2,
                who: 3,
                role: 3,
            },
            Step::WsSubscribe {
                slot: 6,
                thread: 2,
                from: 1,
            },
            Step::Grant {
                node: 0,
                thread: 2,
                who: 3,
                role: 4,
            },
            Step::Persist {
                node: 0,
                count: 1,
                unavailable: false,
            },
            Step::Persist {
                node: 0,
                count: 1,
                unavailable: false,
            },
            Step::SecondWriter {
                thread: 2,
                announce: true,
            },
        ],
    );
}

/// A node learns of a revocation made elsewhere while a write of its own
/// is in flight on the thread, so it cannot reload it yet: a backlog event
/// it read for the revoked reader, held behind the durability fence of an
/// unrelated write, is withdrawn rather than let out when that write
/// becomes durable.
#[test]
fn a_revocation_learned_while_writes_are_in_flight_holds_back_the_readers_events() {
    passes(
        2_920,
        &[
            Step::WsOpen {
                slot: 7,
                node: 6,
                who: 3,
            },
            Step::Create {
                node: 6,
                who: 0,
                thread: 2,
            },
            Step::Settle,
            Step::WsOpen {
                slot: 4,
                node: 4,
                who: 0,
            },
            Step::WsAppend { slot: 4, thread: 2 },
            Step::Append {
                node: 6,
                who: 3,
                thread: 2,
                key: 2,
            },
            Step::WsAppend { slot: 7, thread: 2 },
            Step::WsOpen {
                slot: 0,
                node: 0,
                who: 0,
            },
            Step::Grant {
                node: 3,
                thread: 2,
                who: 3,
                role: 3,
            },
            Step::WsAppend { slot: 0, thread: 2 },
            Step::Stall { slot: 7 },
            Step::Time,
            Step::Persist {
                node: 0,
                count: 3,
                unavailable: false,
            },
            Step::Append {
                node: 6,
                who: 0,
                thread: 2,
                key: 1,
            },
            Step::Grant {
                node: 1,
                thread: 2,
                who: 2,
                role: 0,
            },
            Step::Grant {
                node: 2,
                thread: 2,
                who: 1,
                role: 1,
            },
            Step::WsOpen {
                slot: 2,
                node: 1,
                who: 2,
            },
            Step::Time,
            Step::WsSubscribe {
                slot: 2,
                thread: 2,
                from: 2,
            },
            Step::Settle,
            Step::Create {
                node: 1,
                who: 2,
                thread: 1,
            },
            Step::Time,
            Step::WsOpen {
                slot: 7,
                node: 7,
                who: 1,
            },
            Step::Append {
                node: 7,
                who: 2,
                thread: 2,
                key: 2,
            },
            Step::WsSubscribe {
                slot: 7,
                thread: 2,
                from: 5,
            },
            Step::Read {
                node: 4,
                pick: 0,
                fail: false,
            },
            Step::Read {
                node: 7,
                pick: 7,
                fail: false,
            },
            Step::WsAppend { slot: 4, thread: 2 },
            Step::Grant {
                node: 0,
                thread: 2,
                who: 1,
                role: 4,
            },
        ],
    );
}

/// A subscription decided while a write of the node's own was in flight
/// (so on its cached head, 7, though another node had made #8 durable)
/// and ended by a local revocation before that write was refused: its
/// opening goes out with the stale `throughSeq`, then its end, and nothing
/// between. The simulator accepts such an opening only when it ends
/// before it delivers anything.
#[test]
fn a_subscription_opened_on_writes_that_did_not_stand_ends_before_it_sends_anything() {
    passes(
        17_243,
        &[
            Step::Create {
                node: 6,
                who: 2,
                thread: 1,
            },
            Step::Append {
                node: 6,
                who: 0,
                thread: 1,
                key: 0,
            },
            Step::WsOpen {
                slot: 6,
                node: 5,
                who: 2,
            },
            Step::Append {
                node: 1,
                who: 2,
                thread: 1,
                key: 0,
            },
            Step::WsOpen {
                slot: 1,
                node: 3,
                who: 1,
            },
            Step::Grant {
                node: 3,
                thread: 1,
                who: 1,
                role: 3,
            },
            Step::Grant {
                node: 2,
                thread: 1,
                who: 3,
                role: 0,
            },
            Step::WsOpen {
                slot: 5,
                node: 2,
                who: 1,
            },
            Step::WsAppend { slot: 1, thread: 1 },
            Step::WsOpen {
                slot: 0,
                node: 3,
                who: 2,
            },
            Step::Append {
                node: 1,
                who: 0,
                thread: 1,
                key: 3,
            },
            Step::WsAppend { slot: 0, thread: 1 },
            Step::Append {
                node: 3,
                who: 1,
                thread: 1,
                key: 1,
            },
            Step::WsAppend { slot: 5, thread: 1 },
            Step::Settle,
            Step::WsOpen {
                slot: 4,
                node: 0,
                who: 3,
            },
            Step::Grant {
                node: 3,
                thread: 1,
                who: 0,
                role: 2,
            },
            Step::WsAppend { slot: 6, thread: 1 },
            Step::Read {
                node: 6,
                pick: 2,
                fail: false,
            },
            Step::Persist {
                node: 2,
                count: 2,
                unavailable: false,
            },
            Step::WsSubscribe {
                slot: 4,
                thread: 1,
                from: 9,
            },
            Step::Grant {
                node: 0,
                thread: 1,
                who: 3,
                role: 4,
            },
        ],
    );
}

/// A backlog event read for a reader, held behind the fence of the node's
/// own writes, whose reader unsubscribed before those writes were refused:
/// the reload that follows (which tells the node of the reader's
/// revocation elsewhere) withdraws it, though the thread has no
/// subscription left to send it again to.
#[test]
fn an_event_held_for_a_subscription_that_ended_is_withdrawn_by_a_reload() {
    passes(
        132_981,
        &[
            Step::WsOpen {
                slot: 4,
                node: 7,
                who: 3,
            },
            Step::Create {
                node: 6,
                who: 0,
                thread: 1,
            },
            Step::Append {
                node: 3,
                who: 0,
                thread: 1,
                key: 0,
            },
            Step::Grant {
                node: 3,
                thread: 1,
                who: 3,
                role: 2,
            },
            Step::Grant {
                node: 0,
                thread: 1,
                who: 2,
                role: 1,
            },
            Step::Grant {
                node: 2,
                thread: 1,
                who: 1,
                role: 3,
            },
            Step::Append {
                node: 0,
                who: 2,
                thread: 1,
                key: 1,
            },
            Step::WsAppend { slot: 4, thread: 1 },
            Step::Settle,
            Step::Append {
                node: 4,
                who: 2,
                thread: 1,
                key: 3,
            },
            Step::Read {
                node: 7,
                pick: 1,
                fail: false,
            },
            Step::WsOpen {
                slot: 3,
                node: 7,
                who: 1,
            },
            Step::History {
                node: 3,
                who: 2,
                thread: 1,
                from: 11,
                limit: 4,
            },
            Step::WsSubscribe {
                slot: 3,
                thread: 1,
                from: 3,
            },
            Step::Read {
                node: 3,
                pick: 2,
                fail: false,
            },
            Step::Grant {
                node: 0,
                thread: 1,
                who: 1,
                role: 4,
            },
            Step::Grant {
                node: 1,
                thread: 1,
                who: 3,
                role: 3,
            },
            Step::Grant {
                node: 7,
                thread: 1,
                who: 2,
                role: 4,
            },
            Step::Persist {
                node: 6,
                count: 1,
                unavailable: false,
            },
            Step::Read {
                node: 7,
                pick: 7,
                fail: false,
            },
            Step::WsUnsubscribe { slot: 3, thread: 1 },
            Step::Persist {
                node: 4,
                count: 1,
                unavailable: false,
            },
        ],
    );
}

/// A backlog event held behind the fence of a write on another thread for
/// a reader who then unsubscribed, and a revocation of that reader
/// announced before the write is durable: the thread, followed by nobody
/// now, is forgotten rather than read, and the held event goes with it.
#[test]
fn an_event_held_for_an_ended_subscription_is_withdrawn_when_its_thread_is_forgotten() {
    passes(
        23_153,
        &[
            Step::WsOpen {
                slot: 7,
                node: 2,
                who: 2,
            },
            Step::Create {
                node: 0,
                who: 0,
                thread: 1,
            },
            Step::WsOpen {
                slot: 1,
                node: 2,
                who: 0,
            },
            Step::Read {
                node: 0,
                pick: 1,
                fail: false,
            },
            Step::WsAppend { slot: 1, thread: 1 },
            Step::Persist {
                node: 6,
                count: 1,
                unavailable: false,
            },
            Step::Create {
                node: 7,
                who: 3,
                thread: 2,
            },
            Step::Grant {
                node: 7,
                thread: 2,
                who: 2,
                role: 1,
            },
            Step::Read {
                node: 5,
                pick: 2,
                fail: false,
            },
            Step::Grant {
                node: 0,
                thread: 1,
                who: 2,
                role: 0,
            },
            Step::Persist {
                node: 5,
                count: 1,
                unavailable: false,
            },
            Step::Settle,
            Step::WsOpen {
                slot: 5,
                node: 5,
                who: 2,
            },
            Step::Grant {
                node: 5,
                thread: 2,
                who: 1,
                role: 2,
            },
            Step::Append {
                node: 1,
                who: 3,
                thread: 1,
                key: 0,
            },
            Step::WsSubscribe {
                slot: 1,
                thread: 1,
                from: 8,
            },
            Step::Read {
                node: 5,
                pick: 5,
                fail: false,
            },
            Step::Read {
                node: 7,
                pick: 5,
                fail: false,
            },
            Step::Read {
                node: 5,
                pick: 4,
                fail: false,
            },
            Step::Grant {
                node: 4,
                thread: 1,
                who: 2,
                role: 4,
            },
            Step::Persist {
                node: 2,
                count: 2,
                unavailable: false,
            },
            Step::WsSubscribe {
                slot: 5,
                thread: 1,
                from: 0,
            },
            Step::WsAppend { slot: 7, thread: 2 },
            Step::WsClose { slot: 1 },
            Step::Read {
                node: 2,
                pick: 6,
                fail: false,
            },
            Step::Persist {
                node: 7,
                count: 1,
                unavailable: false,
            },
            Step::WsUnsubscribe { slot: 5, thread: 1 },
            Step::Relay {
                from: 1,
                to: 5,
                drop: false,
            },
        ],
    );
}
