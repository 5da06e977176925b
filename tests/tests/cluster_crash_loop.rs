//! Crash loop on a cluster: two nodes on one PostgreSQL schema and the
//! test's own Redis; the clients of the SQLite crash loop append through
//! either node (moving to the other when theirs is down) while a node is
//! killed with SIGKILL and restarted, and every fifth cycle Redis is
//! restarted empty. Afterwards every acknowledged event is at its seq, seqs
//! have no gap and no keyed append is stored twice.
//!
//! `BUBBLE_CLUSTER_CRASH_CYCLES` sets the number of cycles (default 20).
//! The node killed in each cycle, and the pause before the kill, are drawn
//! from a seeded generator: `BUBBLE_CLUSTER_CRASH_SEED` (default 1) picks
//! the sequence, and the test prints the seed it ran with, so a failing
//! sequence can be run again.

use bubble_core::client::SplitMix64;
use bubble_tests::crash::{spawn_clients, verify, wind_down, Shared};
use bubble_tests::threads::create_thread;
use bubble_tests::{wait_ready, Deployment, OwnRedis, Server, ALICE, HANG_TIMEOUT, TEST_CONFIG};

const THREADS: [&str; 2] = ["cluster-a", "cluster-b"];
/// Acknowledgements to wait for between two faults.
const ACKS_PER_CYCLE: u64 = 6;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn wait_for_acks(shared: &Shared, more: u64, cycle: u64) {
    let target = shared.acks() + more;
    let deadline = std::time::Instant::now() + HANG_TIMEOUT;
    while shared.acks() < target {
        assert!(
            std::time::Instant::now() < deadline,
            "cycle {cycle}: appends hang"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Kills a node drawn from `draws` after a drawn pause and restarts it,
/// restarting Redis every fifth cycle while the node is down. Returns how
/// many times each node was killed.
fn crash_loop(
    nodes: &mut [Server; 2],
    redis: &mut OwnRedis,
    shared: &Shared,
    cycles: u64,
    draws: &mut SplitMix64,
) -> [u64; 2] {
    let mut kills = [0; 2];
    for cycle in 0..cycles {
        wait_for_acks(shared, ACKS_PER_CYCLE, cycle);
        let victim = usize::try_from(draws.below(2)).expect("0 or 1");
        kills[victim] += 1;
        std::thread::sleep(std::time::Duration::from_micros(draws.below(4000)));
        nodes[victim].kill9();
        if cycle % 5 == 4 {
            redis.restart();
        }
        nodes[victim].restart();
        wait_ready(&nodes[victim]);
        shared.set_addr(victim, nodes[victim].addr());
    }
    kills
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn acknowledged_events_survive_node_kills_and_redis_restarts() {
    let mut redis = OwnRedis::start();
    let mut deployment = Deployment::with_broker(Some(redis.url()));
    let mut nodes = [deployment.node(TEST_CONFIG), deployment.node(TEST_CONFIG)];
    for t in THREADS {
        create_thread(&nodes[0].http(ALICE), t).await;
    }
    let shared = Shared::new(nodes.iter().map(Server::addr).collect());
    let clients = spawn_clients(&shared, &THREADS);

    let cycles = env_or("BUBBLE_CLUSTER_CRASH_CYCLES", 20);
    let seed = env_or("BUBBLE_CLUSTER_CRASH_SEED", 1);
    let loop_shared = shared.clone();
    let (nodes, _redis, kills) = tokio::task::spawn_blocking(move || {
        let mut draws = SplitMix64::new(seed);
        let kills = crash_loop(&mut nodes, &mut redis, &loop_shared, cycles, &mut draws);
        (nodes, redis, kills)
    })
    .await
    .expect("crash loop");

    let seen = wind_down(&shared, clients).await;
    // Both nodes read the same history.
    let found = verify(&nodes[0].http(ALICE), &THREADS, &seen).await;
    assert_eq!(verify(&nodes[1].http(ALICE), &THREADS, &seen).await, found);
    eprintln!(
        "cluster crash loop (seed {seed}): {cycles} node kills ({} of node 0, {} of node 1), {} Redis restarts, {} acknowledged, {} delivered, {} stored, {} lost",
        kills[0],
        kills[1],
        cycles / 5,
        seen.acked.len(),
        seen.delivered.len(),
        found.stored,
        found.lost
    );
    assert_eq!(found.lost, 0, "acknowledged events lost");
    assert!(seen.acked.len() as u64 >= cycles * ACKS_PER_CYCLE);
}
