//! Scenario 7: fan-out under history reads. A live thread fan-out (S
//! subscribers on T threads over `/v1/ws`, HTTP appends at a fixed rate,
//! append→delivery latency as in scenario 3) is measured three times on one
//! server: with no other load (baseline), while P pagers read long
//! histories over HTTP (`GET /v1/threads/:id/events?fromSeq=&limit=1000`
//! in a loop over threads pre-filled with many events), and with the
//! pagers stopped again (after). Reads that stall the engine show up as the
//! live fan-out's p99 and max rising in the middle step. Both stores.

use serde::Serialize;
use serde_json::json;
use std::time::Duration;

use crate::ctx::Ctx;
use crate::error::BenchError;
use crate::history::{self, FillReport, PagerSpec, PagerSummary, Pagers};
use crate::pool::Pool;
use crate::proto;
use crate::publisher::{Target, Transport};
use crate::scenarios::{kps, ms};
use crate::servers::{Server, Store};
use crate::step::{self, StepEnv, StepResult};

/// Beyond any head: subscribe to live events only.
const LIVE_ONLY: u64 = 1 << 40;
/// Fill connections per history thread, and appends in flight on each.
const FILL_CONNS_PER_THREAD: usize = 16;
const FILL_DEPTH: u64 = 8;
/// Pagers run this long before the measured step starts.
const PAGER_WARMUP: Duration = Duration::from_millis(300);

/// The sizes of one run.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Shape {
    /// Live subscribers.
    pub subscribers: usize,
    /// Live threads (subscribers are spread over them).
    pub live_threads: usize,
    /// Target deliveries/s of the live fan-out.
    pub deliveries_per_sec: f64,
    /// Threads pre-filled with history.
    pub history_threads: usize,
    /// Events in each history thread.
    pub events_per_thread: u64,
    /// Concurrent pagers (pager i reads history thread i mod
    /// `history_threads`).
    pub pagers: usize,
    /// Their pages/s, all together (`None`: as fast as answered).
    pub page_rate: Option<f64>,
    /// Seconds per measured step.
    pub step_secs: f64,
}

impl Shape {
    fn of(ctx: &Ctx) -> Shape {
        if ctx.smoke {
            Shape {
                subscribers: 20,
                live_threads: 2,
                deliveries_per_sec: 500.0,
                history_threads: 2,
                events_per_thread: 2_000,
                pagers: ctx.pagers.min(2),
                page_rate: ctx.page_rate,
                step_secs: ctx.step_secs.min(0.5),
            }
        } else {
            Shape {
                subscribers: 1000,
                live_threads: 10,
                deliveries_per_sec: 20_000.0,
                history_threads: 4,
                events_per_thread: 100_000,
                pagers: ctx.pagers,
                page_rate: ctx.page_rate,
                step_secs: ctx.step_secs,
            }
        }
    }
}

/// One store's run.
#[derive(Debug, Clone, Serialize)]
pub struct HistoryRun {
    /// Store name.
    pub store: &'static str,
    /// The history pre-fill.
    pub fill: FillReport,
    /// Live fan-out with the pagers off.
    pub baseline: StepResult,
    /// Live fan-out while the pagers read.
    pub with_pagers: StepResult,
    /// Live fan-out with the pagers off again.
    pub after: StepResult,
    /// What the pagers did during `with_pagers`.
    pub pagers: PagerSummary,
    /// `with_pagers.p99_ms / baseline.p99_ms`.
    pub p99_with_over_baseline: f64,
    /// Generator-bound attempts that were measured again.
    pub discarded: Vec<StepResult>,
}

fn run_one(
    ctx: &Ctx,
    server: &Server,
    store: Store,
    shape: &Shape,
) -> Result<HistoryRun, BenchError> {
    let tag = format!(
        "h{}x{}",
        std::process::id(),
        crate::clock::now_ns() % 1_000_000
    );
    let live: Vec<String> = (0..shape.live_threads)
        .map(|t| format!("{tag}-live-{t}"))
        .collect();
    let hist: Vec<String> = (0..shape.history_threads)
        .map(|t| format!("{tag}-hist-{t}"))
        .collect();
    for id in live.iter().chain(&hist) {
        proto::create_thread(server.addr, id)?;
    }
    let requests: Vec<Vec<u8>> = hist
        .iter()
        .map(|t| proto::http_append(server.addr, t, 64).bytes)
        .collect();
    let fill = history::fill(
        server.addr,
        &requests,
        shape.events_per_thread,
        FILL_CONNS_PER_THREAD,
        FILL_DEPTH,
    )?;
    eprintln!(
        "  fanout-with-history {}: filled {} x {} events in {:.1} s ({})",
        store.name(),
        shape.history_threads,
        shape.events_per_thread,
        fill.secs,
        kps(fill.events_per_sec)
    );
    // Let the store settle (commits, checkpoints) before measuring.
    std::thread::sleep(Duration::from_millis(500));

    let specs = (0..shape.subscribers)
        .map(|i| {
            let t = i % shape.live_threads;
            proto::thread_subscriber(
                server.addr,
                &live[t..t + 1],
                LIVE_ONLY,
                super::sampled(i, shape.live_threads, 10),
            )
        })
        .collect();
    let pool = Pool::start(specs, ctx.workers(), 128, ctx.sub_coalesce)?;
    pool.wait_ready(Duration::from_secs(120))?;
    let targets: Vec<Target> = live
        .iter()
        .map(|t| proto::http_append(server.addr, t, 64))
        .collect();
    let env = StepEnv {
        servers: std::slice::from_ref(server),
        server_core: ctx.server_core,
        gen_cores: ctx.gen_cores,
        p99_bound_ms: 50.0,
    };
    let fanout = (shape.subscribers / shape.live_threads) as u64;
    let pager_specs: Vec<PagerSpec> = (0..shape.pagers)
        .map(|p| PagerSpec {
            thread: hist[p % hist.len()].clone(),
            head: shape.events_per_thread,
            // Pagers sharing a thread start apart, not in lockstep.
            from: 1 + (p / hist.len()) as u64 * 10 * history::PAGE_LIMIT % shape.events_per_thread,
        })
        .collect();

    let mut step_no = 1u8;
    let mut discarded = Vec::new();
    let mut pager_summary = None;
    let mut measure = |what: &str, pagers_on: bool| -> Result<StepResult, BenchError> {
        let mut attempt = 0;
        loop {
            let pagers = if pagers_on {
                let p = Pagers::start(server.addr, pager_specs.clone(), shape.page_rate)?;
                std::thread::sleep(PAGER_WARMUP);
                Some(p)
            } else {
                None
            };
            let mut plan = ctx.plan(
                server.addr,
                Transport::Http,
                targets.clone(),
                shape.deliveries_per_sec / fanout as f64,
                step_no,
            );
            plan.duration = Duration::from_secs_f64(shape.step_secs);
            let r = step::delivery_step(&env, &pool, std::slice::from_ref(&plan), fanout);
            let paged = pagers.map(Pagers::stop).transpose();
            let r = r?;
            let paged = paged?.map(|s| s.summary());
            step_no += 1;
            eprintln!(
                "  fanout-with-history {} {what} step {}: {}",
                store.name(),
                r.step,
                r.line()
            );
            if let Some(e) = &r.first_error {
                eprintln!("  first error: {e}");
            }
            if let Some(p) = &paged {
                eprintln!(
                    "  fanout-with-history {} pagers: {} pagers, {:.0} pages/s, {:.1}k events/s, {:.1} MiB/s, page p50 {} p99 {} max {}, errors {}",
                    store.name(),
                    p.pagers,
                    p.pages_per_sec,
                    p.events_per_sec / 1000.0,
                    p.mib_per_sec,
                    ms(p.page_p50_ms),
                    ms(p.page_p99_ms),
                    ms(p.page_max_ms),
                    p.errors
                );
                if let Some(e) = &p.first_error {
                    eprintln!("  first pager error: {e}");
                }
                pager_summary = Some(p.clone());
            }
            attempt += 1;
            if r.valid || attempt > 1 || step_no as usize >= crate::stamp::MAX_STEPS {
                return Ok(r);
            }
            discarded.push(r);
        }
    };
    let baseline = measure("baseline", false)?;
    let with_pagers = measure("with-pagers", true)?;
    let after = measure("after", false)?;
    let stats = pool.stop();
    if stats.delivered.iter().sum::<u64>() == 0 {
        return Err(BenchError::Check(format!(
            "fanout-with-history {}: no event reached any subscriber",
            store.name()
        )));
    }
    let pagers = pager_summary
        .ok_or_else(|| BenchError::Check("fanout-with-history: the pagers did not run".into()))?;
    if pagers.pages == 0 {
        return Err(BenchError::Check(format!(
            "fanout-with-history {}: no history page was read; first error: {:?}",
            store.name(),
            pagers.first_error
        )));
    }
    Ok(HistoryRun {
        store: store.name(),
        fill,
        p99_with_over_baseline: if baseline.p99_ms > 0.0 {
            with_pagers.p99_ms / baseline.p99_ms
        } else {
            0.0
        },
        baseline,
        with_pagers,
        after,
        pagers,
        discarded,
    })
}

/// Scenario 7.
pub fn scenario(ctx: &Ctx) -> Result<(), BenchError> {
    let shape = Shape::of(ctx);
    let mut runs = Vec::new();
    for store in [Store::Memory, Store::Sqlite] {
        let server = ctx.start_bubble(store)?;
        runs.push(run_one(ctx, &server, store, &shape)?);
    }
    let lat = |s: &StepResult| {
        format!(
            "p50 {} p99 {} max {} ({}, server {:.2} cores)",
            ms(s.p50_ms),
            ms(s.p99_ms),
            ms(s.max_ms),
            kps(s.throughput),
            s.server_cores
        )
    };
    let parts: Vec<String> = runs
        .iter()
        .map(|r| {
            format!(
                "{}: off {}; on {}; after {}; pagers {:.0} pages/s, {:.1}k events/s",
                r.store,
                lat(&r.baseline),
                lat(&r.with_pagers),
                lat(&r.after),
                r.pagers.pages_per_sec,
                r.pagers.events_per_sec / 1000.0
            )
        })
        .collect();
    println!(
        "fanout-with-history ({} subscribers on {} threads, {:.1}k deliveries/s; {} pagers at {} over {} x {} events): {}",
        shape.subscribers,
        shape.live_threads,
        shape.deliveries_per_sec / 1000.0,
        shape.pagers,
        shape
            .page_rate
            .map_or("full speed".to_string(), |r| format!("{r:.0} pages/s")),
        shape.history_threads,
        shape.events_per_thread,
        parts.join("; ")
    );
    crate::results::append(
        &ctx.results_dir,
        "fanout-with-history",
        json!({
            "shape": shape,
            "http_appenders": ctx.pub_conns,
            "runs": runs,
        }),
    )?;
    Ok(())
}
