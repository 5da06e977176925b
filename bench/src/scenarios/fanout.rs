//! Scenarios 1 and 2: fan-out at fixed rates and to saturation, on Bubble
//! (channels, and threads on both stores), on nchan, and on the floor (the
//! least any server can do), all in the same run, each cross-checked by the
//! second load generator (`bubble-crossgen`) where it speaks the protocol.

use serde::Serialize;
use serde_json::{json, Value};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::ctx::Ctx;
use crate::error::BenchError;
use crate::pool::{ConnSpec, Pool};
use crate::proto;
use crate::publisher::{Plan, Target, Transport};
use crate::scenarios::{kps, ms, paired, HTTP_APPENDERS};
use crate::servers::{self, FloorMode, Server, Store};
use crate::step::{self, StepEnv, StepResult};

/// Subscribers of a thread fan-out start live (`fromSeq` far beyond the head).
const LIVE_ONLY: u64 = 1 << 40;

/// p99 of the deliveries a sustainable fan-out step stays within, ms.
pub(super) const P99_BOUND_MS: f64 = 50.0;

/// What the subscribers and the publisher speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Load {
    /// nchan's websocket subscribers and `POST /pub/<channel>` (nchan and
    /// the floor server).
    Nchan,
    /// Bubble's channels: `/socket` subscribers, `POST /api/apps/…/events`.
    Pubb,
    /// Bubble's channels over Pusher protocol 7: `/app/:key` subscribers,
    /// the same publications (`POST /api/apps/…/events`).
    Pusher,
    /// Bubble's threads: `/v1/ws` subscribers, `POST /v1/threads/…/events`.
    Threads,
}

impl Load {
    /// The protocol name `bubble-crossgen` knows this load by.
    pub(super) fn crossgen_proto(self) -> Option<&'static str> {
        match self {
            Load::Nchan => Some("nchan"),
            Load::Pubb => Some("pubb"),
            Load::Pusher | Load::Threads => None,
        }
    }
}

/// Shape of the fan-out load.
#[derive(Debug, Clone, Serialize)]
pub struct FanoutShape {
    /// Subscribers.
    pub subs: usize,
    /// Channels (subscriber `i` is on channel `i % channels`).
    pub channels: usize,
    /// Payload bytes.
    pub payload: usize,
    /// One subscriber in this many records latency, as many on each
    /// channel.
    pub sample_every: usize,
    /// Deliveries/s of the fixed-rate steps, the headline.
    pub fixed_rates: Vec<f64>,
    /// Growth factor of the saturation search.
    pub factor: f64,
    /// Growth steps at most.
    pub growth_steps: usize,
    /// Bubble's write delay (`--write-delay-ms`), when one was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bubble_write_delay_ms: Option<u64>,
}

impl FanoutShape {
    /// 1,000 subscribers on 10 channels, 64-byte payloads, fixed steps at
    /// 20k, 40k and 100k deliveries/s (or a tiny shape for smoke runs);
    /// `--common-rate` replaces the fixed rates with one.
    pub fn for_ctx(ctx: &Ctx) -> Self {
        let mut shape = Self::default_for(ctx);
        shape.bubble_write_delay_ms = ctx.write_delay_ms;
        if let Some(r) = ctx.common_rate {
            shape.fixed_rates = vec![r];
        }
        shape
    }

    fn default_for(ctx: &Ctx) -> Self {
        if ctx.smoke {
            FanoutShape {
                subs: 40,
                channels: 4,
                payload: 64,
                sample_every: 2,
                fixed_rates: vec![1_000.0, 2_000.0],
                factor: 2.0,
                growth_steps: 2,
                bubble_write_delay_ms: None,
            }
        } else {
            FanoutShape {
                subs: 1000,
                channels: 10,
                payload: 64,
                sample_every: 10,
                fixed_rates: vec![20_000.0, 40_000.0, 100_000.0],
                factor: 1.5,
                growth_steps: 10,
                bubble_write_delay_ms: None,
            }
        }
    }
}

/// What a fan-out run against one server measured.
#[derive(Debug, Clone, Serialize)]
pub struct FanoutRun {
    /// What ran: `bubble-pubb`, `bubble-threads-memory`, `nchan`, `floor-write`…
    pub server: String,
    /// What was spoken.
    pub load: Load,
    /// The fixed-rate steps, in the order of `FanoutShape::fixed_rates`.
    pub fixed: Vec<StepResult>,
    /// The saturation searches, one per publisher width.
    pub searches: Vec<Search>,
    /// Max sustainable deliveries/s: the best search's (without a quota,
    /// the fixed steps count too).
    pub max_deliveries: f64,
    /// The best search ended on a generator-bound step: the server may do
    /// more.
    pub generator_bound: bool,
    /// Server RSS after the run, KiB.
    pub server_rss_kib: u64,
    /// The second generator's records at the fixed rates, on the same
    /// server process (empty when it does not speak the load).
    pub crosscheck: Vec<Value>,
}

impl FanoutRun {
    /// The one-line summary.
    pub fn line(&self) -> String {
        let fixed: Vec<String> = self
            .fixed
            .iter()
            .map(|s| {
                format!(
                    "{} {:.2} us/delivery (+ksoftirqd {:.2}) p99 {}",
                    kps(s.target_rate),
                    s.us_per_item,
                    s.with_softirq_us_per_item,
                    ms(s.p99_ms)
                )
            })
            .collect();
        let searches: Vec<String> = self
            .searches
            .iter()
            .map(|s| format!("{} with {} publishers", kps(s.max_deliveries), s.publishers))
            .collect();
        format!(
            "fanout {}: {}; max {}{} deliveries/s ({})",
            self.server,
            fixed.join("; "),
            kps(self.max_deliveries),
            if self.generator_bound {
                " (generator-bound, server may do more)"
            } else {
                ""
            },
            searches.join(", "),
        )
    }
}

/// One saturation search, at one publisher width.
#[derive(Debug, Clone, Serialize)]
pub struct Search {
    /// Publisher connections, one request in flight each.
    pub publishers: usize,
    /// The search's steps.
    pub steps: Vec<StepResult>,
    /// Max sustainable deliveries/s among them.
    pub max_deliveries: f64,
    /// The search ended on a generator-bound step.
    pub generator_bound: bool,
}

/// The publisher widths of the saturation searches: `--pub-conns` (16 by
/// default, the fixed steps' width for channels) and the thread scenarios'
/// appenders (64, their fixed steps' width). Every server is searched at
/// both and its maximum is its best of the two: few publishers bound how
/// many publications share a server's turn, and a server that batches them
/// (Bubble) gains from more, while one that does not (nchan) can lose, so a
/// single width would favour one side.
fn search_widths(ctx: &Ctx) -> Vec<usize> {
    let mut widths = vec![ctx.pub_conns];
    if !ctx.smoke && ctx.pub_conns != HTTP_APPENDERS {
        widths.push(HTTP_APPENDERS);
    }
    widths
}

/// The subscribers and publish targets of `load` on `server`.
fn wire(
    server: &Server,
    shape: &FanoutShape,
    load: Load,
) -> Result<(Vec<ConnSpec>, Vec<Target>), BenchError> {
    let per_channel = (shape.subs / shape.channels).max(1);
    let subs = per_channel * shape.channels;
    let tag = format!(
        "b{}x{}",
        std::process::id(),
        crate::clock::now_ns() % 1_000_000
    );
    let channels: Vec<String> = (0..shape.channels).map(|k| format!("{tag}c{k}")).collect();
    if load == Load::Threads {
        for id in &channels {
            proto::create_thread(server.addr, id)?;
        }
    }
    let specs = (0..subs)
        .map(|i| {
            let ch = &channels[i % shape.channels];
            let sample = super::sampled(i, shape.channels, shape.sample_every);
            match load {
                Load::Nchan => proto::nchan_subscriber(server.addr, ch, sample),
                Load::Pubb => proto::pubb_subscriber(server.addr, ch, sample),
                Load::Pusher => proto::pusher_subscriber(server.addr, ch, sample),
                Load::Threads => proto::thread_subscriber(
                    server.addr,
                    std::slice::from_ref(ch),
                    LIVE_ONLY,
                    sample,
                ),
            }
        })
        .collect();
    let targets = channels
        .iter()
        .map(|ch| match load {
            Load::Nchan => proto::nchan_publish(server.addr, ch, shape.payload),
            Load::Pubb | Load::Pusher => proto::pubb_publish(server.addr, ch, shape.payload),
            Load::Threads => proto::http_append(server.addr, ch, shape.payload),
        })
        .collect();
    Ok((specs, targets))
}

/// A server wired for a fan-out load: its subscribers connected, its
/// publish targets ready.
pub(super) struct Rig<'a> {
    server: &'a Server,
    /// The server's name in results: `bubble-pubb`, `nchan`…
    pub(super) label: String,
    pool: Pool,
    targets: Vec<Target>,
    /// Subscribers per channel: deliveries per publication.
    fanout: u64,
    /// Publisher connections of the fixed-rate steps.
    publishers: usize,
    /// Deliveries/s of the warm-up: the first fixed rate.
    warm_rate: f64,
}

impl<'a> Rig<'a> {
    /// Connects `shape`'s subscribers of `load` to `server` and waits until
    /// every one is subscribed.
    pub(super) fn wire(
        ctx: &Ctx,
        server: &'a Server,
        shape: &FanoutShape,
        load: Load,
        label: &str,
    ) -> Result<Rig<'a>, BenchError> {
        let (specs, targets) = wire(server, shape, load)?;
        let pool = Pool::start(specs, ctx.workers(), 128, ctx.sub_coalesce)?;
        pool.wait_ready(Duration::from_secs(120))?;
        let publishers = if load == Load::Threads && !ctx.smoke {
            HTTP_APPENDERS
        } else {
            ctx.pub_conns
        };
        Ok(Rig {
            server,
            label: label.to_string(),
            pool,
            targets,
            fanout: (shape.subs / shape.channels).max(1) as u64,
            publishers,
            warm_rate: shape.fixed_rates.first().copied().unwrap_or(1_000.0),
        })
    }

    fn plan(&self, ctx: &Ctx, publishers: usize, step: u8, deliveries: f64) -> Plan {
        let mut plan = ctx.plan(
            self.server.addr,
            Transport::Http,
            self.targets.clone(),
            deliveries / self.fanout as f64,
            step,
        );
        plan.conns = publishers;
        plan
    }

    /// Step 0: warms both sides up at the first fixed rate for two
    /// seconds, not reported: the set-up's last work (socket buffers
    /// growing, first allocations) lands in it rather than in the first
    /// measured step.
    pub(super) fn warm(&self, ctx: &Ctx) -> Result<(), BenchError> {
        let mut warm = self.plan(ctx, self.publishers, 0, self.warm_rate);
        warm.duration = Duration::from_secs(2);
        crate::publisher::run(&warm)?;
        std::thread::sleep(Duration::from_millis(300));
        Ok(())
    }

    /// One measured step at `deliveries`/s with `publishers` connections
    /// (`None`: the fixed steps' width).
    pub(super) fn step(
        &self,
        ctx: &Ctx,
        publishers: Option<usize>,
        step: u8,
        deliveries: f64,
    ) -> Result<StepResult, BenchError> {
        let publishers = publishers.unwrap_or(self.publishers);
        let env = StepEnv {
            servers: std::slice::from_ref(self.server),
            server_core: ctx.server_core,
            gen_cores: ctx.gen_cores,
            p99_bound_ms: P99_BOUND_MS,
        };
        let plan = self.plan(ctx, publishers, step, deliveries);
        let r = step::delivery_step(&env, &self.pool, std::slice::from_ref(&plan), self.fanout)?;
        eprintln!(
            "  {} step {step} ({publishers} publishers): {}",
            self.label,
            r.line()
        );
        if let Some(e) = &r.first_error {
            eprintln!("  {} first error: {e}", self.label);
        }
        Ok(r)
    }

    /// Disconnects the subscribers; an error when none got anything.
    pub(super) fn stop(self) -> Result<(), BenchError> {
        let stats = self.pool.stop();
        if stats.delivered.iter().sum::<u64>() == 0 {
            return Err(BenchError::Check(format!(
                "{}: no delivery reached any subscriber",
                self.label
            )));
        }
        Ok(())
    }
}

/// Runs the fan-out load `load` against `server`, labelled `label`: the
/// fixed-rate steps, the second generator at the same rates, then (under
/// `--server-cpu`'s quota, if given) the saturation search.
pub fn measure(
    ctx: &Ctx,
    server: &Server,
    shape: &FanoutShape,
    load: Load,
    label: &str,
) -> Result<FanoutRun, BenchError> {
    let rig = Rig::wire(ctx, server, shape, load, label)?;
    let last = shape.fixed_rates.last().copied().unwrap_or(rig.warm_rate);
    rig.warm(ctx)?;
    let mut fixed = Vec::new();
    for (i, &rate) in shape.fixed_rates.iter().enumerate() {
        fixed.push(rig.step(ctx, None, i as u8 + 1, rate)?);
    }
    // The second generator at the same rates, on the same process, before
    // any quota (the bench pool's subscribers stay connected and idle: the
    // second generator publishes on channels of its own).
    let crosscheck = match load.crossgen_proto() {
        Some(proto) if !ctx.fixed_only => {
            crosscheck(ctx, server, shape, proto, &shape.fixed_rates)?
        }
        _ => Vec::new(),
    };
    if let Some(cores) = ctx.server_cpu {
        server.limit_cpu(cores)?;
    }
    let mut searches = Vec::new();
    let mut next_step = shape.fixed_rates.len() as u8 + 1;
    let widths = if ctx.fixed_only {
        Vec::new()
    } else {
        search_widths(ctx)
    };
    for publishers in widths {
        let steps = step::search(
            last * shape.factor,
            shape.factor,
            shape.growth_steps,
            next_step,
            |step, rate| rig.step(ctx, Some(publishers), step, rate),
        )?;
        next_step = steps.last().map_or(next_step, |s| s.step + 1);
        searches.push(Search {
            publishers,
            max_deliveries: step::max_sustainable(&steps),
            generator_bound: steps.last().is_some_and(|s| s.generator_bound),
            steps,
        });
    }
    rig.stop()?;
    let best = searches
        .iter()
        .max_by(|a, b| a.max_deliveries.total_cmp(&b.max_deliveries));
    let generator_bound = best.is_some_and(|s| s.generator_bound);
    let searched = best.map_or(0.0, |s| s.max_deliveries);
    // Under a quota only the searches ran at the quota; without one, a
    // search whose every step missed leaves the fixed steps' best.
    let max_deliveries = if ctx.server_cpu.is_some() {
        searched
    } else {
        searched.max(step::max_sustainable(&fixed))
    };
    Ok(FanoutRun {
        server: label.to_string(),
        load,
        fixed,
        max_deliveries,
        generator_bound,
        searches,
        server_rss_kib: server.rss_kib(),
        crosscheck,
    })
}

/// Drives `server` at `rates` with `bubble-crossgen` (the binary next to
/// this one) and returns its records.
pub(super) fn crosscheck(
    ctx: &Ctx,
    server: &Server,
    shape: &FanoutShape,
    proto: &str,
    rates: &[f64],
) -> Result<Vec<Value>, BenchError> {
    let bin = std::env::current_exe()
        .map_err(|e| BenchError::Check(format!("locate bubble-bench: {e}")))?
        .with_file_name("bubble-crossgen");
    let rates: Vec<String> = rates.iter().map(|r| format!("{r:.0}")).collect();
    let mut cmd = Command::new(&bin);
    cmd.arg("--addr")
        .arg(server.addr.to_string())
        .args(["--proto", proto])
        .args(["--subs", &shape.subs.to_string()])
        .args(["--channels", &shape.channels.to_string()])
        .args(["--payload", &shape.payload.to_string()])
        .args(["--rates", &rates.join(",")])
        .args(["--secs", &format!("{}", ctx.step_secs)])
        .args(["--pub-conns", &ctx.pub_conns.to_string()]);
    for pid in server.pids() {
        cmd.args(["--server-pid", &pid.to_string()]);
    }
    if let Some(core) = ctx.server_core {
        cmd.args(["--server-core", &core.to_string()]);
    }
    let out = cmd
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| BenchError::Check(format!("run {}: {e}", bin.display())))?;
    if !out.status.success() {
        return Err(BenchError::Check(format!(
            "bubble-crossgen against {} exited with {}",
            server.name, out.status
        )));
    }
    let records: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    for r in &records {
        let validity = if r["valid"].as_bool() == Some(false) {
            format!(
                " INVALID (crossgen used {:.2} of its core)",
                r["gen_cores"].as_f64().unwrap_or(0.0)
            )
        } else {
            String::new()
        };
        eprintln!(
            "  {} crossgen: rate {} ratio {} server {:.2} us/delivery (schedstat), core {:.2} us{validity}",
            server.name,
            r["rate"],
            r["ratio"],
            r["us_per_delivery_schedstat"].as_f64().unwrap_or(0.0),
            r["us_per_delivery_core"].as_f64().unwrap_or(0.0),
        );
    }
    Ok(records)
}

/// `e`, with the tail of `server`'s log when it has one.
pub(super) fn with_log(e: BenchError, server: &Server) -> BenchError {
    let tail = server.log_tail();
    if tail.is_empty() {
        e
    } else {
        BenchError::Check(format!("{e}\n{} log:\n{tail}", server.name))
    }
}

/// One server of the comparison, started fresh.
#[derive(Debug, Clone, Copy)]
pub(super) enum Contender {
    BubblePubb,
    BubbleThreads(Store<'static>),
    /// nchan, labelled with this name (measured first and again last).
    Nchan(&'static str),
    Floor(FloorMode),
}

/// Starts `who`: the server, the load it is driven with, its label.
pub(super) fn start(ctx: &Ctx, who: Contender) -> Result<(Server, Load, String), BenchError> {
    Ok(match who {
        Contender::BubblePubb => (
            ctx.start_bubble(Store::Memory)?,
            Load::Pubb,
            with_delay("bubble-pubb".to_string(), ctx),
        ),
        Contender::BubbleThreads(store) => (
            ctx.start_bubble(store)?,
            Load::Threads,
            with_delay(format!("bubble-threads-{}", store.name()), ctx),
        ),
        Contender::Nchan(label) => (
            servers::start_nchan(&ctx.nchan_conf, ctx.server_core)?,
            Load::Nchan,
            label.to_string(),
        ),
        Contender::Floor(mode) => {
            let server = servers::start_floor(mode, ctx.server_core)?;
            let label = server.name.to_string();
            (server, Load::Nchan, label)
        }
    })
}

/// Bubble's label, naming its write delay when it has one.
fn with_delay(label: String, ctx: &Ctx) -> String {
    match ctx.write_delay_ms {
        Some(ms) => format!("{label}-delay{ms}ms"),
        None => label,
    }
}

fn run(ctx: &Ctx, shape: &FanoutShape, who: Contender) -> Result<FanoutRun, BenchError> {
    let (server, load, label) = start(ctx, who)?;
    let run = measure(ctx, &server, shape, load, &label).map_err(|e| with_log(e, &server))?;
    println!("{}", run.line());
    Ok(run)
}

/// Runs one contender alone and records it under `key` in `scenario`'s
/// results.
fn alone(ctx: &Ctx, who: Contender, scenario: &str, key: &str) -> Result<(), BenchError> {
    let shape = FanoutShape::for_ctx(ctx);
    let run = run(ctx, &shape, who)?;
    crate::results::append(
        &ctx.results_dir,
        scenario,
        json!({ "shape": shape, key: run }),
    )?;
    Ok(())
}

/// Scenario 1: channel fan-out on Bubble.
pub fn scenario_fanout(ctx: &Ctx) -> Result<(), BenchError> {
    alone(ctx, Contender::BubblePubb, "fanout", "bubble")
}

/// Thread fan-out (the headline's shape, as appends) on Bubble's `store`
/// alone.
pub fn scenario_fanout_threads(ctx: &Ctx, store: Store<'static>) -> Result<(), BenchError> {
    let scenario = format!("fanout-threads-{}", store.name());
    alone(ctx, Contender::BubbleThreads(store), &scenario, "bubble")
}

/// Channel fan-out on nchan alone.
pub fn scenario_fanout_nchan(ctx: &Ctx) -> Result<(), BenchError> {
    alone(ctx, Contender::Nchan("nchan"), "fanout-nchan", "nchan")
}

/// Fan-out on the floor server alone, in each of its modes.
pub fn scenario_fanout_floor(ctx: &Ctx) -> Result<(), BenchError> {
    let shape = FanoutShape::for_ctx(ctx);
    let runs = [FloorMode::Write, FloorMode::Writev, FloorMode::Uring]
        .into_iter()
        .map(|mode| run(ctx, &shape, Contender::Floor(mode)))
        .collect::<Result<Vec<_>, _>>()?;
    crate::results::append(
        &ctx.results_dir,
        "fanout-floor",
        json!({ "shape": shape, "runs": runs }),
    )?;
    Ok(())
}

/// `a / b`, or 0 when `b` is 0.
fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}

/// The mean of two figures (either alone when the other is 0).
fn mean(a: f64, b: f64) -> f64 {
    match (a > 0.0, b > 0.0) {
        (true, true) => (a + b) / 2.0,
        (true, false) => a,
        _ => b,
    }
}

/// nchan's figure `f` at a fixed step, from its measurements first and
/// last in the run: the mean of those it sustained (a saturated server's
/// cost per delivery is not a fixed rate's), of both when it sustained
/// neither; and whether it sustained one.
fn peer_at(steps: [Option<&StepResult>; 2], f: fn(&StepResult) -> f64) -> (f64, bool) {
    let sustained = steps.map(|s| s.filter(|s| s.sustainable));
    let any = sustained.iter().any(Option::is_some);
    let [a, b] = if any { sustained } else { steps };
    (mean(a.map_or(0.0, f), b.map_or(0.0, f)), any)
}

/// Scenario 2, the headline: the same fan-out on Bubble (channels; threads
/// on memory and SQLite), nchan and the floor, at fixed rates and to
/// saturation, with the ratios per delivery. nchan is measured first and
/// again last, and Bubble is compared with the mean of the two, so that a
/// machine that drifts during the run does not favour either side.
pub fn scenario_fanout_vs_nchan(ctx: &Ctx) -> Result<(), BenchError> {
    let shape = FanoutShape::for_ctx(ctx);
    let contenders = [
        Contender::Nchan("nchan"),
        Contender::BubblePubb,
        Contender::BubbleThreads(Store::Memory),
        Contender::BubbleThreads(Store::Sqlite),
        Contender::Floor(FloorMode::Write),
        Contender::Floor(FloorMode::Writev),
        Contender::Nchan("nchan-again"),
    ];
    let runs = contenders
        .iter()
        .map(|&who| run(ctx, &shape, who))
        .collect::<Result<Vec<_>, _>>()?;
    let (first, last) = (&runs[0], &runs[6]);
    let floor = &runs[4];
    let nchan_at =
        |i: usize, f: fn(&StepResult) -> f64| peer_at([first.fixed.get(i), last.fixed.get(i)], f);
    let nchan_max = mean(first.max_deliveries, last.max_deliveries);
    let mut ratios = Vec::new();
    for r in &runs[1..4] {
        for (i, s) in r.fixed.iter().enumerate() {
            let Some(f) = floor.fixed.get(i) else {
                continue;
            };
            let (nchan_us, nchan_sustained) = nchan_at(i, |s| s.us_per_item);
            let line = json!({
                "server": r.server,
                "rate": s.target_rate,
                "cpu_vs_nchan": ratio(s.us_per_item, nchan_us),
                "with_softirq_vs_nchan": ratio(
                    s.with_softirq_us_per_item,
                    nchan_at(i, |s| s.with_softirq_us_per_item).0
                ),
                "cpu_vs_floor": ratio(s.us_per_item, f.us_per_item),
                "nchan_sustained": nchan_sustained,
                "sustained": s.sustainable,
            });
            println!(
                "{} at {}: cpu/delivery {:.2}x nchan ({:.2}x with ksoftirqd), {:.2}x the floor{}",
                r.server,
                kps(s.target_rate),
                line["cpu_vs_nchan"].as_f64().unwrap_or(0.0),
                line["with_softirq_vs_nchan"].as_f64().unwrap_or(0.0),
                line["cpu_vs_floor"].as_f64().unwrap_or(0.0),
                match (nchan_sustained, s.sustainable) {
                    (true, true) => "",
                    (false, _) => " (nchan did not sustain this rate: not a fixed-rate comparison)",
                    (true, false) => " (not sustained at this rate: not a fixed-rate comparison)",
                },
            );
            ratios.push(line);
        }
        println!(
            "{} max sustainable {:.2}x nchan",
            r.server,
            ratio(r.max_deliveries, nchan_max)
        );
    }
    let paired = if ctx.paired_rounds > 0 {
        let readings = paired::readings(ctx, &shape, &contenders[..6], ctx.paired_rounds)?;
        let (nchan, pubb) = (runs[0].server.as_str(), runs[1].server.as_str());
        let (nchan_x, pubb_x) = (paired::crossgen_label(nchan), paired::crossgen_label(pubb));
        let mut pairs: Vec<(&str, &str)> = runs[1..4]
            .iter()
            .flat_map(|r| {
                [
                    (r.server.as_str(), nchan),
                    (r.server.as_str(), floor.server.as_str()),
                ]
            })
            .collect();
        // The floor against nchan (how far the peer is from the floor on
        // this machine), and SQLite against memory.
        pairs.extend(runs[4..6].iter().map(|f| (f.server.as_str(), nchan)));
        pairs.push((runs[3].server.as_str(), runs[2].server.as_str()));
        // The generators on the same server, then Bubble against nchan
        // under the second generator alone.
        pairs.extend([
            (nchan_x.as_str(), nchan),
            (pubb_x.as_str(), pubb),
            (pubb_x.as_str(), nchan_x.as_str()),
        ]);
        let summary = paired::summary(&readings, &shape, &pairs);
        json!({ "rounds": ctx.paired_rounds, "summary": summary, "readings": readings })
    } else {
        Value::Null
    };
    crate::results::append(
        &ctx.results_dir,
        "fanout-vs-nchan",
        json!({ "shape": shape, "runs": runs, "ratios": ratios, "paired": paired }),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::step::tests::outcome;

    fn costing(us_per_item: f64, sustainable: bool) -> StepResult {
        StepResult {
            us_per_item,
            ..outcome(1, 20_000.0, sustainable)
        }
    }

    #[test]
    fn the_peer_counts_the_rates_it_sustained() {
        let (held, saturated) = (costing(8.0, true), costing(20.0, false));
        let us = |s: &StepResult| s.us_per_item;
        assert_eq!(peer_at([Some(&held), Some(&saturated)], us), (8.0, true));
        assert_eq!(peer_at([Some(&saturated), Some(&held)], us), (8.0, true));
        let again = costing(10.0, true);
        assert_eq!(peer_at([Some(&held), Some(&again)], us), (9.0, true));
        let worse = costing(30.0, false);
        assert_eq!(peer_at([Some(&saturated), Some(&worse)], us), (25.0, false));
        assert_eq!(peer_at([Some(&held), None], us), (8.0, true));
    }
}
