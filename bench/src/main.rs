//! `bubble-bench`: a load generator and the benchmark scenarios that pit
//! Bubble against nchan on one machine. See `BENCHMARKS.md`.
//!
//! The generator pins itself to the cores it is given (by default every
//! core but the first) and the server under test to the first core, so both
//! servers are measured alike.

mod clock;
mod cpulimit;
mod ctx;
mod error;
mod history;
mod http;
mod limits;
mod pool;
mod procstat;
mod proto;
mod publisher;
mod results;
mod scenarios;
mod servers;
mod stamp;
mod step;
mod ws;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, ValueEnum};

use crate::ctx::Ctx;
use crate::error::BenchError;
use crate::servers::Store;

/// Paired rounds at most: each takes a step number per server and rate,
/// and step numbers are bytes.
const MAX_PAIRED_ROUNDS: usize = 50;

/// Which scenario to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Scenario {
    /// 1: channel fan-out on Bubble with a saturation search.
    Fanout,
    /// Channel fan-out on nchan alone.
    FanoutNchan,
    /// Fan-out on the floor server alone (one write per frame).
    FanoutFloor,
    /// The fan-out of 2 as thread appends on Bubble's memory store, alone.
    FanoutThreads,
    /// The fan-out of 2 as thread appends on Bubble's SQLite store, alone.
    FanoutThreadsSqlite,
    /// 2: channel fan-out on Bubble and nchan in the same run, and the ratio.
    FanoutVsNchan,
    /// 3: thread fan-out over /v1/ws, HTTP and WS appenders, both stores.
    ThreadFanout,
    /// 4: durable appends on SQLite with many concurrent appenders.
    Appends,
    /// 5: catch-up of a 100,000-event thread from fromSeq=1.
    Catchup,
    /// 6: idle connections and server memory per connection.
    Idle,
    /// 7: thread fan-out while other clients page through long histories
    /// over HTTP, both stores.
    FanoutWithHistory,
    /// 8: three nodes on one PostgreSQL schema and one Redis: durable
    /// appends, append → delivery across nodes, a hot thread; one SQLite
    /// node alongside.
    Cluster,
    /// 9: the fan-out of 1 with Pusher protocol 7 subscribers beside pubb
    /// subscribers: the second wire format's cost per delivery.
    FanoutPusher,
    /// Every scenario in turn (2 includes 1), 2 to 9.
    All,
}

/// Benchmarks for Bubble, side by side with nchan, on loopback.
#[derive(Debug, Parser)]
#[command(version)]
struct Args {
    /// The scenario to run.
    scenario: Scenario,
    /// Tiny, quick runs that only check the code paths (no figures).
    #[arg(long)]
    smoke: bool,
    /// The `bubble` binary (default: target/<profile>/bubble of this workspace).
    #[arg(long)]
    bubble: Option<PathBuf>,
    /// The nchan config template (default: bench/nchan-nginx.conf of this
    /// workspace).
    #[arg(long)]
    nchan_conf: Option<PathBuf>,
    /// Where result files go (default: bench/results).
    #[arg(long)]
    results: Option<PathBuf>,
    /// Seconds per measured step (default 5, smoke 1).
    #[arg(long)]
    step_secs: Option<f64>,
    /// Persistent publisher connections (HTTP keep-alive, pipelined).
    #[arg(long, default_value_t = 16)]
    pub_conns: usize,
    /// HTTP requests in flight per publisher connection (1: no pipelining).
    #[arg(long, default_value_t = 1)]
    pipeline: usize,
    /// Deliveries/s of the channel fan-out's common step, where the
    /// search starts (default 100000).
    #[arg(long)]
    common_rate: Option<f64>,
    /// Microseconds a subscriber worker sleeps on its own timer between
    /// two reads while frames keep coming (0: it blocks in `epoll_wait` as
    /// soon as it has drained, and the server wakes it).
    #[arg(long, default_value_t = 50)]
    sub_coalesce_us: u64,
    /// Start Bubble on every core and move it to the server core once it
    /// listens (it then sizes its runtime for the whole machine).
    #[arg(long)]
    pin_after_start: bool,
    /// Start Bubble with this write delay (its `--write-delay-ms`): frames
    /// queued to a socket wait up to this long to share one send.
    #[arg(long)]
    write_delay_ms: Option<u64>,
    /// Do not pin the server and the generator to separate cores.
    #[arg(long)]
    no_pin: bool,
    /// Hold the fan-out servers to this much CPU (cores, e.g. 0.5) with a
    /// cgroup quota, so that saturation is the server's, not the
    /// generator's (needs a writable cgroup `cpu` controller).
    #[arg(long)]
    server_cpu: Option<f64>,
    /// Fan-out scenarios: measure the fixed-rate steps only (no second
    /// generator, no saturation search).
    #[arg(long)]
    fixed_only: bool,
    /// fanout-vs-nchan: rounds of paired fixed-rate steps, every server
    /// up at once and measured in turn (0: none; smoke runs take one).
    #[arg(long, default_value_t = 3)]
    paired_rounds: usize,
    /// Concurrent history pagers of fanout-with-history.
    #[arg(long, default_value_t = 4)]
    pagers: usize,
    /// History pages/s of fanout-with-history's pagers, all together
    /// (0: as fast as the server answers).
    #[arg(long, default_value_t = 1000.0)]
    page_rate: f64,
    /// PostgreSQL of the cluster scenario; each run uses a fresh schema in
    /// it and drops it afterwards.
    #[arg(
        long,
        default_value = "postgres://postgres:postgres@127.0.0.1:5432/test"
    )]
    postgres: String,
    /// Redis of the cluster scenario; each run uses a fresh key prefix and
    /// deletes its keys afterwards.
    #[arg(long, default_value = "redis://127.0.0.1:6379")]
    redis: String,
}

/// The nchan config template kept in this crate: `bench/nchan-nginx.conf`.
fn default_nchan_conf() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("nchan-nginx.conf")
}

fn context(args: &Args) -> Ctx {
    let bench_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let root = bench_dir
        .parent()
        .map(PathBuf::from)
        .unwrap_or_else(|| bench_dir.clone());
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("target"));
    let cpus = limits::allowed_cpus();
    let (server_core, gen_cpus) = if !args.no_pin && cpus.len() >= 2 {
        (Some(cpus[0]), cpus[1..].to_vec())
    } else {
        (None, cpus.clone())
    };
    if server_core.is_some() {
        if let Err(e) = limits::pin(&gen_cpus) {
            eprintln!("warning: could not pin the generator: {e}");
        }
    }
    Ctx {
        smoke: args.smoke,
        bubble_bin: args
            .bubble
            .clone()
            .unwrap_or_else(|| target.join(profile).join("bubble")),
        nchan_conf: args.nchan_conf.clone().unwrap_or_else(default_nchan_conf),
        results_dir: args
            .results
            .clone()
            .unwrap_or_else(|| bench_dir.join("results")),
        server_core,
        gen_cores: gen_cpus.len().max(1),
        pub_conns: args.pub_conns.max(1),
        pipeline: args.pipeline.max(1),
        common_rate: args.common_rate,
        sub_coalesce: Duration::from_micros(args.sub_coalesce_us),
        server_cpu: args.server_cpu,
        fixed_only: args.fixed_only,
        paired_rounds: if args.smoke {
            args.paired_rounds.min(1)
        } else {
            args.paired_rounds.min(MAX_PAIRED_ROUNDS)
        },
        pin_after_start: args.pin_after_start,
        write_delay_ms: args.write_delay_ms,
        pagers: args.pagers.max(1),
        page_rate: Some(args.page_rate).filter(|r| *r > 0.0),
        step_secs: args.step_secs.unwrap_or(if args.smoke { 1.0 } else { 5.0 }),
        postgres: args.postgres.clone(),
        redis: args.redis.clone(),
    }
}

fn run(scenario: Scenario, ctx: &Ctx) -> Result<(), BenchError> {
    match scenario {
        Scenario::Fanout => scenarios::fanout::scenario_fanout(ctx),
        Scenario::FanoutNchan => scenarios::fanout::scenario_fanout_nchan(ctx),
        Scenario::FanoutFloor => scenarios::fanout::scenario_fanout_floor(ctx),
        Scenario::FanoutThreads => scenarios::fanout::scenario_fanout_threads(ctx, Store::Memory),
        Scenario::FanoutThreadsSqlite => {
            scenarios::fanout::scenario_fanout_threads(ctx, Store::Sqlite)
        }
        Scenario::FanoutVsNchan => scenarios::fanout::scenario_fanout_vs_nchan(ctx),
        Scenario::ThreadFanout => scenarios::thread_fanout::scenario(ctx),
        Scenario::Appends => scenarios::appends::scenario(ctx),
        Scenario::Catchup => scenarios::catchup::scenario(ctx),
        Scenario::Idle => scenarios::idle::scenario(ctx),
        Scenario::FanoutWithHistory => scenarios::fanout_history::scenario(ctx),
        Scenario::Cluster => scenarios::cluster::scenario(ctx),
        Scenario::FanoutPusher => scenarios::fanout_pusher::scenario(ctx),
        Scenario::All => {
            for s in [
                Scenario::FanoutVsNchan,
                Scenario::ThreadFanout,
                Scenario::Appends,
                Scenario::Catchup,
                Scenario::Idle,
                Scenario::FanoutWithHistory,
                Scenario::Cluster,
                Scenario::FanoutPusher,
            ] {
                run(s, ctx)?;
            }
            Ok(())
        }
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    clock::now_ns();
    limits::raise_nofile();
    let ctx = context(&args);
    eprintln!(
        "bubble-bench: server core {:?}, generator cores {}, {} s steps{}",
        ctx.server_core,
        ctx.gen_cores,
        ctx.step_secs,
        if ctx.smoke { ", smoke" } else { "" }
    );
    match run(args.scenario, &ctx) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bubble-bench {:?}: {e}", args.scenario);
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_nchan_conf_is_in_the_tree() {
        let conf = default_nchan_conf();
        let bench_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        assert!(
            conf.starts_with(&bench_dir),
            "{} is outside bench/",
            conf.display()
        );
        let text = std::fs::read_to_string(&conf).expect("read bench/nchan-nginx.conf");
        assert!(
            text.contains("__RUN_DIR__"),
            "the template has no __RUN_DIR__"
        );
        assert!(
            text.contains(&format!("listen {};", servers::NCHAN_ADDR)),
            "the template does not listen on {}",
            servers::NCHAN_ADDR
        );
        assert!(text.contains("location ~ ^/pub/") && text.contains("location ~ ^/sub/"));
    }
}
