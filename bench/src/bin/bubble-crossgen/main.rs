//! `bubble-crossgen`: a second, independently written fan-out load
//! generator, used to cross-check the server CPU per delivery that
//! `bubble-bench` reports for nginx + nchan and for Bubble's channels.
//!
//! A number from one tool can carry that tool's mistakes: a codec that
//! miscounts frames, a stamp that is misparsed, a CPU reading that misses
//! kernel time. So this generator shares no code with `bubble-bench` and
//! differs from it in every part that could bias the result:
//!
//! | part        | bubble-bench                      | bubble-crossgen                                  |
//! |-------------|-----------------------------------|--------------------------------------------------|
//! | I/O         | mio event loops, own threads      | tokio `current_thread` runtime, one OS thread    |
//! | WebSocket   | hand-written codec                | tokio-tungstenite, one task per subscriber       |
//! | publishing  | its own HTTP writer               | N keep-alive tokio `TcpStream`s, pipelined, with a writer and a reader task each |
//! | stamp       | `~SS<16 hex ns>~`                 | `T<decimal µs>;` + `.` padding                   |
//! | server CPU  | utime+stime ticks of `/proc/<pid>/stat` | schedstat ns over all threads, plus the busy share of the server's whole core from `/proc/stat` (softirq and ksoftirqd included), plus utime for the user share |
//! | own CPU     | `/proc/self/stat`                 | `getrusage`                                      |
//!
//! The load is open loop: publishes follow a fixed schedule spread evenly
//! over the channels and round-robin over the connections, never waiting
//! for answers, and latency is receipt time minus *scheduled* send time.
//! `--rates` are deliveries per second; publishes per second are the rate
//! divided by the subscribers per channel.
//!
//! For each rate one JSON line goes to stdout; progress goes to stderr.

mod cli;
mod cpu;
mod publish;
mod response;
mod stamp;
mod subscribe;
mod tally;

use std::process::ExitCode;
use std::rc::Rc;
use std::time::{Duration, Instant};

use clap::Parser;
use serde_json::json;
use tokio::sync::Semaphore;

use crate::cli::Args;
use crate::publish::{Publisher, Requests};
use crate::tally::{Clock, Tally};

/// How long all subscribers may take to become ready.
const READY_TIMEOUT: Duration = Duration::from_secs(120);
/// How long to wait for deliveries after the last scheduled send.
const STRAGGLE: Duration = Duration::from_secs(3);
/// This generator's CPU (it runs on one thread) at or above this share of
/// its core makes a rate's figure invalid: a reader that falls behind
/// acknowledges late, and on a server socket without `TCP_NODELAY` (nchan's
/// subscribers) Nagle's algorithm then holds the writes back and sends them
/// as fewer, larger segments, so the server looks cheaper per delivery than
/// under a client that keeps up. The same share as `bubble-bench`'s
/// `GEN_SATURATED`, kept apart so that the two generators share no code:
/// change both together.
const SATURATED: f64 = 0.95;

/// Pins the calling thread, and every thread it starts later, to `core`.
fn pin_to(core: usize) -> std::io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; the call only reads it.
    let rc = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(core, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Raises the open-files soft limit to the hard limit; returns the new limit.
fn raise_nofile() -> std::io::Result<u64> {
    // SAFETY: getrlimit/setrlimit read and write the struct we pass.
    unsafe {
        let mut lim: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        lim.rlim_cur = lim.rlim_max;
        if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(lim.rlim_cur as u64)
    }
}

/// Everything measured for one rate.
struct Outcome {
    rate: u64,
    publishes: u64,
    expected: u64,
    delivered: u64,
    stale: u64,
    other: u64,
    pub_ok: u64,
    pub_failed: u64,
    p50_ms: Option<f64>,
    p99_ms: Option<f64>,
    usage: cpu::Usage,
    subs_lost: usize,
}

fn round(x: f64, digits: i32) -> f64 {
    let f = 10f64.powi(digits);
    (x * f).round() / f
}

impl Outcome {
    /// µs of CPU per delivery for `cores` busy over the interval.
    fn us_per_delivery(&self, cores: Option<f64>) -> Option<f64> {
        let per_sec = self.delivered as f64 / self.usage.secs;
        cores
            .filter(|_| per_sec > 0.0)
            .map(|c| round(c / per_sec * 1e6, 3))
    }

    /// Whether this generator was the bottleneck (see [`SATURATED`]).
    fn generator_bound(&self) -> bool {
        self.usage.gen_cores >= SATURATED
    }

    fn json(&self, args: &Args) -> serde_json::Value {
        let r4 = |x: Option<f64>| x.map(|v| round(v, 4));
        let ratio = if self.expected > 0 {
            self.delivered as f64 / self.expected as f64
        } else {
            0.0
        };
        json!({
            "generator": "crossgen",
            "proto": args.proto.name(),
            "rate": self.rate,
            "expected": self.expected,
            "delivered": self.delivered,
            "ratio": round(ratio, 5),
            "p50_ms": r4(self.p50_ms),
            "p99_ms": r4(self.p99_ms),
            "server_cores_schedstat": r4(self.usage.schedstat_cores),
            "server_core_busy": r4(self.usage.core_busy),
            "server_user_cores": r4(self.usage.user_cores),
            "gen_cores": round(self.usage.gen_cores, 4),
            "generator_bound": self.generator_bound(),
            "valid": !self.generator_bound(),
            "us_per_delivery_schedstat": self.us_per_delivery(self.usage.schedstat_cores),
            "us_per_delivery_core": self.us_per_delivery(self.usage.core_busy),
            "us_per_delivery_user": self.us_per_delivery(self.usage.user_cores),
            "interval_secs": round(self.usage.secs, 4),
            "publishes": self.publishes,
            "pub_ok": self.pub_ok,
            "pub_failed": self.pub_failed,
            "stale": self.stale,
            "other_frames": self.other,
            "subs": args.subs,
            "subs_lost": self.subs_lost,
            "channels": args.channels,
            "payload": args.payload,
        })
    }
}

/// The shared pieces of a run.
struct Rig {
    args: Args,
    clock: Clock,
    tally: Rc<Tally>,
    publisher: Publisher,
}

impl Rig {
    /// Sends at `rate` deliveries/s for `secs`, measuring server CPU over
    /// the sending interval, then waits for stragglers.
    async fn phase(&self, rate: u64, secs: f64) -> Outcome {
        let args = &self.args;
        let per_channel = args.subs_per_channel();
        let pub_per_sec = rate as f64 * args.channels as f64 / args.subs as f64;
        let count = ((pub_per_sec * secs).round() as u64).max(1);
        let start = Instant::now() + Duration::from_millis(20);
        // The interval holds exactly `count` publish slots.
        let end = start + Duration::from_secs_f64(count as f64 / pub_per_sec);
        self.publisher.stats().reset();
        self.tally.begin_phase(self.clock.us_at(start));
        let (_, lost_before, _) = self.tally.subscribers();
        tokio::time::sleep_until(start.into()).await;
        let before = cpu::snapshot(&args.server_pids, args.server_core);
        let sent = self
            .publisher
            .schedule(self.clock, start, pub_per_sec, count)
            .await;
        tokio::time::sleep_until(end.into()).await;
        let after = cpu::snapshot(&args.server_pids, args.server_core);
        let expected: u64 = sent
            .per_channel
            .iter()
            .zip(&per_channel)
            .map(|(p, s)| p * s)
            .sum();
        let stats = self.publisher.stats();
        let deadline = sent.last + STRAGGLE;
        while Instant::now() < deadline
            && (self.tally.delivered() < expected || stats.ok() + stats.failed() < count)
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Outcome {
            rate,
            publishes: count,
            expected,
            delivered: self.tally.delivered(),
            stale: self.tally.stale(),
            other: self.tally.other(),
            pub_ok: stats.ok(),
            pub_failed: stats.failed(),
            p50_ms: self.tally.latency_ms(0.5),
            p99_ms: self.tally.latency_ms(0.99),
            usage: cpu::between(&before, &after),
            subs_lost: self.tally.subscribers().2.saturating_sub(lost_before),
        }
    }
}

/// Starts every subscriber and waits until all are ready.
async fn connect_all(args: &Args, tally: &Rc<Tally>) -> Result<(), String> {
    let gate = Rc::new(Semaphore::new(args.connect_concurrency));
    for s in 0..args.subs {
        let sub = subscribe::Sub {
            addr: args.addr,
            proto: args.proto,
            channel: args.channel(s % args.channels),
        };
        tokio::task::spawn_local(subscribe::run(sub, tally.clone(), gate.clone()));
    }
    let began = Instant::now();
    let mut last_note = began;
    loop {
        let (ready, failed, _) = tally.subscribers();
        if failed > 0 {
            return Err(format!("{failed} subscribers failed to connect"));
        }
        if ready == args.subs {
            eprintln!(
                "crossgen: {ready} subscribers ready in {:.2}s",
                began.elapsed().as_secs_f64()
            );
            return Ok(());
        }
        if began.elapsed() > READY_TIMEOUT {
            return Err(format!("only {ready}/{} subscribers ready", args.subs));
        }
        if last_note.elapsed() > Duration::from_secs(2) {
            eprintln!("crossgen: {ready}/{} subscribers ready", args.subs);
            last_note = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn run(args: Args) -> Result<(), String> {
    let clock = Clock::start();
    let tally = Rc::new(Tally::new(clock));
    connect_all(&args, &tally).await?;
    let requests = Requests {
        addr: args.addr,
        proto: args.proto,
        payload: args.payload,
    };
    let channels = (0..args.channels).map(|c| args.channel(c)).collect();
    let publisher = Publisher::open(requests, channels, args.pub_conns)
        .await
        .map_err(|e| format!("open publish connections: {e}"))?;
    let rig = Rig {
        args,
        clock,
        tally,
        publisher,
    };

    let warm = (rig.args.rates[0] / 10).max(1);
    eprintln!("crossgen: warm-up at {warm} deliveries/s for 1s");
    let w = rig.phase(warm, 1.0).await;
    eprintln!(
        "crossgen: warm-up delivered {}/{} (p50 {:?} ms)",
        w.delivered, w.expected, w.p50_ms
    );

    for &rate in &rig.args.rates {
        eprintln!(
            "crossgen: {rate} deliveries/s for {}s ({} subscribers on {} channels)",
            rig.args.secs, rig.args.subs, rig.args.channels
        );
        let out = rig.phase(rate, rig.args.secs).await;
        if out.pub_failed > 0 || rig.publisher.stats().broken() > 0 {
            eprintln!(
                "crossgen: {} publishes failed, {} connections broken",
                out.pub_failed,
                rig.publisher.stats().broken()
            );
        }
        if out.generator_bound() {
            eprintln!(
                "crossgen: this generator used {:.2} of its core: the figure at {rate}/s is invalid",
                out.usage.gen_cores
            );
        }
        if let (Some(core), Some(threads)) = (out.usage.core_busy, out.usage.schedstat_cores) {
            // Softirq work accounts for some gap; a large one means other
            // processes share the server's core.
            if core > threads + 0.25 {
                eprintln!(
                    "crossgen: core busy {core:.2} but server threads {threads:.2}: \
                     other work shares the server core, so us_per_delivery_core overstates"
                );
            }
        }
        println!("{}", out.json(&rig.args));
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    if let Err(e) = args.validate() {
        eprintln!("crossgen: {e}");
        return ExitCode::from(2);
    }
    if let Some(core) = args.pin_core {
        if let Err(e) = pin_to(core) {
            eprintln!("crossgen: pin to core {core}: {e}");
            return ExitCode::FAILURE;
        }
    }
    match raise_nofile() {
        Ok(n) if (n as usize) < args.subs + args.pub_conns + 64 => {
            eprintln!("crossgen: warning: open-files limit {n} is below what the run needs");
        }
        Ok(_) => {}
        Err(e) => eprintln!("crossgen: warning: raise open-files limit: {e}"),
    }
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("crossgen: tokio runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let local = tokio::task::LocalSet::new();
    match local.block_on(&rt, run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("crossgen: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(gen_cores: f64) -> Outcome {
        Outcome {
            rate: 100_000,
            publishes: 5_000,
            expected: 500_000,
            delivered: 500_000,
            stale: 0,
            other: 0,
            pub_ok: 5_000,
            pub_failed: 0,
            p50_ms: Some(1.0),
            p99_ms: Some(2.0),
            usage: cpu::Usage {
                secs: 5.0,
                schedstat_cores: Some(0.5),
                core_busy: Some(0.5),
                user_cores: Some(0.1),
                gen_cores,
            },
            subs_lost: 0,
        }
    }

    #[test]
    fn a_saturated_generator_marks_its_figure_invalid() {
        let args = Args::parse_from(["x", "--addr", "127.0.0.1:1", "--proto", "nchan"]);
        let busy = outcome(0.98).json(&args);
        assert_eq!(busy["generator_bound"], true);
        assert_eq!(busy["valid"], false);
        let idle = outcome(0.6).json(&args);
        assert_eq!(idle["generator_bound"], false);
        assert_eq!(idle["valid"], true);
        assert_eq!(idle["us_per_delivery_schedstat"], 5.0);
    }
}
