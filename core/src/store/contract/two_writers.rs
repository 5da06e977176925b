//! Contract cases: two engines writing the same data, as cluster nodes do.
//! Each engine decides over its own cached state; the backend refuses the
//! writes decided on a version another engine has moved, and the engine
//! decides them again. Neither hears of the other's commits unless a case
//! says so, so their caches go stale on purpose.

use std::collections::BTreeMap;

use serde_json::Value;

use super::node::{seqs, Node, Reads, START};
use super::ContractBackend;
use crate::store::Backend;

fn pair<C: ContractBackend>(backend: &C) -> (Node<C::Store>, Node<C::Store>) {
    let reads = backend.reads();
    let shuffled = |seed| match reads {
        Reads::AtOnce => Reads::AtOnce,
        Reads::Shuffled(_) => Reads::Shuffled(seed),
    };
    (
        Node::with(backend, START, 11, shuffled(3)),
        Node::with(backend, START, 22, shuffled(5)),
    )
}

/// Tells `to` of everything `from` committed.
fn gossip<W: Backend>(from: &mut Node<W>, to: &mut Node<W>) {
    for (thread, head, version) in std::mem::take(&mut from.changed) {
        to.hear(&thread, head, version);
    }
}

/// Appends from both engines land gapless, each acknowledged event at its
/// acknowledged seq; a create that lost the race follows `createThread`.
pub fn two_writers_append_and_create<C: ContractBackend>(backend: &C) {
    let (mut a, mut b) = pair(backend);
    a.create("alice", "shared", None).expect(201);
    b.create("alice", "shared", None).expect(200);
    let mut acked: BTreeMap<u64, String> = BTreeMap::new();
    for i in 0..20 {
        let node = if i % 3 == 0 { &mut b } else { &mut a };
        let run = format!("run-{i}");
        let event = node.append("alice", "shared", &run, None).expect(201);
        let seq = event["event"]["seq"].as_u64().expect("seq");
        assert!(
            acked.insert(seq, run).is_none(),
            "seq {seq} acknowledged twice"
        );
    }
    assert_eq!(
        acked.keys().copied().collect::<Vec<_>>(),
        (1..=20).collect::<Vec<_>>()
    );
    // Each engine learns of the other's commits as a broker would tell it.
    gossip(&mut a, &mut b);
    gossip(&mut b, &mut a);
    for node in [&mut a, &mut b] {
        let history = node.history("shared");
        assert_eq!(seqs(&history), (1..=20).collect::<Vec<_>>());
        for event in &history {
            let seq = event["seq"].as_u64().expect("seq");
            assert_eq!(event["runId"], Value::from(acked[&seq].clone()));
        }
    }
    // b caches "race" as absent, then a creates it: b's create is refused
    // by the store, reloaded, and answered as an idempotent repeat.
    b.get("alice", "/v1/threads/race")
        .expect_error(404, "not_found");
    a.create("alice", "race", None).expect(201);
    b.create("alice", "race", None).expect(200);
    // The same race with a different parent is a conflict.
    b.get("alice", "/v1/threads/race-2")
        .expect_error(404, "not_found");
    a.create("alice", "race-2", None).expect(201);
    b.create("alice", "race-2", Some("shared"))
        .expect_error(409, "conflict");
    assert_eq!(b.thread("race-2")["parentThreadId"], Value::Null);
}

/// A key held by the other engine's event resolves to that event; a grant
/// revoked by the other engine refuses what it no longer allows.
pub fn two_writers_idempotency_and_grants<C: ContractBackend>(backend: &C) {
    let (mut a, mut b) = pair(backend);
    a.create("alice", "t", None).expect(201);
    a.grant("alice", "t", "bob", "member").expect(200);
    b.append("bob", "t", "run-0", None).expect(201);
    let first = a.append("alice", "t", "run-1", Some("key-1")).expect(201);
    let again = b.append("alice", "t", "run-1", Some("key-1")).expect(200);
    assert_eq!(again["event"], first["event"]);
    assert_eq!(again["duplicate"], true);
    // b still believes bob is a member; the store refuses b's write, b
    // reloads the thread and decides again: bob cannot even read it now.
    a.delete("alice", "/v1/threads/t/grants/bob");
    b.append("bob", "t", "run-2", None)
        .expect_error(404, "not_found");
    gossip(&mut a, &mut b);
    gossip(&mut b, &mut a);
    for node in [&mut a, &mut b] {
        let history = node.history("t");
        assert_eq!(seqs(&history), [1, 2]);
        assert_eq!(node.thread("t")["headSeq"], 2);
    }
}
