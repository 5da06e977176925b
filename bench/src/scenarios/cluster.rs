//! Scenario 8: a cluster. Three `bubble serve` nodes on this machine share
//! one fresh PostgreSQL schema and one fresh Redis key prefix
//! (`docs/cluster.md`); in the same run one SQLite node takes the same
//! loads, for comparison:
//!
//! - **Durable appends**: 64 HTTP appenders spread over the nodes append
//!   open-loop to 16 threads; the acknowledgement p99 at fixed rates and
//!   the max sustainable rate (every append acknowledged, p99 ≤ 20 ms: the
//!   rule and the machinery of scenario 4). Twice: with every thread
//!   appended to from every node (a load balancer without affinity), and
//!   with each thread's appends on one node (a balancer routing by thread).
//! - **Append → delivery across nodes**: subscribers (`/v1/ws`,
//!   `thread.subscribe`) of each thread on the nodes other than the one
//!   its appends go to; stamped payloads, delivery ratio and latency at
//!   fixed rates.
//! - **A hot thread**: every node appends to one thread at once;
//!   acknowledged appends/s and write conflicts/s (the nodes'
//!   `bubble_write_conflicts_total` over the step).
//!
//! Placement: the nodes, and the single SQLite node, are not pinned: they
//! share every core with PostgreSQL and Redis (the machine's services,
//! never pinned either) and with the generator, which keeps to its cores
//! (every core but the first, unless `--no-pin`). The generator's threads
//! run at a higher priority than the nodes (nice −10, when permitted), so
//! that a saturated machine shows in the nodes' latency rather than as a
//! starved generator. Each step records the nodes' CPU together and the
//! machine's busy cores, which show what PostgreSQL and Redis took.

use serde::Serialize;
use serde_json::json;
use std::process::Command;
use std::time::Duration;

use crate::ctx::Ctx;
use crate::error::BenchError;
use crate::limits::Raised;
use crate::pool::Pool;
use crate::proto;
use crate::publisher::Plan;
use crate::scenarios::appends::{self, AppendSearch, AppendStep};
use crate::scenarios::{kps, ms};
use crate::servers::{self, ClusterNode, Pin, Server, Store};
use crate::step::{self, StepEnv, StepResult};

/// Nodes of the cluster.
const NODES: usize = 3;

/// Beyond any head: subscribe to live events only.
const LIVE_ONLY: u64 = 1 << 40;

/// p99 bound of a sustainable delivery step, ms (as in scenario 3).
const DELIVERY_P99_BOUND_MS: f64 = 50.0;

/// How much the generator's priority is raised over the servers' (nice).
const GENERATOR_NICE: libc::c_int = 10;

/// Raises the calling thread's priority, and so that of the generator
/// threads it starts, until dropped; the servers must be started before.
fn raise_generator() -> Option<Raised> {
    let raised = Raised::by(GENERATOR_NICE);
    if raised.is_none() {
        eprintln!("warning: cannot raise the generator's priority; it runs at the servers'");
    }
    raised
}

/// The loads of one run.
struct Shape {
    /// Concurrent HTTP appenders, spread over the nodes.
    appenders: usize,
    /// Threads of the appends and delivery loads.
    threads: usize,
    /// Appends/s of the fixed-rate steps.
    fixed: Vec<f64>,
    /// First rate of the saturation search, appends/s, unless a fixed-rate
    /// step was sustainable at a higher rate: it then starts at the highest.
    search_start: f64,
    /// Moves of the saturation search.
    search_moves: usize,
    /// Appends/s of the hot-thread steps.
    hot: Vec<f64>,
    /// Appends/s of the delivery steps.
    delivery: Vec<f64>,
    /// Subscribers per thread in the delivery steps.
    subscribers: usize,
}

impl Shape {
    fn for_ctx(ctx: &Ctx) -> Shape {
        if ctx.smoke {
            Shape {
                appenders: 6,
                threads: 3,
                fixed: Vec::new(),
                search_start: 100.0,
                search_moves: 1,
                hot: vec![100.0],
                delivery: vec![50.0],
                subscribers: 2,
            }
        } else {
            Shape {
                appenders: super::HTTP_APPENDERS,
                threads: 16,
                fixed: vec![250.0, 500.0, 1_000.0, 2_000.0],
                search_start: 250.0,
                search_moves: 10,
                hot: vec![100.0, 300.0, 1_000.0],
                delivery: vec![100.0, 300.0, 600.0, 1_000.0],
                subscribers: 10,
            }
        }
    }
}

/// Which node takes the appends of a thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
enum Routing {
    /// Every node appends to every thread (a load balancer without
    /// affinity).
    Spread,
    /// Thread `i`'s appends go to node `i mod n` (a balancer routing by
    /// thread).
    ByThread,
}

impl Routing {
    fn name(self) -> &'static str {
        match self {
            Routing::Spread => "spread",
            Routing::ByThread => "by-thread",
        }
    }
}

/// What node `k` of `nodes` appends: the indices of its threads among
/// `threads`, its share of the rate (every thread gets the same rate) and
/// its number of appenders out of `appenders`.
fn node_load(
    routing: Routing,
    k: usize,
    nodes: usize,
    threads: usize,
    appenders: usize,
) -> (Vec<usize>, f64, usize) {
    let mine: Vec<usize> = (0..threads)
        .filter(|i| routing == Routing::Spread || i % nodes == k)
        .collect();
    let share = match routing {
        Routing::Spread => 1.0 / nodes as f64,
        Routing::ByThread => mine.len() as f64 / threads as f64,
    };
    let conns = appenders / nodes + usize::from(k < appenders % nodes);
    (mine, share, conns)
}

/// One plan per node that has threads to append to (see [`node_load`]),
/// `rate` appends/s in all.
fn plans(
    ctx: &Ctx,
    shape: &Shape,
    nodes: &[Server],
    threads: &[String],
    routing: Routing,
    rate: f64,
    step: u8,
) -> Vec<Plan> {
    nodes
        .iter()
        .enumerate()
        .filter_map(|(k, node)| {
            let (mine, share, conns) =
                node_load(routing, k, nodes.len(), threads.len(), shape.appenders);
            let mine: Vec<&String> = mine.iter().map(|&i| &threads[i]).collect();
            (!mine.is_empty()).then(|| appends::plan(ctx, node, &mine, conns, rate * share, step))
        })
        .collect()
}

/// The step inputs for `nodes` (unpinned: no core of theirs to watch).
fn env<'a>(ctx: &Ctx, nodes: &'a [Server], p99_bound_ms: f64) -> StepEnv<'a> {
    StepEnv {
        servers: nodes,
        server_core: None,
        gen_cores: ctx.gen_cores,
        p99_bound_ms,
    }
}

/// Fixed-rate steps and a saturation search of one routing.
#[derive(Debug, Serialize)]
struct AppendsRun {
    routing: Routing,
    /// The fixed-rate steps, in `Shape::fixed` order.
    fixed: Vec<AppendStep>,
    /// The saturation search.
    search: AppendSearch,
}

/// Appends to fresh threads, each created on the node `routing` sends it
/// to (by thread) or on each node in turn (spread), so that no node holds
/// threads in its cache that it does not write: fixed-rate steps, then a
/// saturation search.
fn appends_run(
    ctx: &Ctx,
    shape: &Shape,
    nodes: &[Server],
    routing: Routing,
    label: &str,
) -> Result<AppendsRun, BenchError> {
    let threads = &appends::new_threads(nodes, &routing.name()[..1], shape.threads)?;
    let env = env(ctx, nodes, appends::P99_BOUND_MS);
    let label = if nodes.len() > 1 {
        format!("{label} appends {}", routing.name())
    } else {
        format!("{label} appends")
    };
    let mut fixed = Vec::new();
    for (i, &rate) in shape.fixed.iter().enumerate() {
        let plans = plans(ctx, shape, nodes, threads, routing, rate, i as u8 + 1);
        fixed.push(appends::measure(&env, &plans, &label)?);
    }
    let start = fixed
        .iter()
        .filter(|s| s.result.sustainable)
        .map(|s| s.result.target_rate)
        .fold(shape.search_start, f64::max);
    let search = appends::search(&env, start, shape.search_moves, &label, |s, rate| {
        plans(ctx, shape, nodes, threads, routing, rate, s)
    })?;
    Ok(AppendsRun {
        routing,
        fixed,
        search,
    })
}

/// Every node appends to one fresh thread, at each of `Shape::hot`.
fn hot_thread(
    ctx: &Ctx,
    shape: &Shape,
    nodes: &[Server],
    label: &str,
) -> Result<Vec<AppendStep>, BenchError> {
    let hot = appends::new_threads(nodes, "h", 1)?;
    let env = env(ctx, nodes, appends::P99_BOUND_MS);
    let label = format!("{label} hot thread");
    let mut steps = Vec::new();
    for (i, &rate) in shape.hot.iter().enumerate() {
        let plans = plans(ctx, shape, nodes, &hot, Routing::Spread, rate, i as u8 + 1);
        steps.push(appends::measure(&env, &plans, &label)?);
    }
    Ok(steps)
}

/// Fresh threads, each created and appended to on one node (routing by
/// thread) and followed by `Shape::subscribers` subscribers on the other
/// nodes (on the node itself when it is alone); one step per rate of
/// `Shape::delivery`, judged by deliveries.
fn delivery(
    ctx: &Ctx,
    shape: &Shape,
    nodes: &[Server],
    label: &str,
) -> Result<Vec<StepResult>, BenchError> {
    let threads = appends::new_threads(nodes, "d", shape.threads)?;
    let n = nodes.len();
    let mut specs = Vec::new();
    for (i, thread) in threads.iter().enumerate() {
        let others: Vec<&Server> = nodes
            .iter()
            .enumerate()
            .filter(|&(k, _)| n == 1 || k != i % n)
            .map(|(_, s)| s)
            .collect();
        for j in 0..shape.subscribers {
            let node = others[j % others.len()];
            specs.push(proto::thread_subscriber(
                node.addr,
                std::slice::from_ref(thread),
                LIVE_ONLY,
                true,
            ));
        }
    }
    let pool = Pool::start(specs, ctx.workers(), 128, ctx.sub_coalesce)?;
    pool.wait_ready(Duration::from_secs(60))?;
    let env = env(ctx, nodes, DELIVERY_P99_BOUND_MS);
    let fanout = shape.subscribers as u64;
    let mut steps = Vec::new();
    for (i, &rate) in shape.delivery.iter().enumerate() {
        let step = i as u8 + 1;
        let plans = plans(ctx, shape, nodes, &threads, Routing::ByThread, rate, step);
        let r = step::delivery_step(&env, &pool, &plans, fanout)?;
        eprintln!("  {label} delivery step {step}: {}", r.line());
        if let Some(e) = &r.first_error {
            eprintln!("  first error: {e}");
        }
        steps.push(r);
    }
    let stats = pool.stop();
    if stats.delivered.iter().sum::<u64>() == 0 {
        return Err(BenchError::Check(format!(
            "{label}: no event reached any subscriber"
        )));
    }
    Ok(steps)
}

/// Runs `statement` with `psql` against `url`; its output, or why it
/// failed.
fn psql(url: &str, statement: &str) -> Result<String, String> {
    let out = Command::new("psql")
        .arg(url)
        .args(["-qtAX", "-v", "ON_ERROR_STOP=1", "-c", statement])
        .output()
        .map_err(|e| format!("cannot run psql: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
    }
}

/// Runs `redis-cli` with `args` against `url`; its output, or why it
/// failed.
fn redis_cli(url: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new("redis-cli")
        .args(["-u", url])
        .args(args)
        .output()
        .map_err(|e| format!("cannot run redis-cli: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    // redis-cli exits 0 on most server errors: they come back as text.
    if out.status.success() && !text.starts_with("ERR") && !text.starts_with("NOAUTH") {
        Ok(text)
    } else {
        Err(format!(
            "{text}{}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// One deployment: a fresh PostgreSQL schema and Redis key prefix, both
/// removed when it is dropped (after its nodes stopped).
struct Deployment {
    postgres: String,
    redis: String,
    schema: String,
    prefix: String,
}

impl Deployment {
    /// Checks that PostgreSQL and Redis answer, then names a fresh schema
    /// and prefix.
    fn new(ctx: &Ctx) -> Result<Deployment, BenchError> {
        psql(&ctx.postgres, "SELECT 1").map_err(|e| {
            BenchError::Check(format!(
                "PostgreSQL at {} does not answer (--postgres): {e}",
                ctx.postgres
            ))
        })?;
        match redis_cli(&ctx.redis, &["PING"]) {
            Ok(pong) if pong == "PONG" => {}
            Ok(other) => {
                return Err(BenchError::Check(format!(
                    "Redis at {} answered PING with {other:?} (--redis)",
                    ctx.redis
                )))
            }
            Err(e) => {
                return Err(BenchError::Check(format!(
                    "Redis at {} does not answer (--redis): {e}",
                    ctx.redis
                )))
            }
        }
        static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let schema = format!("bench_{}_{n}", std::process::id());
        Ok(Deployment {
            postgres: ctx.postgres.clone(),
            redis: ctx.redis.clone(),
            prefix: format!("bubble-bench:{schema}"),
            schema,
        })
    }

    /// How node `k` starts.
    fn node(&self, k: usize) -> ClusterNode {
        let sep = if self.postgres.contains('?') {
            '&'
        } else {
            '?'
        };
        ClusterNode {
            store: format!("{}{sep}schema={}", self.postgres, self.schema),
            broker: self.redis.clone(),
            prefix: self.prefix.clone(),
            node_id: format!("node-{k}"),
        }
    }

    /// Starts `count` nodes and waits until each is ready (store
    /// answering, broker subscribed).
    fn start(&self, ctx: &Ctx, count: usize) -> Result<Vec<Server>, BenchError> {
        let mut nodes = Vec::new();
        for k in 1..=count {
            let spec = self.node(k);
            nodes.push(servers::start_bubble(
                &ctx.bubble_bin,
                Store::Cluster(&spec),
                Pin::Off,
                ctx.write_delay_ms,
            )?);
        }
        for node in &nodes {
            wait_ready(node)?;
        }
        Ok(nodes)
    }
}

impl Drop for Deployment {
    fn drop(&mut self) {
        let drop_schema = format!("DROP SCHEMA IF EXISTS {} CASCADE", self.schema);
        if let Err(e) = psql(&self.postgres, &drop_schema) {
            eprintln!("cluster: could not drop schema {}: {e}", self.schema);
        }
        let pattern = format!("{}:*", self.prefix);
        let keys = redis_cli(&self.redis, &["--scan", "--pattern", &pattern]);
        let deleted = keys.and_then(|keys| {
            let keys: Vec<&str> = keys.lines().filter(|k| !k.is_empty()).collect();
            if keys.is_empty() {
                return Ok(String::new());
            }
            let mut args = vec!["DEL"];
            args.extend(keys);
            redis_cli(&self.redis, &args)
        });
        if let Err(e) = deleted {
            eprintln!("cluster: could not delete Redis keys {pattern}: {e}");
        }
    }
}

/// Polls `GET /readyz` until it answers 200 (30 s at most).
fn wait_ready(node: &Server) -> Result<(), BenchError> {
    let deadline = crate::clock::now_ns() + 30_000_000_000;
    let mut last = String::new();
    while crate::clock::now_ns() < deadline {
        match crate::http::request(node.addr, "GET", "/readyz", "", b"") {
            Ok((200, _)) => return Ok(()),
            Ok((status, body)) => {
                last = format!("HTTP {status}: {}", String::from_utf8_lossy(&body));
            }
            Err(e) => last = e.to_string(),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(BenchError::Check(format!(
        "cluster node {} not ready after 30 s ({last}); log:\n{}",
        node.addr,
        node.log_tail()
    )))
}

/// The single SQLite node's measurements.
#[derive(Debug, Serialize)]
struct SingleRun {
    appends: AppendsRun,
    hot_thread: Vec<AppendStep>,
    delivery: Vec<StepResult>,
}

/// The cluster's measurements.
#[derive(Debug, Serialize)]
struct ClusterRun {
    spread: AppendsRun,
    by_thread: AppendsRun,
    hot_thread: Vec<AppendStep>,
    delivery: Vec<StepResult>,
}

fn run_cluster(
    ctx: &Ctx,
    shape: &Shape,
    deployment: &Deployment,
) -> Result<ClusterRun, BenchError> {
    // The nodes stop when this returns, before the caller's deployment
    // drops the schema.
    let nodes = deployment.start(ctx, NODES)?;
    let _raised = raise_generator();
    let label = "cluster";
    Ok(ClusterRun {
        spread: appends_run(ctx, shape, &nodes, Routing::Spread, label)?,
        by_thread: appends_run(ctx, shape, &nodes, Routing::ByThread, label)?,
        hot_thread: hot_thread(ctx, shape, &nodes, label)?,
        delivery: delivery(ctx, shape, &nodes, label)?,
    })
}

fn run_single(ctx: &Ctx, shape: &Shape) -> Result<SingleRun, BenchError> {
    let server =
        servers::start_bubble(&ctx.bubble_bin, Store::Sqlite, Pin::Off, ctx.write_delay_ms)?;
    let _raised = raise_generator();
    let nodes = std::slice::from_ref(&server);
    let label = "sqlite";
    Ok(SingleRun {
        appends: appends_run(ctx, shape, nodes, Routing::Spread, label)?,
        hot_thread: hot_thread(ctx, shape, nodes, label)?,
        delivery: delivery(ctx, shape, nodes, label)?,
    })
}

/// The search's maximum, then the acknowledgement p99 of each fixed-rate
/// step (✗: not sustainable).
fn appends_line(run: &AppendsRun) -> String {
    let fixed: Vec<String> = run
        .fixed
        .iter()
        .map(|s| {
            format!(
                "{} {}{}",
                kps(s.result.target_rate),
                ms(s.result.p99_ms),
                if s.result.sustainable { "" } else { " ✗" }
            )
        })
        .collect();
    if fixed.is_empty() {
        run.search.summary()
    } else {
        format!("{}, ack p99 at {}", run.search.summary(), fixed.join(", "))
    }
}

/// Acknowledged appends/s and conflicts/s of each hot-thread step.
fn hot_line(steps: &[AppendStep]) -> String {
    steps
        .iter()
        .map(|s| {
            format!(
                "at {} acked {}, {:.0} conflicts/s, p99 {}",
                kps(s.result.target_rate),
                kps(s.result.throughput),
                s.conflicts_per_sec.unwrap_or(0.0),
                ms(s.result.p99_ms)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Delivery ratio and latency of each delivery step.
fn delivery_line(steps: &[StepResult]) -> String {
    steps
        .iter()
        .map(|s| {
            format!(
                "at {} deliveries ratio {:.4} p50 {} p99 {}",
                kps(s.target_rate),
                s.ratio,
                ms(s.p50_ms),
                ms(s.p99_ms)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Longest step of a smoke run of this scenario, s, so that its seven to
/// ten steps and four server starts take a few seconds.
const SMOKE_STEP_SECS: f64 = 0.5;

/// Scenario 8.
pub fn scenario(ctx: &Ctx) -> Result<(), BenchError> {
    let smoke_ctx;
    let ctx = if ctx.smoke {
        smoke_ctx = Ctx {
            step_secs: ctx.step_secs.min(SMOKE_STEP_SECS),
            ..ctx.clone()
        };
        &smoke_ctx
    } else {
        ctx
    };
    let shape = Shape::for_ctx(ctx);
    let deployment = Deployment::new(ctx)?;
    let single = run_single(ctx, &shape)?;
    let cluster = run_cluster(ctx, &shape, &deployment)?;
    let placement = format!(
        "nodes unpinned (every core, shared with PostgreSQL and Redis), the generator on cores {:?}{}",
        crate::limits::allowed_cpus(),
        if Raised::by(GENERATOR_NICE).is_some() {
            format!(" at nice -{GENERATOR_NICE}")
        } else {
            String::new()
        }
    );
    println!(
        "cluster ({NODES} nodes, PostgreSQL + Redis; {placement}): appends spread: {}; by thread: {}; hot thread: {}; delivery across nodes: {} | one SQLite node: appends: {}; hot thread: {}; delivery: {}",
        appends_line(&cluster.spread),
        appends_line(&cluster.by_thread),
        hot_line(&cluster.hot_thread),
        delivery_line(&cluster.delivery),
        appends_line(&single.appends),
        hot_line(&single.hot_thread),
        delivery_line(&single.delivery),
    );
    crate::results::append(
        &ctx.results_dir,
        "cluster",
        json!({
            "nodes": NODES,
            "placement": placement,
            "appenders": shape.appenders,
            "threads": shape.threads,
            "subscribers_per_thread": shape.subscribers,
            "cluster": cluster,
            "sqlite": single,
        }),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routing_by_thread_gives_each_thread_to_one_node_at_an_equal_rate() {
        let loads: Vec<_> = (0..3)
            .map(|k| node_load(Routing::ByThread, k, 3, 16, 64))
            .collect();
        let mut seen: Vec<usize> = loads.iter().flat_map(|l| l.0.clone()).collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..16).collect::<Vec<_>>());
        for (threads, share, _) in &loads {
            assert!((share / threads.len() as f64 - 1.0 / 16.0).abs() < 1e-12);
        }
        assert_eq!(loads.iter().map(|l| l.2).sum::<usize>(), 64);
        assert_eq!(loads.iter().map(|l| l.2).collect::<Vec<_>>(), [22, 21, 21]);
    }

    #[test]
    fn spread_routing_appends_every_thread_from_every_node() {
        for k in 0..3 {
            let (threads, share, _) = node_load(Routing::Spread, k, 3, 16, 64);
            assert_eq!(threads.len(), 16);
            assert!((share - 1.0 / 3.0).abs() < 1e-12);
        }
        let (threads, share, conns) = node_load(Routing::ByThread, 0, 1, 16, 64);
        assert_eq!((threads.len(), share, conns), (16, 1.0, 64));
    }
}
