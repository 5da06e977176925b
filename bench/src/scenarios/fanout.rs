//! Scenarios 1 and 2: channel fan-out on Bubble, and the same load on
//! nchan in the same run.

use serde::Serialize;
use serde_json::json;
use std::time::Duration;

use crate::ctx::Ctx;
use crate::error::BenchError;
use crate::pool::{ConnSpec, Pool};
use crate::proto;
use crate::publisher::{Target, Transport};
use crate::scenarios::{kps, ms};
use crate::servers::{self, Server, Store};
use crate::step::{self, StepEnv, StepResult};

/// Shape of the fan-out load.
#[derive(Debug, Clone, Serialize)]
pub struct FanoutShape {
    /// Subscribers.
    pub subs: usize,
    /// Channels (subscriber `i` is on channel `i % channels`).
    pub channels: usize,
    /// Payload bytes.
    pub payload: usize,
    /// One subscriber in this many records latency.
    pub sample_every: usize,
    /// Deliveries/s of the common step where percentiles are compared.
    pub common_rate: f64,
    /// Growth factor of the saturation search.
    pub factor: f64,
    /// Growth steps at most.
    pub growth_steps: usize,
}

impl FanoutShape {
    /// The shape of issue 5 (or a tiny one for smoke runs).
    pub fn for_ctx(ctx: &Ctx) -> Self {
        let mut shape = Self::default_for(ctx);
        if let Some(r) = ctx.common_rate {
            shape.common_rate = r;
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
                common_rate: 2_000.0,
                factor: 2.0,
                growth_steps: 2,
            }
        } else {
            FanoutShape {
                subs: 1000,
                channels: 10,
                payload: 64,
                sample_every: 10,
                common_rate: 100_000.0,
                factor: 1.5,
                growth_steps: 10,
            }
        }
    }
}

/// What a fan-out run against one server measured.
#[derive(Debug, Clone, Serialize)]
pub struct FanoutRun {
    /// `bubble` or `nchan`.
    pub server: &'static str,
    /// The common-rate step.
    pub common: StepResult,
    /// Every measured step (the first is the common one).
    pub steps: Vec<StepResult>,
    /// Max sustainable deliveries/s.
    pub max_deliveries: f64,
    /// The search ended on a generator-bound step: the server may do more.
    pub generator_bound: bool,
    /// Server RSS after the run, KiB.
    pub server_rss_kib: u64,
}

impl FanoutRun {
    /// The one-line summary.
    pub fn line(&self) -> String {
        format!(
            "fanout {}: max {}{} deliveries/s; at {} p50 {} p99 {} p99.9 {}; server {:.2} cores",
            self.server,
            kps(self.max_deliveries),
            if self.generator_bound {
                " (generator-bound, server may do more)"
            } else {
                ""
            },
            kps(self.common.target_rate),
            ms(self.common.p50_ms),
            ms(self.common.p99_ms),
            ms(self.common.p999_ms),
            self.common.server_cores,
        )
    }
}

/// Runs the fan-out load against `server`.
pub fn measure(ctx: &Ctx, server: &Server, shape: &FanoutShape) -> Result<FanoutRun, BenchError> {
    let per_channel = (shape.subs / shape.channels).max(1);
    let subs = per_channel * shape.channels;
    let nchan = server.name == "nchan";
    let tag = format!(
        "b{}x{}",
        std::process::id(),
        crate::clock::now_ns() % 1_000_000
    );
    let channel = |k: usize| format!("{tag}c{k}");
    let specs: Vec<ConnSpec> = (0..subs)
        .map(|i| {
            let ch = channel(i % shape.channels);
            let sample = i % shape.sample_every.max(1) == 0;
            if nchan {
                proto::nchan_subscriber(server.addr, &ch, sample)
            } else {
                proto::pubb_subscriber(server.addr, &ch, sample)
            }
        })
        .collect();
    let pool = Pool::start(specs, ctx.workers(), 128)?;
    pool.wait_ready(Duration::from_secs(120))?;
    let targets: Vec<Target> = (0..shape.channels)
        .map(|k| {
            if nchan {
                proto::nchan_publish(server.addr, &channel(k), shape.payload)
            } else {
                proto::pubb_publish(server.addr, &channel(k), shape.payload)
            }
        })
        .collect();
    let env = StepEnv {
        server,
        gen_cores: ctx.gen_cores,
        p99_bound_ms: 50.0,
    };
    let fanout = per_channel as u64;
    let run_step = |step: u8, deliveries: f64| -> Result<StepResult, BenchError> {
        let plan = ctx.plan(
            server.addr,
            Transport::Http,
            targets.clone(),
            deliveries / fanout as f64,
            step,
        );
        let r = step::delivery_step(&env, &pool, &plan, fanout)?;
        eprintln!("  {} step {step}: {}", server.name, r.line());
        if let Some(e) = &r.first_error {
            eprintln!("  {} first error: {e}", server.name);
        }
        Ok(r)
    };
    // Step 0 warms both sides up and is not reported.
    let mut warm = ctx.plan(
        server.addr,
        Transport::Http,
        targets.clone(),
        shape.common_rate / 10.0 / fanout as f64,
        0,
    );
    warm.duration = Duration::from_secs(1);
    crate::publisher::run(&warm)?;
    std::thread::sleep(Duration::from_millis(300));
    let steps = step::search(
        shape.common_rate,
        shape.factor,
        shape.growth_steps,
        1,
        run_step,
    )?;
    let stats = pool.stop();
    if stats.delivered.iter().sum::<u64>() == 0 {
        return Err(BenchError::Check(format!(
            "{}: no delivery reached any subscriber",
            server.name
        )));
    }
    let common = step::common(&steps).clone();
    let generator_bound = steps.last().is_some_and(|s| !s.valid);
    Ok(FanoutRun {
        server: server.name,
        common,
        max_deliveries: step::max_sustainable(&steps),
        generator_bound,
        steps,
        server_rss_kib: server.rss_kib(),
    })
}

fn bubble_run(ctx: &Ctx, shape: &FanoutShape) -> Result<FanoutRun, BenchError> {
    let server = servers::start_bubble(&ctx.bubble_bin, Store::Memory, ctx.bubble_pin())?;
    measure(ctx, &server, shape).map_err(|e| with_log(e, &server))
}

fn nchan_run(ctx: &Ctx, shape: &FanoutShape) -> Result<FanoutRun, BenchError> {
    let server = servers::start_nchan(&ctx.nchan_conf, ctx.server_core)?;
    measure(ctx, &server, shape).map_err(|e| with_log(e, &server))
}

fn with_log(e: BenchError, server: &Server) -> BenchError {
    let tail = server.log_tail();
    if tail.is_empty() {
        e
    } else {
        BenchError::Check(format!("{e}\n{} log:\n{tail}", server.name))
    }
}

/// Scenario 1: channel fan-out on Bubble.
pub fn scenario_fanout(ctx: &Ctx) -> Result<(), BenchError> {
    let shape = FanoutShape::for_ctx(ctx);
    let run = bubble_run(ctx, &shape)?;
    println!("{}", run.line());
    crate::results::append(
        &ctx.results_dir,
        "fanout",
        json!({ "shape": shape, "bubble": run }),
    )?;
    Ok(())
}

/// Channel fan-out on nchan alone.
pub fn scenario_fanout_nchan(ctx: &Ctx) -> Result<(), BenchError> {
    let shape = FanoutShape::for_ctx(ctx);
    let run = nchan_run(ctx, &shape)?;
    println!("{}", run.line());
    crate::results::append(
        &ctx.results_dir,
        "fanout-nchan",
        json!({ "shape": shape, "nchan": run }),
    )?;
    Ok(())
}

/// Scenario 2: the same fan-out on Bubble and on nchan, and their ratio.
pub fn scenario_fanout_vs_nchan(ctx: &Ctx) -> Result<(), BenchError> {
    let shape = FanoutShape::for_ctx(ctx);
    let bubble = bubble_run(ctx, &shape)?;
    println!("{}", bubble.line());
    let nchan = nchan_run(ctx, &shape)?;
    println!("{}", nchan.line());
    let ratio = if nchan.max_deliveries > 0.0 {
        bubble.max_deliveries / nchan.max_deliveries
    } else {
        0.0
    };
    println!(
        "fanout ratio bubble/nchan max-deliveries/s: {ratio:.2} (p99 at {}: bubble {}, nchan {})",
        kps(shape.common_rate),
        ms(bubble.common.p99_ms),
        ms(nchan.common.p99_ms)
    );
    crate::results::append(
        &ctx.results_dir,
        "fanout-vs-nchan",
        json!({ "shape": shape, "bubble": bubble, "nchan": nchan, "ratio_max_deliveries": ratio }),
    )?;
    Ok(())
}
