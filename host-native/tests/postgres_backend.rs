//! PostgreSQL specifics beyond the shared contract: conditional groups
//! under concurrent writers, atomic commits, schemas and migrations, lost
//! and unreachable servers, and the `--store` setting.

mod postgres_common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::TcpListener;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use bubble_core::ids::{PrincipalId, ThreadId};
use bubble_core::model::{Participant, StoredEvent};
use bubble_core::policy::Role;
use bubble_core::store::{
    Backend, Batch, ReadQuery, ReadResult, StoreError, ThreadRecord, ThreadWrites, Version, Write,
};
use bubble_server::store::{
    self, OpenError, PostgresStore, SqliteStore, StoreSpec, StoreSpecError,
};
use postgres_common::{execute, fetch_i64, Schema};

fn thread(id: &str) -> ThreadId {
    ThreadId::parse(id).expect("thread id")
}

fn record(id: &str, head_seq: u64, version: u64) -> ThreadRecord {
    ThreadRecord {
        thread_id: thread(id),
        parent_thread_id: None,
        title: None,
        created_at: "2026-01-01T00:00:00.000Z".into(),
        head_seq,
        version,
        grants: Vec::new(),
        participants: Vec::new(),
    }
}

fn append_json(id: &str, seq: u64, key: Option<&str>, json: String) -> Write {
    Write::AppendEvent {
        thread_id: thread(id),
        seq,
        idempotency_key: key.map(str::to_owned),
        json: json.into(),
    }
}

fn append(id: &str, seq: u64, key: Option<&str>) -> Write {
    append_json(id, seq, key, format!("{{\"seq\":{seq}}}"))
}

/// A group creating `id` with `events` appends, at version 1.
fn create(id: &str, events: u64) -> ThreadWrites {
    create_at(id, events, 1)
}

fn create_at(id: &str, events: u64, version: u64) -> ThreadWrites {
    let mut writes = vec![Write::CreateThread {
        thread_id: thread(id),
        parent_thread_id: None,
        created_at: "2026-01-01T00:00:00.000Z".into(),
    }];
    writes.extend((1..=events).map(|seq| append(id, seq, None)));
    ThreadWrites {
        thread_id: thread(id),
        expect: None,
        record: record(id, events, version),
        writes,
    }
}

/// A group appending `seqs` to `id`, expecting `expect`.
fn appends(
    id: &str,
    expect: Version,
    seqs: std::ops::RangeInclusive<u64>,
    key: Option<&str>,
) -> ThreadWrites {
    let head = *seqs.end();
    ThreadWrites {
        thread_id: thread(id),
        expect: Some(expect),
        record: record(id, head, expect.version + 1),
        writes: seqs.map(|seq| append(id, seq, key)).collect(),
    }
}

fn batch(groups: Vec<ThreadWrites>) -> Batch {
    Batch { threads: groups }
}

fn at(head_seq: u64, version: u64) -> Version {
    Version { head_seq, version }
}

fn open(schema: &Schema) -> PostgresStore {
    PostgresStore::open(&schema.url, &schema.name).expect("open")
}

fn read_record(store: &dyn Backend, id: &str) -> Option<ThreadRecord> {
    match store.read(&ReadQuery::Thread {
        thread_id: thread(id),
    }) {
        Ok(ReadResult::Thread(record)) => record,
        other => panic!("unexpected read: {other:?}"),
    }
}

fn head(store: &dyn Backend, id: &str) -> Option<u64> {
    read_record(store, id).map(|r| r.head_seq)
}

fn events(store: &dyn Backend, id: &str) -> Vec<StoredEvent> {
    let query = ReadQuery::Events {
        thread_id: thread(id),
        from_seq: 1,
        through_seq: u64::MAX,
        limit: 100_000,
    };
    match store.read(&query) {
        Ok(ReadResult::Events(events)) => events,
        other => panic!("unexpected read: {other:?}"),
    }
}

fn keyed(store: &dyn Backend, id: &str, key: &str) -> Option<StoredEvent> {
    let query = ReadQuery::Idempotent {
        thread_id: thread(id),
        key: key.into(),
    };
    match store.read(&query) {
        Ok(ReadResult::Event(event)) => event,
        other => panic!("unexpected read: {other:?}"),
    }
}

fn listing(
    store: &dyn Backend,
    parent: Option<&str>,
    after: Option<&str>,
    limit: usize,
) -> Vec<String> {
    let query = ReadQuery::Threads {
        parent: parent.map(thread),
        after: after.map(thread),
        limit,
    };
    match store.read(&query) {
        Ok(ReadResult::Threads(records)) => records
            .into_iter()
            .map(|r| r.thread_id.as_str().to_owned())
            .collect(),
        other => panic!("unexpected read: {other:?}"),
    }
}

/// What one writer of [`concurrent_writers_leave_no_gap_and_no_trace_of_refused_groups`]
/// saw: tags of the groups it had committed (with their event count) and
/// of those it had refused.
#[derive(Default)]
struct Outcomes {
    committed: BTreeMap<String, u64>,
    refused: BTreeSet<String>,
}

/// A group appending `n` events tagged `tag` after `expect`, the first
/// carrying the idempotency key `tag`, recording `version`.
fn tagged(id: &str, expect: Version, n: u64, tag: &str, version: u64) -> ThreadWrites {
    let writes = (1..=n)
        .map(|i| {
            let seq = expect.head_seq + i;
            let key = (i == 1).then_some(tag);
            append_json(id, seq, key, format!("{{\"tag\":\"{tag}\", \"i\":{i}}}"))
        })
        .collect();
    ThreadWrites {
        thread_id: thread(id),
        expect: Some(expect),
        record: record(id, expect.head_seq + n, version),
        writes,
    }
}

/// One writer: `attempts` commits of two batches, the second expecting
/// what the first records; every third attempt decides on a version it saw
/// before (often stale) instead of reading the current one.
fn write_concurrently(store: &mut PostgresStore, writer: u64, attempts: u64) -> Outcomes {
    let mut outcomes = Outcomes::default();
    let mut seen: Option<Version> = None;
    for i in 0..attempts {
        let expect = match seen {
            Some(v) if i % 3 == 0 => v,
            _ => read_record(store, "t").expect("t exists").at(),
        };
        let n = 1 + i % 3;
        let (first_tag, second_tag) = (format!("w{writer}-{i}-a"), format!("w{writer}-{i}-b"));
        let version = (writer << 40) | (i << 2) | 1;
        let first = tagged("t", expect, n, &first_tag, version);
        let second = tagged("t", first.record.at(), 1, &second_tag, version + 1);
        let refused = store
            .apply(&[&batch(vec![first]), &batch(vec![second])])
            .expect("apply");
        let [first_refused, second_refused] = [!refused[0].is_empty(), !refused[1].is_empty()];
        assert!(
            !first_refused || second_refused,
            "a group expecting a refused group's version committed"
        );
        assert!(
            first_refused || !second_refused,
            "the second group was refused alone"
        );
        if first_refused {
            outcomes.refused.insert(first_tag);
            outcomes.refused.insert(second_tag);
        } else {
            outcomes.committed.insert(first_tag, n);
            outcomes.committed.insert(second_tag, 1);
        }
        seen = Some(if first_refused {
            expect
        } else {
            at(expect.head_seq + n + 1, version + 1)
        });
    }
    outcomes
}

#[test]
fn concurrent_writers_leave_no_gap_and_no_trace_of_refused_groups() {
    let schema = Schema::fresh();
    let mut setup = open(&schema);
    setup
        .apply(&[&batch(vec![create("t", 0)])])
        .expect("create");
    const ATTEMPTS: u64 = 1_000;
    let start = Arc::new(Barrier::new(2));
    let writers: Vec<_> = (1..=2)
        .map(|writer| {
            let (mut store, start) = (open(&schema), start.clone());
            std::thread::spawn(move || {
                start.wait();
                write_concurrently(&mut store, writer, ATTEMPTS)
            })
        })
        .collect();
    let outcomes: Vec<Outcomes> = writers
        .into_iter()
        .map(|w| w.join().expect("writer"))
        .collect();
    let committed: BTreeMap<&String, u64> = outcomes
        .iter()
        .flat_map(|o| o.committed.iter())
        .map(|(tag, n)| (tag, *n))
        .collect();
    let refused: BTreeSet<&String> = outcomes.iter().flat_map(|o| o.refused.iter()).collect();
    assert!(!refused.is_empty(), "the writers never conflicted");
    assert!(
        committed.len() > 100,
        "too few commits: {}",
        committed.len()
    );

    let stored = events(&setup, "t");
    let head = head(&setup, "t").expect("t");
    assert_eq!(
        stored.iter().map(|e| e.seq).collect::<Vec<_>>(),
        (1..=head).collect::<Vec<_>>(),
        "every seq from 1 to the head, once, in order"
    );
    assert_eq!(head, committed.values().sum::<u64>());
    let mut per_tag: BTreeMap<String, u64> = BTreeMap::new();
    for event in &stored {
        let tag = event
            .json
            .strip_prefix("{\"tag\":\"")
            .and_then(|rest| rest.split_once('"'))
            .map(|(tag, _)| tag.to_owned())
            .unwrap_or_else(|| panic!("untagged event {}", event.json));
        *per_tag.entry(tag).or_default() += 1;
    }
    for (tag, n) in &per_tag {
        assert_eq!(committed.get(tag), Some(n), "{tag}");
    }
    assert_eq!(per_tag.len(), committed.len());
    for tag in &refused {
        assert!(
            keyed(&setup, "t", tag).is_none(),
            "refused {tag} holds its key"
        );
    }
    for tag in committed.keys().take(50) {
        let event = keyed(&setup, "t", tag).expect("a committed key");
        assert!(
            event.json.contains(&format!("\"tag\":\"{tag}\"")),
            "{}",
            event.json
        );
    }
}

#[test]
fn creating_the_same_threads_in_opposite_orders_never_deadlocks() {
    let schema = Schema::fresh();
    open(&schema)
        .apply(&[&batch(vec![create("own-0", 0), create("own-1", 0)])])
        .expect("create");
    const ROUNDS: u64 = 100;
    let start = Arc::new(Barrier::new(2));
    let writers: Vec<_> = (0..2u64)
        .map(|writer| {
            let (mut store, start) = (open(&schema), start.clone());
            std::thread::spawn(move || {
                let own = format!("own-{writer}");
                let mut created = Vec::new();
                let mut failures = Vec::new();
                // Nothing panics between two waits: a writer that failed
                // keeps meeting the other at the barrier.
                for round in 0..ROUNDS {
                    let (x, y) = (format!("x-{round}"), format!("y-{round}"));
                    let version = ((writer + 1) << 32) | round;
                    let mut groups = vec![create_at(&x, 1, version), create_at(&y, 1, version)];
                    if writer == 1 {
                        groups.reverse();
                    }
                    // Each also appends to a thread of its own: existing rows
                    // are locked too, but no lock is shared.
                    let mine = Version {
                        head_seq: round,
                        version: if round == 0 {
                            1
                        } else {
                            (writer + 1) << 32 | (round - 1)
                        },
                    };
                    let mut own_group = appends(&own, mine, round + 1..=round + 1, None);
                    own_group.record.version = version;
                    groups.push(own_group);
                    start.wait();
                    match store.apply(&[&batch(groups)]) {
                        Ok(refused) => {
                            for id in [&x, &y, &own] {
                                if !refused[0].contains(&thread(id)) {
                                    created.push((id.clone(), version));
                                }
                            }
                        }
                        Err(e) => failures.push(e),
                    }
                }
                (created, failures)
            })
        })
        .collect();
    let mut created: Vec<(String, u64)> = Vec::new();
    for writer in writers {
        let (mine, failures) = writer.join().expect("writer");
        assert_eq!(failures, [], "no deadlock, no failure");
        created.extend(mine.into_iter().filter(|(id, _)| !id.starts_with("own-")));
    }
    created.sort();
    let store = open(&schema);
    assert_eq!(
        created.len() as u64,
        2 * ROUNDS,
        "each thread created exactly once"
    );
    for (id, version) in &created {
        let record = read_record(&store, id).expect("created");
        assert_eq!(record.version, *version, "{id} is the winner's");
        assert_eq!(events(&store, id).len(), 1);
    }
    for own in ["own-0", "own-1"] {
        assert_eq!(head(&store, own), Some(ROUNDS), "{own} never refused");
    }
}

#[test]
fn a_refused_group_leaves_the_others_standing() {
    let schema = Schema::fresh();
    let mut store = open(&schema);
    let refused = store
        .apply(&[&batch(vec![create("t", 1), create("u", 0)])])
        .expect("first batch");
    assert_eq!(refused, [Vec::<ThreadId>::new()]);
    let refused = store
        .apply(&[&batch(vec![
            appends("t", at(1, 7), 2..=3, None),
            appends("u", at(0, 1), 1..=1, None),
            create("t", 0),
        ])])
        .expect("second batch");
    assert_eq!(refused, [vec![thread("t"), thread("t")]]);
    assert_eq!((head(&store, "t"), events(&store, "t").len()), (Some(1), 1));
    assert_eq!((head(&store, "u"), events(&store, "u").len()), (Some(1), 1));
    // A later group expecting the refused one's version is refused too,
    // within the same commit; one expecting the stored version commits.
    let refused = store
        .apply(&[
            &batch(vec![appends("t", at(1, 1), 2..=2, Some("k"))]),
            &batch(vec![appends("t", at(2, 2), 3..=3, Some("k"))]),
        ])
        .expect("third commit");
    assert_eq!(
        refused,
        [vec![], vec![thread("t")]],
        "the key is taken by seq 2"
    );
    assert_eq!((head(&store, "t"), events(&store, "t").len()), (Some(2), 2));
    // A taken key refuses only its own thread's group; so does a key
    // repeated within one group.
    let mut twice = appends("u", at(1, 2), 2..=3, Some("again"));
    twice.record.version = 3;
    let refused = store
        .apply(&[&batch(vec![
            appends("t", at(2, 2), 3..=3, Some("k")),
            twice,
            appends("u", at(1, 2), 2..=2, Some("k")),
        ])])
        .expect("fourth commit");
    assert_eq!(refused, [vec![thread("t"), thread("u")]]);
    assert_eq!(head(&store, "u"), Some(2));
    assert_eq!(keyed(&store, "u", "k").map(|e| e.seq), Some(2));
    assert_eq!(keyed(&store, "t", "k").map(|e| e.seq), Some(2));
}

#[test]
fn gapped_seqs_are_a_store_failure_and_leave_nothing_behind() {
    let schema = Schema::fresh();
    let mut store = open(&schema);
    store
        .apply(&[&batch(vec![create("t", 1)])])
        .expect("first batch");
    let mut gapped = appends("t", at(1, 1), 2..=2, None);
    gapped.writes.push(append("t", 4, None));
    gapped.record.head_seq = 4;
    let err = store
        .apply(&[&batch(vec![create("u", 0), gapped])])
        .expect_err("a gap");
    assert!(matches!(err, StoreError::Failed(_)), "{err:?}");
    assert_eq!(head(&store, "u"), None);
    assert_eq!((head(&store, "t"), events(&store, "t").len()), (Some(1), 1));
    // The connection is still usable.
    store
        .apply(&[&batch(vec![appends("t", at(1, 1), 2..=2, None)])])
        .expect("next batch");
    assert_eq!(head(&store, "t"), Some(2));
}

#[test]
fn a_statement_the_database_refuses_fails_the_whole_commit() {
    let schema = Schema::fresh();
    let mut store = open(&schema);
    store
        .apply(&[&batch(vec![create("t", 1)])])
        .expect("first batch");
    execute(
        &schema.url,
        format!(
            "ALTER TABLE \"{}\".grants ADD CHECK (principal_id <> 'refused')",
            schema.name
        ),
    )
    .expect("a check");
    let mut granting = appends("t", at(1, 1), 2..=2, None);
    granting.writes.push(Write::PutGrant {
        thread_id: thread("t"),
        principal_id: PrincipalId::new("refused"),
        role: Role::Member,
    });
    let err = store
        .apply(&[&batch(vec![create("u", 1)]), &batch(vec![granting])])
        .expect_err("the check refuses the grant");
    assert!(matches!(err, StoreError::Failed(_)), "{err:?}");
    assert_eq!(head(&store, "u"), None);
    assert_eq!((head(&store, "t"), events(&store, "t").len()), (Some(1), 1));
    let refused = store
        .apply(&[&batch(vec![appends("t", at(1, 1), 2..=2, None)])])
        .expect("the connection is usable");
    assert_eq!(refused, [Vec::<ThreadId>::new()]);
}

#[test]
fn a_title_postgresql_cannot_store_is_a_store_failure() {
    let schema = Schema::fresh();
    let mut store = open(&schema);
    let mut group = create("t", 0);
    group.record.title = Some("a\u{0}b".into());
    let err = store
        .apply(&[&batch(vec![create("u", 0), group])])
        .expect_err("U+0000 in text");
    assert!(
        matches!(&err, StoreError::Failed(e) if e.contains("U+0000")),
        "{err:?}"
    );
    assert_eq!(head(&store, "u"), None);
}

/// Batches exercising titles, parents, grants and participants.
fn access_batches() -> Vec<Batch> {
    let member = |who: &str, joined: &str| Participant {
        principal_id: PrincipalId::new(who),
        role: Role::Member,
        joined_at: joined.into(),
    };
    let grant = |who: &str, role: Role| Write::PutGrant {
        thread_id: thread("a"),
        principal_id: PrincipalId::new(who),
        role,
    };
    let join = |who: &str, joined: &str| Write::PutParticipant {
        thread_id: thread("a"),
        participant: member(who, joined),
    };
    let leave = |who: &str| Write::DeleteParticipant {
        thread_id: thread("a"),
        principal_id: PrincipalId::new(who),
    };
    let mut ids: Vec<Batch> = ["b", "a", "A", "a-1", "a_1", "Z", "a:1", "a.1"]
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let mut group = create_at(id, 0, i as u64 + 1);
            if *id != "a" && i % 2 == 0 {
                set_parent(&mut group, "a");
            }
            batch(vec![group])
        })
        .collect();
    let a = read_a_version(&ids);
    let mut titled = ThreadWrites {
        thread_id: thread("a"),
        expect: Some(a),
        record: record("a", 0, 100),
        writes: vec![
            Write::SetTitle {
                thread_id: thread("a"),
                title: Some("Q3 \u{e9}t\u{e9}".into()),
            },
            grant("bob", Role::Member),
            grant("carol", Role::Reader),
            grant("bob", Role::Owner),
            join("bob", "t1"),
            join("carol", "t2"),
            join("bob", "t3"),
            join("dave", "t4"),
            leave("carol"),
            join("carol", "t5"),
            Write::DeleteGrant {
                thread_id: thread("a"),
                principal_id: PrincipalId::new("nobody"),
            },
        ],
    };
    titled.record.title = Some("Q3 \u{e9}t\u{e9}".into());
    titled.record.grants = vec![
        (PrincipalId::new("carol"), Role::Reader),
        (PrincipalId::new("bob"), Role::Owner),
    ];
    titled.record.participants = vec![
        member("bob", "t3"),
        member("dave", "t4"),
        member("carol", "t5"),
    ];
    ids.push(batch(vec![titled]));
    ids
}

/// Makes the thread `group` creates a child of `parent`.
fn set_parent(group: &mut ThreadWrites, parent: &str) {
    group.record.parent_thread_id = Some(thread(parent));
    for write in &mut group.writes {
        if let Write::CreateThread {
            parent_thread_id, ..
        } = write
        {
            *parent_thread_id = Some(thread(parent));
        }
    }
}

/// The version `access_batches` created "a" at.
fn read_a_version(batches: &[Batch]) -> Version {
    batches
        .iter()
        .flat_map(|b| &b.threads)
        .find(|g| g.thread_id.as_str() == "a")
        .map(|g| g.record.at())
        .expect("a is created")
}

#[test]
fn records_and_listings_read_as_from_sqlite() {
    let schema = Schema::fresh();
    let mut postgres = open(&schema);
    let dir = tempfile::tempdir().expect("temp dir");
    let mut sqlite = SqliteStore::open(&dir.path().join("b.db")).expect("sqlite");
    for batch in access_batches() {
        assert_eq!(
            postgres.apply(&[&batch]).expect("postgres"),
            [Vec::<ThreadId>::new()]
        );
        assert_eq!(
            sqlite.apply(&[&batch]).expect("sqlite"),
            [Vec::<ThreadId>::new()]
        );
    }
    let record = read_record(&postgres, "a").expect("a");
    assert_eq!(record.title.as_deref(), Some("Q3 \u{e9}t\u{e9}"));
    let grants: Vec<&str> = record.grants.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(grants, ["carol", "bob"], "a replaced grant goes last");
    let joined: Vec<&str> = record
        .participants
        .iter()
        .map(|p| p.joined_at.as_str())
        .collect();
    assert_eq!(
        joined,
        ["t3", "t4", "t5"],
        "a replaced participant keeps its place"
    );
    for id in ["a", "b", "a.1", "Z", "missing"] {
        assert_eq!(read_record(&postgres, id), read_record(&sqlite, id), "{id}");
    }
    let all = listing(&postgres, None, None, 100);
    assert_eq!(
        all,
        ["A", "Z", "a", "a-1", "a.1", "a:1", "a_1", "b"],
        "byte order"
    );
    for (parent, after, limit) in [
        (None, None, 100),
        (None, Some("a"), 3),
        (None, Some("a_1"), 3),
        (Some("a"), None, 100),
        (Some("a"), Some("a-1"), 2),
        (Some("b"), None, 10),
        (Some("missing"), None, 10),
    ] {
        assert_eq!(
            listing(&postgres, parent, after, limit),
            listing(&sqlite, parent, after, limit),
            "{parent:?} after {after:?}"
        );
    }
    let query = ReadQuery::Threads {
        parent: Some(thread("a")),
        after: None,
        limit: 100,
    };
    assert_eq!(postgres.read(&query), sqlite.read(&query), "whole records");
}

#[test]
fn events_read_back_byte_for_byte() {
    let schema = Schema::fresh();
    let mut store = open(&schema);
    let odd = [
        "{\"b\":1,  \"a\":\"\\u00e9 \u{e9}\"}",
        "{ \"nested\" : { \"x\" : [1, 2.50, 1e3] } }",
        "{\"s\":\"\\\\ \\\" \\u0000\"}",
    ];
    let mut group = create("t", 0);
    for (i, json) in odd.iter().enumerate() {
        group
            .writes
            .push(append_json("t", i as u64 + 1, None, (*json).to_owned()));
    }
    group.record.head_seq = odd.len() as u64;
    store.apply(&[&batch(vec![group])]).expect("apply");
    let stored: Vec<String> = events(&store, "t")
        .iter()
        .map(|e| e.json.to_string())
        .collect();
    assert_eq!(stored, odd);
    let query = ReadQuery::Events {
        thread_id: thread("t"),
        from_seq: 2,
        through_seq: 3,
        limit: 1,
    };
    let Ok(ReadResult::Events(page)) = store.read(&query) else {
        panic!("events");
    };
    assert_eq!(page.iter().map(|e| e.seq).collect::<Vec<_>>(), [2]);
}

#[test]
fn committed_versions_tell_where_threads_stand() {
    let schema = Schema::fresh();
    let mut store = open(&schema);
    store
        .apply(&[&batch(vec![create_at("t", 2, 1 << 62)])])
        .expect("apply");
    let versions = store
        .committed_versions(&[thread("missing"), thread("t")])
        .expect("versions");
    assert_eq!(
        versions,
        [(thread("missing"), None), (thread("t"), Some((2, 1 << 62)))]
    );
}

#[test]
fn two_schemas_in_one_database_are_independent() {
    let (first, second) = (Schema::fresh(), Schema::fresh());
    let start = Arc::new(Barrier::new(2));
    let opening: Vec<_> = [&first, &second]
        .iter()
        .map(|schema| {
            let (url, name, start) = (schema.url.clone(), schema.name.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                PostgresStore::open(&url, &name).expect("open")
            })
        })
        .collect();
    let mut stores: Vec<PostgresStore> = opening
        .into_iter()
        .map(|o| o.join().expect("opened"))
        .collect();
    stores[0]
        .apply(&[&batch(vec![create("t", 2)])])
        .expect("first");
    stores[1]
        .apply(&[&batch(vec![create("t", 1), create("u", 0)])])
        .expect("second");
    assert_eq!(head(&stores[0], "t"), Some(2));
    assert_eq!(head(&stores[1], "t"), Some(1));
    assert_eq!(head(&stores[0], "u"), None);
    for schema in [&first, &second] {
        let migrations = fetch_i64(
            &schema.url,
            format!("SELECT count(*) FROM \"{}\"._sqlx_migrations", schema.name),
        );
        assert_eq!(migrations, 1, "{}", schema.name);
    }
}

#[test]
fn nodes_starting_at_once_migrate_once() {
    for _ in 0..3 {
        let schema = Schema::fresh();
        let start = Arc::new(Barrier::new(4));
        let nodes: Vec<_> = (0..4)
            .map(|_| {
                let (url, name, start) = (schema.url.clone(), schema.name.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    PostgresStore::open(&url, &name)
                })
            })
            .collect();
        for node in nodes {
            node.join().expect("node").expect("open");
        }
        let migrations = fetch_i64(
            &schema.url,
            format!("SELECT count(*) FROM \"{}\"._sqlx_migrations", schema.name),
        );
        assert_eq!(migrations, 1);
    }
}

#[test]
fn reopening_keeps_the_data_and_a_newer_schema_is_refused() {
    let schema = Schema::fresh();
    open(&schema)
        .apply(&[&batch(vec![create("t", 1)])])
        .expect("apply");
    assert_eq!(head(&open(&schema), "t"), Some(1));
    execute(
        &schema.url,
        format!(
            "INSERT INTO \"{}\"._sqlx_migrations \
             (version, description, success, checksum, execution_time) \
             VALUES (999, 'from a newer build', true, '\\x00', 0)",
            schema.name
        ),
    )
    .expect("a newer migration");
    let err = PostgresStore::open(&schema.url, &schema.name).expect_err("a newer schema");
    assert!(
        matches!(&err, StoreError::Failed(e) if e.contains("999")),
        "{err:?}"
    );
}

/// A port on loopback where nothing listens.
fn closed_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

#[test]
fn an_unreachable_server_is_unavailable_within_seconds() {
    let started = Instant::now();
    let refused = format!("postgres://postgres@127.0.0.1:{}/test", closed_port());
    let err = PostgresStore::open(&refused, "bubble").expect_err("nothing listens");
    assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(3));

    // A server that accepts connections and never answers.
    let silent = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = silent.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        while let Ok((stream, _)) = silent.accept() {
            held.push(stream);
        }
    });
    let started = Instant::now();
    let spec =
        StoreSpec::parse(&format!("postgres://postgres@127.0.0.1:{port}/test")).expect("spec");
    match store::open(&spec, 1) {
        Err(OpenError::Store(StoreError::Unavailable(_))) => {}
        Err(other) => panic!("{other:?}"),
        Ok(_) => panic!("opened a silent server"),
    }
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_secs(4) && waited < Duration::from_secs(10),
        "{waited:?}"
    );
}

#[test]
fn a_database_that_answers_with_an_error_is_a_failure() {
    let url = postgres_common::url();
    let (base, _db) = url.rsplit_once('/').expect("a database in the URL");
    let err = PostgresStore::open(&format!("{base}/no_such_database_for_bubble"), "bubble")
        .expect_err("no such database");
    assert!(matches!(err, StoreError::Failed(_)), "{err:?}");
}

#[test]
fn a_connection_lost_between_calls_is_replaced_without_an_error() {
    let schema = Schema::fresh();
    let name = format!("{}_conn", schema.name);
    let sep = if schema.url.contains('?') { '&' } else { '?' };
    let url = format!("{}{sep}application_name={name}", schema.url);
    let mut store = PostgresStore::open(&url, &schema.name).expect("open");
    let mut reader = store.reader().expect("reader");
    store.apply(&[&batch(vec![create("t", 1)])]).expect("apply");
    reader
        .read(&ReadQuery::Thread {
            thread_id: thread("t"),
        })
        .expect("read");
    let kill = || {
        execute(
            &schema.url,
            format!(
                "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity \
                 WHERE application_name = '{name}'"
            ),
        )
        .expect("terminate")
    };
    kill();
    let query = ReadQuery::Thread {
        thread_id: thread("t"),
    };
    // The read meets the dead connection and runs again on a new one.
    assert!(matches!(
        reader.read(&query),
        Ok(ReadResult::Thread(Some(_)))
    ));
    // So does a commit that failed before `COMMIT`: nothing was applied.
    let refused = store
        .apply(&[&batch(vec![appends("t", at(1, 1), 2..=2, None)])])
        .expect("applied on a new connection");
    assert_eq!(refused, [Vec::<ThreadId>::new()]);
    assert_eq!(head(&store, "t"), Some(2));
    // Both connections were replaced: the killed ones are gone.
    let alive = fetch_i64(
        &schema.url,
        format!("SELECT count(*) FROM pg_stat_activity WHERE application_name = '{name}'"),
    );
    assert_eq!(alive, 2);
}

#[test]
fn a_server_opens_its_store_from_async_code() {
    let schema = Schema::fresh();
    let spec = StoreSpec::parse(&schema.spec()).expect("spec");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    // As `serve` does: open inside the runtime, probe from a blocking task.
    let opened = runtime
        .block_on(async { store::open(&spec, 2) })
        .expect("open");
    let mut engine = opened.engine;
    assert_eq!(engine.readers.len(), 2);
    assert!(engine.inline_reads.is_none());
    engine
        .writer
        .apply(&[&batch(vec![create("t", 1)])])
        .expect("apply");
    for read in &mut engine.readers {
        let result = read(&ReadQuery::Thread {
            thread_id: thread("t"),
        });
        assert!(matches!(result, Ok(ReadResult::Thread(Some(r))) if r.head_seq == 1));
    }
    let probe = opened.probe;
    let checked = runtime.block_on({
        let probe = probe.clone();
        async move { tokio::task::spawn_blocking(move || probe.check()).await }
    });
    assert!(matches!(checked, Ok(Ok(()))), "{checked:?}");
    // The server drops its handles in async code.
    runtime.block_on(async move {
        drop(engine);
        drop(probe);
    });
}

#[test]
fn store_settings_name_a_schema_and_hide_the_password() {
    let spec = StoreSpec::parse(
        "postgres://bob:s3cret@db.example:5433/app?schema=tenant_1&sslmode=disable",
    )
    .expect("spec");
    assert_eq!(
        spec,
        StoreSpec::Postgres {
            url: "postgres://bob:s3cret@db.example:5433/app?sslmode=disable".into(),
            schema: "tenant_1".into(),
        }
    );
    for shown in [spec.to_string(), format!("{spec:?}")] {
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(
            shown.contains("postgres://bob@db.example:5433/app"),
            "{shown}"
        );
        assert!(shown.contains("schema=tenant_1"), "{shown}");
    }
    assert_eq!(
        StoreSpec::parse("postgresql://localhost/app").expect("spec"),
        StoreSpec::Postgres {
            url: "postgresql://localhost/app".into(),
            schema: "bubble".into(),
        }
    );
    for bad in [
        "Upper",
        "1st",
        "with-dash",
        "pg_catalog",
        "",
        &"x".repeat(64),
    ] {
        let raw = format!("postgres://localhost/app?schema={bad}");
        assert_eq!(
            StoreSpec::parse(&raw),
            Err(StoreSpecError::PostgresSchema(bad.to_owned())),
            "{bad}"
        );
    }
    assert!(matches!(
        StoreSpec::parse("postgres://bob:s3cret@host:port/app"),
        Err(StoreSpecError::PostgresUrl(e)) if !e.contains("s3cret")
    ));
    assert!(matches!(
        StoreSpec::parse("mysql://localhost/app"),
        Err(StoreSpecError::Unknown(_))
    ));
}
