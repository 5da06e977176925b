//! The latency a well-behaved client sees while others attack the server.
//!
//! The hostile tests are the one place the black-box tests look at time:
//! "the server keeps serving the others within their normal latency" is a
//! statement about time, and a liveness check cannot fail on starvation
//! (an attack that makes every other client wait 30 s still lets one
//! append through eventually). A [`Probe`] measures round trips (an append,
//! until its own subscription delivers the event) before the attack (the
//! baseline, on the same machine and build, under the same load), during
//! it and after it, and [`assert_served`] prints the figures and asserts a
//! generous bound that only real starvation can fail: the 99th percentile
//! during and after stays within `max(20 × baseline p99, 1 s)`. The
//! machine the tests run on is shared and noisy, so the bound is relative
//! to a baseline taken moments before, with a floor far above scheduling
//! noise.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::task::JoinHandle;

use crate::http::HttpClient;
use crate::threads::{create_thread, subscribe};
use crate::ws::WsClient;
use crate::{Server, HANG_TIMEOUT};

/// Round trips of the baseline and of the phase after the attack.
pub const ROUND_TRIPS: usize = 40;
/// Round trips measured at least while the attack runs (a short attack
/// ends before them: the phase then includes its aftermath).
const MIN_DURING: usize = 5;
/// How many times the baseline p99 the others may wait.
const FACTOR: u32 = 20;
/// The floor of the bound: scheduling noise on a shared 2-core machine
/// stays far below it.
const FLOOR: Duration = Duration::from_secs(1);

/// The turn of the tests of one test binary that measure latency.
static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Waits for this test's turn among the tests of its binary that measure
/// latency, and holds it while the guard lives: they run one at a time,
/// so that no test's attack is another's baseline noise.
pub async fn turn() -> tokio::sync::MutexGuard<'static, ()> {
    TURN.lock().await
}

/// How the probe appends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Via {
    /// `POST /v1/threads/:id/events`.
    Http,
    /// A `thread.append` frame on its own socket (for tests that limit the
    /// HTTP API).
    Socket,
}

/// A client that appends to its own thread and times each event's return.
pub struct Probe {
    http: HttpClient,
    ws: WsClient,
    thread: String,
    via: Via,
    seq: u64,
}

impl Probe {
    /// Creates `thread` as `token`'s principal and subscribes a socket to it.
    pub async fn start(server: &Server, token: &str, thread: &str, via: Via) -> Probe {
        let http = server.http(token);
        create_thread(&http, thread).await;
        let mut ws = server.ws(token).await;
        subscribe(&mut ws, thread, None).await;
        Probe {
            http,
            ws,
            thread: thread.to_owned(),
            via,
            seq: 0,
        }
    }

    /// One round trip: the append, until the socket delivers its event.
    pub async fn round_trip(&mut self) -> Duration {
        let started = Instant::now();
        let event = json!({"type": "run_started", "runId": format!("probe-{}", self.seq + 1)});
        match self.via {
            Via::Http => {
                let path = format!("/v1/threads/{}/events", self.thread);
                let (status, body) = self.http.post(&path, &event).await;
                assert_eq!(status, 201, "probe append: {body}");
            }
            Via::Socket => {
                let frame =
                    json!({"type": "thread.append", "threadId": self.thread, "event": event});
                self.ws.send_json(&frame).await;
            }
        }
        self.seq += 1;
        let frame = self.ws.recv_json().await;
        assert_eq!(frame["type"], "thread.event", "probe: {frame}");
        assert_eq!(frame["event"]["seq"], self.seq, "probe: {frame}");
        started.elapsed()
    }

    /// `n` round trips in a row.
    pub async fn measure(&mut self, n: usize) -> Samples {
        let mut samples = Samples::default();
        for _ in 0..n {
            samples.0.push(self.round_trip().await);
        }
        samples
    }

    /// Keeps measuring on a task of its own until [`During::stop`].
    pub fn during(mut self) -> During {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let task = tokio::spawn(async move {
            let mut samples = Samples::default();
            while samples.0.len() < MIN_DURING || !flag.load(Ordering::SeqCst) {
                samples.0.push(self.round_trip().await);
            }
            (self, samples)
        });
        During { stop, task }
    }
}

/// A probe measuring in the background.
pub struct During {
    stop: Arc<AtomicBool>,
    task: JoinHandle<(Probe, Samples)>,
}

impl During {
    /// Stops measuring (after at least a few round trips) and hands the
    /// probe back with what it measured.
    pub async fn stop(self) -> (Probe, Samples) {
        self.stop.store(true, Ordering::SeqCst);
        tokio::time::timeout(HANG_TIMEOUT, self.task)
            .await
            .expect("the probe's round trips hang: the server starves it")
            .expect("probe task")
    }
}

/// Measured round trips.
#[derive(Debug, Clone, Default)]
pub struct Samples(pub Vec<Duration>);

impl Samples {
    /// The `p`th percentile (nearest rank), zero when empty.
    pub fn percentile(&self, p: u32) -> Duration {
        let mut sorted = self.0.clone();
        sorted.sort();
        if sorted.is_empty() {
            return Duration::ZERO;
        }
        let rank = (sorted.len() * p as usize).div_ceil(100).max(1);
        sorted[rank.min(sorted.len()) - 1]
    }

    fn describe(&self) -> String {
        format!(
            "n={} p50={:.1}ms p99={:.1}ms max={:.1}ms",
            self.0.len(),
            ms(self.percentile(50)),
            ms(self.percentile(99)),
            ms(self.percentile(100)),
        )
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Prints the three phases' figures (`latency <attack>: …`, shown with
/// `--nocapture`) and asserts that the p99 during and after the attack
/// stays within `max(20 × baseline p99, 1 s)`.
pub fn assert_served(attack: &str, baseline: &Samples, during: &Samples, after: &Samples) {
    let bound = (baseline.percentile(99) * FACTOR).max(FLOOR);
    eprintln!(
        "latency {attack}: baseline {} | during {} | after {} | bound {:.0}ms",
        baseline.describe(),
        during.describe(),
        after.describe(),
        ms(bound)
    );
    for (phase, samples) in [("during", during), ("after", after)] {
        assert!(
            samples.percentile(99) <= bound,
            "{attack}: the others' p99 {phase} the attack is {:.1}ms, over {:.0}ms (baseline p99 {:.1}ms)",
            ms(samples.percentile(99)),
            ms(bound),
            ms(baseline.percentile(99))
        );
    }
}
