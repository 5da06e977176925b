//! Scenario 4: durable appends. Many concurrent appenders (one HTTP
//! keep-alive connection each) append open-loop to a set of threads; a step
//! is sustainable when every append is acknowledged and p99 stays within
//! 20 ms. Acknowledged means durable on the SQLite store.
//!
//! The measuring machinery (one step over one or more nodes, with their
//! store counters, and the saturation search) is shared with the cluster
//! scenario.

use serde::Serialize;
use serde_json::json;
use std::time::Duration;

use crate::ctx::Ctx;
use crate::error::BenchError;
use crate::proto;
use crate::publisher::{Plan, Target, Transport};
use crate::scenarios::{kps, ms};
use crate::servers::{Server, Store};
use crate::step::{self, StepEnv, StepResult};

/// The server's counter of store transactions.
const COMMITS: &str = "bubble_store_commits_total";

/// The server's counter of thread write groups refused because another
/// writer (another node) changed the thread first.
const CONFLICTS: &str = "bubble_write_conflicts_total";

/// p99 of the acknowledgements a sustainable append step stays within, ms.
pub const P99_BOUND_MS: f64 = 20.0;

/// Factor between the rates of an append search.
const GROWTH: f64 = 1.5;

/// One measured append step, with the nodes' store counters over it.
#[derive(Debug, Clone, Serialize)]
pub struct AppendStep {
    /// The step, judged by acknowledgements.
    #[serde(flatten)]
    pub result: StepResult,
    /// Store transactions over the step, summed over the nodes.
    pub commits: Option<u64>,
    /// Acknowledged appends per store transaction.
    pub appends_per_commit: Option<f64>,
    /// Write conflicts over the step (`bubble_write_conflicts_total`),
    /// summed over the nodes.
    pub conflicts: Option<u64>,
    /// Write conflicts per second of the step.
    pub conflicts_per_sec: Option<f64>,
}

/// A saturation search of appends.
#[derive(Debug, Clone, Serialize)]
pub struct AppendSearch {
    /// Max sustainable appends/s (0 when no step was).
    pub max_appends: f64,
    /// The search ended on a generator-bound step.
    pub generator_bound: bool,
    /// Every step, in order.
    pub steps: Vec<AppendStep>,
}

impl AppendSearch {
    /// The sustainable step with the highest throughput.
    pub fn best(&self) -> Option<&AppendStep> {
        self.steps
            .iter()
            .filter(|s| s.result.sustainable)
            .max_by(|a, b| a.result.throughput.total_cmp(&b.result.throughput))
    }

    /// `max … appends/s (p50 … p99 … there)` for result lines.
    pub fn summary(&self) -> String {
        let there = self.best().map_or(String::new(), |b| {
            format!(
                " (p50 {} p99 {} there)",
                ms(b.result.p50_ms),
                ms(b.result.p99_ms)
            )
        });
        format!(
            "max {} appends{there}{}",
            kps(self.max_appends),
            if self.generator_bound {
                ", generator-bound"
            } else {
                ""
            }
        )
    }
}

/// Counter `name` summed over `nodes`; `None` when a node does not answer
/// it.
fn counter(nodes: &[Server], name: &str) -> Option<u64> {
    nodes.iter().map(|n| proto::metric(n.addr, name)).sum()
}

/// Runs `plans` at once as one step on `env`'s servers, judged by the
/// acknowledgements, and reads the servers' store counters around it.
pub fn measure(env: &StepEnv, plans: &[Plan], label: &str) -> Result<AppendStep, BenchError> {
    let nodes = env.servers;
    let before = (counter(nodes, COMMITS), counter(nodes, CONFLICTS));
    let result = step::ack_step(env, plans)?;
    let delta = |name: &str, before: Option<u64>| {
        counter(nodes, name)
            .zip(before)
            .map(|(a, b)| a.saturating_sub(b))
    };
    let commits = delta(COMMITS, before.0);
    let conflicts = delta(CONFLICTS, before.1);
    let appends_per_commit = commits
        .filter(|&c| c > 0)
        .map(|c| result.completed as f64 / c as f64);
    let conflicts_per_sec = conflicts.map(|c| c as f64 / result.secs);
    eprintln!(
        "  {label} step {}: {} appends/commit {} conflicts/s {}",
        result.step,
        result.line(),
        appends_per_commit.map_or("n/a".into(), |v| format!("{v:.2}")),
        conflicts_per_sec.map_or("n/a".into(), |v| format!("{v:.1}")),
    );
    if let Some(e) = &result.first_error {
        eprintln!("  first error: {e}");
    }
    Ok(AppendStep {
        result,
        commits,
        appends_per_commit,
        conflicts,
        conflicts_per_sec,
    })
}

/// The saturation search of appends on `env`'s servers: from `start`
/// appends/s, 1.5× per move for at most `moves` moves, then three
/// bisections (see [`step::search`]); `plans(step, rate)` builds a step's
/// plans. Fails when no append at all was acknowledged.
pub fn search(
    env: &StepEnv,
    start: f64,
    moves: usize,
    label: &str,
    plans: impl Fn(u8, f64) -> Vec<Plan>,
) -> Result<AppendSearch, BenchError> {
    let mut steps = Vec::new();
    let results = step::search(start, GROWTH, moves, 1, |s, rate| {
        let m = measure(env, &plans(s, rate), label)?;
        let r = m.result.clone();
        steps.push(m);
        Ok::<_, BenchError>(r)
    })?;
    if steps.iter().all(|s| s.result.completed == 0) {
        return Err(BenchError::Check(format!(
            "{label}: no append was acknowledged"
        )));
    }
    Ok(AppendSearch {
        max_appends: step::max_sustainable(&results),
        generator_bound: results.last().is_some_and(|s| s.generator_bound),
        steps,
    })
}

/// Creates `count` fresh threads named after `letter`, the process and the
/// clock, thread `i` on server `i mod n` of `servers` (a node keeps the
/// threads it created in its cache); returns their ids.
pub fn new_threads(
    servers: &[Server],
    letter: &str,
    count: usize,
) -> Result<Vec<String>, BenchError> {
    let tag = format!(
        "{letter}{}x{}",
        std::process::id(),
        crate::clock::now_ns() % 1_000_000
    );
    let ids: Vec<String> = (0..count).map(|t| format!("{tag}-{t}")).collect();
    for (id, server) in ids.iter().zip(servers.iter().cycle()) {
        proto::create_thread(server.addr, id)?;
    }
    Ok(ids)
}

/// HTTP appends of 64-byte events at `rate` over `conns` appenders on
/// `server`, to `threads` in turn.
pub fn plan(
    ctx: &Ctx,
    server: &Server,
    threads: &[&String],
    conns: usize,
    rate: f64,
    step: u8,
) -> Plan {
    let targets: Vec<Target> = threads
        .iter()
        .map(|t| proto::http_append(server.addr, t, 64))
        .collect();
    let mut plan = ctx.plan(server.addr, Transport::Http, targets, rate, step);
    plan.conns = conns.max(1);
    plan.drain = Duration::from_secs(20);
    plan
}

/// Appenders, threads, first rate and moves of the search.
fn shape(ctx: &Ctx) -> (usize, usize, f64, usize) {
    if ctx.smoke {
        (4, 2, 200.0, 1)
    } else {
        (super::HTTP_APPENDERS, 16, 2_000.0, 10)
    }
}

/// Scenario 4.
pub fn scenario(ctx: &Ctx) -> Result<(), BenchError> {
    let (appenders, threads, start, moves) = shape(ctx);
    let mut out = Vec::new();
    let mut parts = Vec::new();
    for store in [Store::Sqlite, Store::Memory] {
        let server = ctx.start_bubble(store)?;
        let ids = new_threads(std::slice::from_ref(&server), "a", threads)?;
        let all: Vec<&String> = ids.iter().collect();
        let env = StepEnv {
            servers: std::slice::from_ref(&server),
            server_core: ctx.server_core,
            gen_cores: ctx.gen_cores,
            p99_bound_ms: P99_BOUND_MS,
        };
        let found = search(
            &env,
            start,
            moves,
            &format!("appends {}", store.name()),
            |s, rate| vec![plan(ctx, &server, &all, appenders, rate, s)],
        )?;
        parts.push(format!("{} {}", store.name(), found.summary()));
        out.push(json!({
            "store": store.name(),
            "appenders": appenders,
            "threads": threads,
            "max_appends": found.max_appends,
            "generator_bound": found.generator_bound,
            "steps": found.steps,
        }));
    }
    println!(
        "appends ({} concurrent appenders): {}",
        appenders,
        parts.join("; ")
    );
    crate::results::append(&ctx.results_dir, "appends", json!({ "runs": out }))?;
    Ok(())
}
