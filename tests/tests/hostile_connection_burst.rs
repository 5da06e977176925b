//! A burst of 10,000 connections opened concurrently and dropped, and 500
//! upgraded sockets dropped without a Close: the server raises its own
//! open-files limit at start-up, survives the burst, reaps every socket
//! and serves a well-behaved client within its normal latency throughout
//! (a probe times its append round trips before, during and after the
//! burst; [`bubble_tests::latency`] says why this is one of the few places
//! a test looks at time). (Alone in its binary: it changes the process's
//! open-files limit, which parallel tests would feel.)

use futures_util::stream::{self, StreamExt};

use bubble_tests::latency::{assert_served, Probe, Via, ROUND_TRIPS};
use bubble_tests::{Server, ALICE, DAVE, HANG_TIMEOUT, TEST_CONFIG};

/// Connects in flight at once: far more than one at a time, within the
/// server's listen backlog (1024) so that no SYN is dropped and retried.
const IN_FLIGHT: usize = 512;

fn open_files() -> libc::rlimit {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct we own.
    assert_eq!(
        unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) },
        0
    );
    limit
}

/// Sets this process's open-files soft limit (a child inherits it).
fn set_open_files(soft: u64) {
    let limit = libc::rlimit {
        rlim_cur: soft,
        rlim_max: open_files().rlim_max,
    };
    // SAFETY: setrlimit only reads the struct we own.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) }, 0);
}

/// The `Max open files` soft and hard limits of process `pid`.
fn limits_of(pid: u32) -> (String, String) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).expect("proc limits");
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .expect("open files line");
    let mut words = line.split_whitespace().skip(3);
    (
        words.next().expect("soft").to_owned(),
        words.next().expect("hard").to_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_thousand_connections_opened_and_dropped() {
    // The server starts with a low soft limit and raises it to the hard one.
    let hard = open_files().rlim_max;
    set_open_files(1024.min(hard));
    let server = Server::start(TEST_CONFIG);
    set_open_files(hard);
    let (soft, max) = limits_of(server.pid().expect("running"));
    assert_eq!(soft, max, "the server raised its soft limit");
    // Each connection costs the server two descriptors (its own and the
    // duplicate the engine writes through): hold at most what the hard
    // limit allows at once, in waves up to 10,000 in all.
    let at_once = usize::try_from(hard.saturating_sub(512) / 2)
        .unwrap_or(0)
        .min(10_000);
    assert!(at_once >= 1_000, "open-files hard limit {hard} is too low");
    let mut probe = Probe::start(&server, DAVE, "probe", Via::Http).await;
    let baseline = probe.measure(ROUND_TRIPS).await;
    let during = probe.during();
    let addr = server.addr();

    let mut opened = 0;
    let mut waves = 0;
    while opened < 10_000 {
        let wave = at_once.min(10_000 - opened);
        let held: Vec<tokio::net::TcpStream> = stream::iter(0..wave)
            .map(|_| tokio::net::TcpStream::connect(addr))
            .buffer_unordered(IN_FLIGHT)
            .map(|connected| connected.expect("connect"))
            .collect()
            .await;
        opened += held.len();
        waves += 1;
        drop(held);
    }
    eprintln!(
        "10000 connections in {waves} waves of up to {at_once}, {IN_FLIGHT} connecting at once (hard limit {hard})"
    );
    // And 500 upgraded sockets dropped without a Close.
    let mut sockets = Vec::new();
    for _ in 0..500 {
        sockets.push(server.ws(ALICE).await);
    }
    assert_eq!(server.metric("bubble_open_sockets").await, 501);
    drop(sockets);
    let deadline = tokio::time::Instant::now() + HANG_TIMEOUT;
    while server.metric("bubble_open_sockets").await != 1 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "dropped sockets are reaped"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let (mut probe, during) = during.stop().await;
    let after = probe.measure(ROUND_TRIPS).await;
    assert_served("connection burst", &baseline, &during, &after);
}
