//! A million threads in the store: the server loads none of them at
//! start-up, its memory does not grow with their count, and touching 10,000
//! of them keeps the engine's cache within its configured bound.

use bubble_tests::{Server, ALICE, TEST_CONFIG};

const THREADS: u32 = 1_000_000;
const TOUCHED: u32 = 10_000;
const CACHE: u64 = 1_000;
/// Growth allowed for a million stored threads or 10,000 touched ones. One
/// cached thread record costs a few hundred bytes, so loading all of them
/// would add hundreds of MiB; SQLite's page caches and allocator slack stay
/// well under this.
const SLACK_KIB: u64 = 48 * 1024;

fn config() -> String {
    format!("{TEST_CONFIG}\n[limits]\nthread_cache = {CACHE}\n")
}

/// The server's resident memory, from `/proc`.
fn rss_kib(server: &Server) -> u64 {
    let pid = server.pid().expect("running");
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS")
}

/// Writes `THREADS` threads owned by alice straight into the database.
fn fill(db: &std::path::Path) {
    let mut conn = rusqlite::Connection::open(db).expect("open the database");
    let tx = conn.transaction().expect("begin");
    tx.execute_batch(&format!(
        "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < {last})
         INSERT INTO threads (thread_id, parent_thread_id, title, created_at, head_seq, version)
             SELECT printf('t-%07d', i), NULL, NULL, '2026-01-01T00:00:00.000Z', 0, 1 FROM n;
         INSERT INTO grants (thread_id, principal_id, role)
             SELECT thread_id, 'alice', 'owner' FROM threads;",
        last = THREADS - 1
    ))
    .expect("fill");
    tx.commit().expect("commit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_million_threads_cost_nothing_until_used() {
    let mut server = Server::start(&config());
    // A warm-up request, so both measurements include the same code paths.
    let (status, _) = server.http(ALICE).get("/v1/threads/none").await;
    assert_eq!(status, 404);
    let empty = rss_kib(&server);
    assert_eq!(server.terminate().code(), Some(0));
    fill(&server.db_path());

    server.restart();
    assert_eq!(server.metric("bubble_store_reads_total").await, 0);
    assert_eq!(server.metric("bubble_thread_cache_entries").await, 0);
    let (status, _) = server.http(ALICE).get("/v1/threads/none").await;
    assert_eq!(status, 404);
    let loaded = rss_kib(&server);
    assert!(
        loaded < empty + SLACK_KIB,
        "RSS {loaded} KiB over a million threads, {empty} KiB over none"
    );

    let alice = server.http(ALICE);
    for i in (0..THREADS).step_by((THREADS / TOUCHED) as usize) {
        let (status, thread) = alice.get(&format!("/v1/threads/t-{i:07}")).await;
        assert_eq!(status, 200, "{thread}");
    }
    let cached = server.metric("bubble_thread_cache_entries").await;
    assert!(
        cached <= CACHE,
        "{cached} threads cached, the bound is {CACHE}"
    );
    assert!(server.metric("bubble_store_reads_total").await >= u64::from(TOUCHED));
    let touched = rss_kib(&server);
    eprintln!("RSS: {empty} KiB over no thread, {loaded} KiB over a million, {touched} KiB after touching {TOUCHED} ({cached} cached)");
    assert!(
        touched < empty + SLACK_KIB,
        "RSS {touched} KiB after touching {TOUCHED} threads, {empty} KiB over none"
    );
}
