//! SQLite specifics beyond the shared contract: conditional groups, atomic
//! commits, migrations, readers and the WAL.

use std::sync::Arc;

use bubble_core::ids::ThreadId;
use bubble_core::store::{
    Backend, Batch, ReadQuery, ReadResult, ThreadRecord, ThreadWrites, Version, Write,
};
use bubble_server::store::SqliteStore;

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

fn append(id: &str, seq: u64, key: Option<&str>, filler: &str) -> Write {
    Write::AppendEvent {
        thread_id: thread(id),
        seq,
        idempotency_key: key.map(str::to_owned),
        json: Arc::from(format!("{{\"seq\":{seq},\"filler\":\"{filler}\"}}")),
    }
}

/// A group creating `id` with `events` appends.
fn create(id: &str, events: u64) -> ThreadWrites {
    let mut writes = vec![Write::CreateThread {
        thread_id: thread(id),
        parent_thread_id: None,
        created_at: "2026-01-01T00:00:00.000Z".into(),
    }];
    writes.extend((1..=events).map(|seq| append(id, seq, None, "")));
    ThreadWrites {
        thread_id: thread(id),
        expect: None,
        record: record(id, events, 1),
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
        writes: seqs.map(|seq| append(id, seq, key, "")).collect(),
    }
}

fn batch(groups: Vec<ThreadWrites>) -> Batch {
    Batch { threads: groups }
}

fn head(store: &SqliteStore, id: &str) -> Option<u64> {
    match store.read(&ReadQuery::Thread {
        thread_id: thread(id),
    }) {
        Ok(ReadResult::Thread(record)) => record.map(|r| r.head_seq),
        other => panic!("unexpected read: {other:?}"),
    }
}

fn events(store: &SqliteStore, id: &str) -> usize {
    let query = ReadQuery::Events {
        thread_id: thread(id),
        from_seq: 1,
        through_seq: u64::MAX,
        limit: 10_000,
    };
    match store.read(&query) {
        Ok(ReadResult::Events(events)) => events.len(),
        other => panic!("unexpected read: {other:?}"),
    }
}

#[test]
fn a_refused_group_leaves_the_others_standing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut store = SqliteStore::open(&dir.path().join("b.db")).expect("open");
    let refused = store
        .apply(&[&batch(vec![create("t", 1), create("u", 0)])])
        .expect("first batch");
    assert_eq!(refused, [Vec::<ThreadId>::new()]);
    let at_1 = Version {
        head_seq: 1,
        version: 1,
    };
    let stale = Version {
        head_seq: 1,
        version: 7,
    };
    let refused = store
        .apply(&[&batch(vec![
            appends("t", stale, 2..=3, None),
            appends(
                "u",
                Version {
                    head_seq: 0,
                    version: 1,
                },
                1..=1,
                None,
            ),
            create("t", 0),
        ])])
        .expect("second batch");
    assert_eq!(refused, [vec![thread("t"), thread("t")]]);
    assert_eq!((head(&store, "t"), events(&store, "t")), (Some(1), 1));
    assert_eq!((head(&store, "u"), events(&store, "u")), (Some(1), 1));
    // A later group expecting the refused one's version is refused too,
    // within the same commit; one expecting the stored version commits.
    let refused = store
        .apply(&[
            &batch(vec![appends("t", at_1, 2..=2, Some("k"))]),
            &batch(vec![appends(
                "t",
                Version {
                    head_seq: 2,
                    version: 2,
                },
                3..=3,
                Some("k"),
            )]),
        ])
        .expect("third commit");
    assert_eq!(
        refused,
        [vec![], vec![thread("t")]],
        "the key is taken by seq 2"
    );
    assert_eq!((head(&store, "t"), events(&store, "t")), (Some(2), 2));
}

#[test]
fn gapped_seqs_are_a_store_failure_and_leave_nothing_behind() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut store = SqliteStore::open(&dir.path().join("b.db")).expect("open");
    store
        .apply(&[&batch(vec![create("t", 1)])])
        .expect("first batch");
    let mut gapped = appends(
        "t",
        Version {
            head_seq: 1,
            version: 1,
        },
        2..=2,
        None,
    );
    gapped.writes.push(append("t", 4, None, ""));
    gapped.record.head_seq = 4;
    assert!(store
        .apply(&[&batch(vec![create("u", 0), gapped])])
        .is_err());
    assert_eq!(head(&store, "u"), None);
    assert_eq!((head(&store, "t"), events(&store, "t")), (Some(1), 1));
}

#[test]
fn reopening_keeps_the_schema_and_a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("nested").join("b.db");
    let mut store = SqliteStore::open(&path).expect("open creates the directory");
    store.apply(&[&batch(vec![create("t", 1)])]).expect("apply");
    drop(store);
    let store = SqliteStore::open(&path).expect("reopen");
    assert_eq!(head(&store, "t"), Some(1));
    drop(store);

    let conn = rusqlite::Connection::open(&path).expect("raw open");
    conn.execute("UPDATE schema_version SET version = 999", [])
        .expect("bump");
    drop(conn);
    let err = SqliteStore::open(&path).expect_err("a newer schema");
    assert!(err.to_string().contains("newer than this build"), "{err}");
}

#[test]
fn readers_see_committed_writes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut store = SqliteStore::open(&dir.path().join("b.db")).expect("open");
    let reader = store.reader().expect("reader");
    reader.probe().expect("probe");
    store.apply(&[&batch(vec![create("t", 2)])]).expect("apply");
    let query = ReadQuery::Events {
        thread_id: thread("t"),
        from_seq: 2,
        through_seq: 2,
        limit: 10,
    };
    let Ok(ReadResult::Events(events)) = reader.read(&query) else {
        panic!("events read");
    };
    assert_eq!(events.len(), 1);
    assert_eq!(&*events[0].json, "{\"seq\":2,\"filler\":\"\"}");
}

#[test]
fn the_wal_is_checkpointed_and_restarted_between_commits() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("b.db");
    let mut store = SqliteStore::open(&path).expect("open");
    store
        .apply(&[&batch(vec![create("t", 0)])])
        .expect("create");
    let filler = "x".repeat(3000);
    for seq in 1..=2_000u64 {
        let group = ThreadWrites {
            thread_id: thread("t"),
            expect: Some(Version {
                head_seq: seq - 1,
                version: seq,
            }),
            record: record("t", seq, seq + 1),
            writes: vec![append("t", seq, None, &filler)],
        };
        let refused = store.apply(&[&batch(vec![group])]).expect("append");
        assert_eq!(refused, [Vec::<ThreadId>::new()]);
        store.after_commit().expect("after commit");
    }
    // 2,000 commits of about 6 MB of events: without checkpoints that
    // restart it, the WAL would hold every one of them.
    let wal = std::fs::metadata(dir.path().join("b.db-wal")).expect("the WAL exists");
    assert!(wal.len() < 4 * 1024 * 1024, "WAL of {} bytes", wal.len());
    assert_eq!(events(&store, "t"), 2_000);
}

/// A kill -9 cannot tell `synchronous=FULL` from a weaker level (the page
/// cache survives the process): the writer's connection is asked directly,
/// for the store the server opens and for a shared handle.
#[test]
fn the_writer_runs_in_wal_mode_with_synchronous_full() {
    let dir = tempfile::tempdir().expect("temp dir");
    let exclusive = SqliteStore::open(&dir.path().join("a.db")).expect("open");
    let shared = SqliteStore::open_shared(&dir.path().join("b.db")).expect("open shared");
    for store in [&exclusive, &shared] {
        let durability = store.durability().expect("durability");
        assert_eq!(durability.journal_mode, "wal", "{durability:?}");
        assert_eq!(durability.synchronous, 2, "FULL: {durability:?}");
    }
}

/// The page size SQLite reports for the database file at `path`.
fn page_size(path: &std::path::Path) -> i64 {
    rusqlite::Connection::open(path)
        .and_then(|conn| conn.query_row("PRAGMA page_size", [], |row| row.get(0)))
        .expect("page size")
}

/// A database the store creates takes its small pages; one made before, with
/// SQLite's default, keeps its own and works as before.
#[test]
fn a_new_database_takes_small_pages_and_an_older_one_keeps_its_own() {
    let dir = tempfile::tempdir().expect("temp dir");
    let new = dir.path().join("new.db");
    let older = dir.path().join("older.db");
    rusqlite::Connection::open(&older)
        .and_then(|conn| conn.execute_batch("PRAGMA page_size=4096; CREATE TABLE made_before(x);"))
        .expect("an older database");
    for (path, want) in [(&new, 2048), (&older, 4096)] {
        let mut store = SqliteStore::open(path).expect("open");
        store
            .apply(&[&batch(vec![create("t-1", 50)])])
            .expect("commit");
        assert_eq!(events(&store, "t-1"), 50);
        drop(store);
        assert_eq!(page_size(path), want, "{}", path.display());
    }
}
