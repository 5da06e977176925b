//! SQLite specifics beyond the shared contract: atomic batches, migrations.

use std::sync::Arc;

use bubble_core::ids::ThreadId;
use bubble_core::store::{Backend, EventStore, Write};
use bubble_server::store::SqliteStore;

fn thread(id: &str) -> ThreadId {
    ThreadId::parse(id).expect("thread id")
}

fn create(id: &str) -> Write {
    Write::CreateThread {
        thread_id: thread(id),
        parent_thread_id: None,
        created_at: "2026-01-01T00:00:00.000Z".into(),
    }
}

fn append(id: &str, seq: u64) -> Write {
    Write::AppendEvent {
        thread_id: thread(id),
        seq,
        idempotency_key: None,
        json: Arc::from(format!("{{\"seq\":{seq}}}")),
    }
}

#[test]
fn a_failing_batch_leaves_nothing_behind() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut store = SqliteStore::open(&dir.path().join("b.db")).expect("open");
    store
        .apply(&[create("t"), append("t", 1)])
        .expect("first batch");
    // seq 4 skips 3: the whole batch, valid writes included, is refused.
    let refused = store.apply(&[create("u"), append("t", 2), append("t", 4)]);
    assert!(refused.is_err());
    let snapshot = store.load().expect("load");
    assert_eq!(snapshot.threads.len(), 1);
    assert_eq!(snapshot.threads[0].head_seq, 1);
    let events = store
        .read_events(&thread("t"), 1, u64::MAX, 10)
        .expect("read");
    assert_eq!(events.len(), 1);
}

#[test]
fn writes_to_unknown_threads_are_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut store = SqliteStore::open(&dir.path().join("b.db")).expect("open");
    assert!(store.apply(&[append("nope", 1)]).is_err());
    assert!(store.apply(&[create("t"), create("t")]).is_err());
}

#[test]
fn reopening_keeps_the_schema_and_a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("nested").join("b.db");
    let mut store = SqliteStore::open(&path).expect("open creates the directory");
    store.apply(&[create("t"), append("t", 1)]).expect("apply");
    drop(store);
    let store = SqliteStore::open(&path).expect("reopen");
    assert_eq!(store.load().expect("load").threads[0].head_seq, 1);
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
    store
        .apply(&[create("t"), append("t", 1), append("t", 2)])
        .expect("apply");
    let events = reader.read_events(&thread("t"), 2, 2, 10).expect("read");
    assert_eq!(events.len(), 1);
    assert_eq!(&*events[0].json, "{\"seq\":2}");
}

#[test]
fn the_wal_is_checkpointed_and_restarted_between_commits() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("b.db");
    let mut store = SqliteStore::open(&path).expect("open");
    store.apply(&[create("t")]).expect("create");
    let filler = "x".repeat(3000);
    for seq in 1..=2_000u64 {
        let event = Write::AppendEvent {
            thread_id: thread("t"),
            seq,
            idempotency_key: None,
            json: Arc::from(format!("{{\"seq\":{seq},\"filler\":\"{filler}\"}}")),
        };
        store.apply(&[event]).expect("append");
        store.after_commit().expect("after commit");
    }
    // 2,000 commits of about 6 MB of events: without checkpoints that
    // restart it, the WAL would hold every one of them.
    let wal = std::fs::metadata(dir.path().join("b.db-wal")).expect("the WAL exists");
    assert!(wal.len() < 4 * 1024 * 1024, "WAL of {} bytes", wal.len());
    let events = store
        .read_events(&thread("t"), 1, u64::MAX, 5_000)
        .expect("read");
    assert_eq!(events.len(), 2_000);
}
