//! Crash loop on SQLite: clients append over HTTP and `/v1/ws`, with and
//! without idempotency keys, retrying keyed appends across disconnects,
//! while the server is killed with SIGKILL and restarted again and again.
//! Afterwards every acknowledged event is at its acknowledged seq, seqs
//! have no gap, no keyed append is stored twice, and the file passes
//! `PRAGMA integrity_check`.
//!
//! `BUBBLE_CRASH_CYCLES` sets the number of kill/restart cycles (default
//! 100); e.g. `BUBBLE_CRASH_CYCLES=1000 cargo test -p bubble-tests --test
//! threads_durability_crash_loop` is the long mode.

use std::time::Duration;

use bubble_tests::crash::{spawn_clients, verify, wind_down, Shared};
use bubble_tests::threads::{append, create_thread, run_started};
use bubble_tests::{signal, Server, ALICE, HANG_TIMEOUT, TEST_CONFIG};

const THREADS: [&str; 2] = ["crash-a", "crash-b"];
/// Acknowledgements to wait for between two kills.
const ACKS_PER_CYCLE: u64 = 6;

fn cycles() -> u64 {
    std::env::var("BUBBLE_CRASH_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100)
}

/// Kills and restarts the server `cycles` times, each time once
/// [`ACKS_PER_CYCLE`] more appends were acknowledged, after a short pause
/// that moves the kill around inside the commit cycle.
fn crash_loop(server: &mut Server, shared: &Shared, cycles: u64) {
    for cycle in 0..cycles {
        let target = shared.acks() + ACKS_PER_CYCLE;
        let deadline = std::time::Instant::now() + HANG_TIMEOUT;
        while shared.acks() < target {
            assert!(
                std::time::Instant::now() < deadline,
                "cycle {cycle}: appends hang"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_micros((cycle * 7919) % 4000));
        server.kill9();
        server.restart();
        shared.set_addr(0, server.addr());
    }
}

fn integrity_check(server: &Server) {
    let conn = rusqlite::Connection::open(server.db_path()).expect("open the database");
    let verdict: String = conn
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .expect("integrity_check");
    assert_eq!(verdict, "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acknowledged_events_survive_repeated_kill9() {
    let mut server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);
    for t in THREADS {
        create_thread(&alice, t).await;
    }
    let shared = Shared::new(vec![server.addr()]);
    let clients = spawn_clients(&shared, &THREADS);

    let cycles = cycles();
    let loop_shared = shared.clone();
    let mut server = tokio::task::spawn_blocking(move || {
        crash_loop(&mut server, &loop_shared, cycles);
        server
    })
    .await
    .expect("crash loop");

    // Let every keyed append still pending get through, then crash once more.
    let seen = wind_down(&shared, clients).await;
    server.kill9();
    integrity_check(&server);
    server.restart();

    let found = verify(&server.http(ALICE), &THREADS, &seen).await;
    let keyed_acks = seen.acked.iter().filter(|a| a.keyed).count();
    eprintln!(
        "crash loop: {cycles} kill -9 cycles, {} acknowledged ({keyed_acks} keyed), {} delivered, {} stored, {} lost",
        seen.acked.len(),
        seen.delivered.len(),
        found.stored,
        found.lost
    );
    assert_eq!(found.lost, 0, "acknowledged events lost");
    assert!(
        seen.acked.len() as u64 >= cycles * ACKS_PER_CYCLE,
        "{} acks",
        seen.acked.len()
    );
    assert!(
        keyed_acks > 0 && keyed_acks < seen.acked.len(),
        "both kinds acknowledged"
    );
}

/// A kill -9 cannot notice a weaker sync level (the page cache survives
/// the process): the server reports the settings SQLite runs its writer
/// with, and the file is in WAL mode.
#[test]
fn the_server_runs_sqlite_in_wal_mode_with_synchronous_full() {
    let mut server = Server::start(TEST_CONFIG);
    let logs = server.logs();
    let line = logs
        .lines()
        .find(|l| l.contains("sqlite durability"))
        .unwrap_or_else(|| panic!("no durability line:\n{logs}"));
    assert!(line.contains("journal_mode=wal"), "{line}");
    assert!(line.contains("synchronous=2"), "FULL is 2: {line}");
    server.terminate();
    let conn = rusqlite::Connection::open(server.db_path()).expect("open the database");
    let mode: String = conn
        .query_row("PRAGMA journal_mode", [], |row| row.get(0))
        .expect("journal_mode");
    assert_eq!(mode, "wal");
}

/// Every commit is made durable by a sync of the WAL, and that sync is an
/// `fdatasync` (the WAL's frames, without a write of the file's
/// timestamps): the server's system calls are traced with `strace` while
/// it acknowledges appends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_syncs_each_commit_with_fdatasync() {
    const APPENDS: usize = 10;
    let mut server = Server::start(TEST_CONFIG);
    let pid = server.pid().expect("the server runs");
    let trace = server.dir().join("syncs.trace");
    let mut strace = std::process::Command::new("strace")
        .args(["-f", "-qq", "-e", "trace=fsync,fdatasync", "-o"])
        .arg(&trace)
        .args(["-p", &pid.to_string()])
        .spawn()
        .expect("strace is installed (scripts/setup.sh)");
    let alice = server.http(ALICE);
    // strace prints nothing when attached; a first commit that it sees
    // shows it is.
    let deadline = std::time::Instant::now() + HANG_TIMEOUT;
    create_thread(&alice, "synced").await;
    while syncs(&trace).all() == 0 {
        assert!(std::time::Instant::now() < deadline, "strace saw no sync");
        append(&alice, "synced", &run_started("warm-up")).await;
    }
    let before = syncs(&trace);
    for i in 0..APPENDS {
        append(&alice, "synced", &run_started(&format!("run-{i}"))).await;
    }
    // SIGINT: strace detaches from the server and flushes its output.
    signal(&strace, libc::SIGINT);
    strace.wait().expect("strace exits");
    let after = syncs(&trace);
    server.terminate();
    assert!(
        after.fdatasync - before.fdatasync >= APPENDS,
        "one sync per acknowledged append at least: {before:?} then {after:?}"
    );
    assert_eq!(after.fsync, 0, "no fsync: {after:?}");
}

/// Syncs counted in an `strace` output file.
#[derive(Debug, Clone, Copy)]
struct Syncs {
    fsync: usize,
    fdatasync: usize,
}

impl Syncs {
    fn all(self) -> usize {
        self.fsync + self.fdatasync
    }
}

fn syncs(trace: &std::path::Path) -> Syncs {
    let text = std::fs::read_to_string(trace).unwrap_or_default();
    // `-f` starts each line with the thread's id; a call that blocks is
    // split into an `<unfinished ...>` line, counted, and a resumed one.
    let calls: Vec<&str> = text
        .lines()
        .map(|l| l.trim_start_matches(|c: char| c.is_ascii_digit() || c == ' '))
        .collect();
    let count = |call: &str| calls.iter().filter(|l| l.starts_with(call)).count();
    Syncs {
        fsync: count("fsync("),
        fdatasync: count("fdatasync("),
    }
}
