//! Scenario 3: thread fan-out. S subscribers on T threads over `/v1/ws`,
//! appends over HTTP and over WebSocket, on the memory and SQLite stores;
//! deliveries/s and append→delivery latency.

use serde::Serialize;
use serde_json::json;
use std::time::Duration;

use crate::ctx::Ctx;
use crate::error::BenchError;
use crate::pool::Pool;
use crate::proto;
use crate::publisher::{Target, Transport};
use crate::scenarios::{kps, ms};
use crate::servers::{Server, Store};
use crate::step::{self, StepEnv, StepResult};

/// Beyond any head: subscribe to live events only.
const LIVE_ONLY: u64 = 1 << 40;

/// One (store, transport) combination.
#[derive(Debug, Clone, Serialize)]
pub struct ThreadRun {
    /// Store name.
    pub store: &'static str,
    /// `http` or `ws`.
    pub transport: &'static str,
    /// Every step; the first is the common rate.
    pub steps: Vec<StepResult>,
    /// Max sustainable deliveries/s.
    pub max_deliveries: f64,
    /// The search ended on a generator-bound step.
    pub generator_bound: bool,
}

/// HTTP appender connections: the appends scenario's count, or the
/// publisher's default in a smoke run.
fn http_appenders(ctx: &Ctx) -> usize {
    if ctx.smoke {
        ctx.pub_conns
    } else {
        super::HTTP_APPENDERS
    }
}

fn run_one(ctx: &Ctx, server: &Server, store: Store, ws: bool) -> Result<ThreadRun, BenchError> {
    let (subs, threads, common, growth) = if ctx.smoke {
        (20, 2, 500.0, 1)
    } else {
        (1000, 10, 20_000.0, 12)
    };
    let tag = format!(
        "t{}x{}",
        std::process::id(),
        crate::clock::now_ns() % 1_000_000
    );
    let ids: Vec<String> = (0..threads).map(|t| format!("{tag}-{t}")).collect();
    for id in &ids {
        proto::create_thread(server.addr, id)?;
    }
    let specs = (0..subs)
        .map(|i| {
            proto::thread_subscriber(
                server.addr,
                &ids[i % threads..i % threads + 1],
                LIVE_ONLY,
                super::sampled(i, threads, 10),
            )
        })
        .collect();
    let pool = Pool::start(specs, ctx.workers(), 128, ctx.sub_coalesce)?;
    pool.wait_ready(Duration::from_secs(120))?;
    let (transport, targets): (Transport, Vec<Target>) = if ws {
        (
            Transport::Ws(proto::thread_ws_handshake(server.addr)),
            ids.iter().map(|t| proto::ws_append(t, 64)).collect(),
        )
    } else {
        (
            Transport::Http,
            ids.iter()
                .map(|t| proto::http_append(server.addr, t, 64))
                .collect(),
        )
    };
    let env = StepEnv {
        servers: std::slice::from_ref(server),
        server_core: ctx.server_core,
        gen_cores: ctx.gen_cores,
        p99_bound_ms: 50.0,
    };
    let fanout = (subs / threads) as u64;
    let label = format!("{}/{}", store.name(), if ws { "ws" } else { "http" });
    let steps = step::search(
        common,
        1.5,
        growth,
        1,
        |s, deliveries| -> Result<StepResult, BenchError> {
            let mut plan = ctx.plan(
                server.addr,
                transport.clone(),
                targets.clone(),
                deliveries / fanout as f64,
                s,
            );
            if !ws {
                plan.conns = http_appenders(ctx);
            }
            let r = step::delivery_step(&env, &pool, std::slice::from_ref(&plan), fanout)?;
            eprintln!("  thread-fanout {label} step {s}: {}", r.line());
            if let Some(e) = &r.first_error {
                eprintln!("  first error: {e}");
            }
            Ok(r)
        },
    )?;
    let stats = pool.stop();
    if stats.delivered.iter().sum::<u64>() == 0 {
        return Err(BenchError::Check(format!(
            "thread-fanout {label}: no event reached any subscriber"
        )));
    }
    Ok(ThreadRun {
        store: store.name(),
        transport: if ws { "ws" } else { "http" },
        max_deliveries: step::max_sustainable(&steps),
        generator_bound: steps.last().is_some_and(|s| s.generator_bound),
        steps,
    })
}

/// Scenario 3.
pub fn scenario(ctx: &Ctx) -> Result<(), BenchError> {
    let mut runs = Vec::new();
    for store in [Store::Memory, Store::Sqlite] {
        for ws in [false, true] {
            let server = ctx.start_bubble(store)?;
            runs.push(run_one(ctx, &server, store, ws)?);
        }
    }
    let max = |store: &str, t: &str| {
        runs.iter()
            .find(|r| r.store == store && r.transport == t)
            .map(|r| {
                (
                    r.max_deliveries,
                    r.steps[0].p50_ms,
                    r.steps[0].p99_ms,
                    r.steps[0].target_rate,
                )
            })
            .unwrap_or_default()
    };
    let mut parts = Vec::new();
    for store in ["memory", "sqlite"] {
        for t in ["http", "ws"] {
            let (m, p50, p99, rate) = max(store, t);
            parts.push(format!(
                "{store}/{t} max {} (at {} p50 {} p99 {})",
                kps(m),
                kps(rate),
                ms(p50),
                ms(p99)
            ));
        }
    }
    let ratio = |t: &str| {
        let (mem, sql) = (max("memory", t).0, max("sqlite", t).0);
        if mem > 0.0 {
            sql / mem
        } else {
            0.0
        }
    };
    let (http, ws) = (ratio("http"), ratio("ws"));
    println!(
        "thread-fanout: {}; sqlite/memory {http:.2} (http), {ws:.2} (ws)",
        parts.join("; ")
    );
    crate::results::append(
        &ctx.results_dir,
        "thread-fanout",
        json!({
            "runs": runs,
            "http_appenders": http_appenders(ctx),
            "sqlite_over_memory_http": http,
            "sqlite_over_memory_ws": ws,
        }),
    )?;
    Ok(())
}
