//! Scenario 4: durable appends. Many concurrent appenders (one HTTP
//! keep-alive connection each) append open-loop to a set of threads; a step
//! is sustainable when every append is acknowledged and p99 stays within
//! 20 ms. Acknowledged means durable on the SQLite store.

use serde_json::json;
use std::time::Duration;

use crate::ctx::Ctx;
use crate::error::BenchError;
use crate::proto;
use crate::publisher::{Target, Transport};
use crate::scenarios::{kps, ms};
use crate::servers::{self, Store};
use crate::step::{self, StepEnv, StepResult};

/// The server's counter of store transactions.
const COMMITS: &str = "bubble_store_commits_total";

/// Scenario 4.
pub fn scenario(ctx: &Ctx) -> Result<(), BenchError> {
    let (appenders, threads, start, growth) = if ctx.smoke {
        (4, 2, 200.0, 1)
    } else {
        (super::HTTP_APPENDERS, 16, 2_000.0, 10)
    };
    let mut out = Vec::new();
    let mut parts = Vec::new();
    for store in [Store::Sqlite, Store::Memory] {
        let server = servers::start_bubble(&ctx.bubble_bin, store, ctx.bubble_pin())?;
        let tag = format!(
            "a{}x{}",
            std::process::id(),
            crate::clock::now_ns() % 1_000_000
        );
        let ids: Vec<String> = (0..threads).map(|t| format!("{tag}-{t}")).collect();
        for id in &ids {
            proto::create_thread(server.addr, id)?;
        }
        let targets: Vec<Target> = ids
            .iter()
            .map(|t| proto::http_append(server.addr, t, 64))
            .collect();
        let env = StepEnv {
            servers: std::slice::from_ref(&server),
            server_core: ctx.server_core,
            gen_cores: ctx.gen_cores,
            p99_bound_ms: 20.0,
        };
        let mut per_commit = Vec::new();
        let steps = step::search(
            start,
            1.5,
            growth,
            1,
            |s, rate| -> Result<StepResult, BenchError> {
                let mut plan = ctx.plan(server.addr, Transport::Http, targets.clone(), rate, s);
                plan.conns = appenders;
                plan.drain = Duration::from_secs(20);
                let commits_before = proto::metric(server.addr, COMMITS);
                let r = step::ack_step(&env, std::slice::from_ref(&plan))?;
                let commits = proto::metric(server.addr, COMMITS)
                    .zip(commits_before)
                    .map(|(a, b)| a.saturating_sub(b));
                let appends_per_commit = commits
                    .filter(|&c| c > 0)
                    .map(|c| r.completed as f64 / c as f64);
                per_commit.push(json!({ "step": s, "commits": commits, "appends_per_commit": appends_per_commit }));
                eprintln!(
                    "  appends {} step {s}: {} appends/commit {}",
                    store.name(),
                    r.line(),
                    appends_per_commit.map_or("n/a".into(), |v| format!("{v:.2}"))
                );
                if let Some(e) = &r.first_error {
                    eprintln!("  first error: {e}");
                }
                Ok(r)
            },
        )?;
        if steps.iter().all(|s| s.completed == 0) {
            return Err(BenchError::Check(format!(
                "appends {}: no append was acknowledged",
                store.name()
            )));
        }
        let max = step::max_sustainable(&steps);
        let best = steps
            .iter()
            .filter(|s| s.sustainable)
            .max_by(|a, b| a.throughput.total_cmp(&b.throughput))
            .unwrap_or(&steps[0]);
        parts.push(format!(
            "{} max {} appends/s (p50 {} p99 {} there{})",
            store.name(),
            kps(max),
            ms(best.p50_ms),
            ms(best.p99_ms),
            if steps.last().is_some_and(|s| !s.valid) {
                ", generator-bound"
            } else {
                ""
            }
        ));
        out.push(json!({
            "store": store.name(),
            "appenders": appenders,
            "threads": threads,
            "max_appends": max,
            "steps": steps,
            "commits": per_commit,
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
