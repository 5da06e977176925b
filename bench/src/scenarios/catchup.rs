//! Scenario 5: catch-up. A thread of 100,000 events; one subscriber with
//! `fromSeq=1`; time from connecting to the last event, and the server's
//! memory while it streams the backlog.

use serde_json::json;
use std::time::Duration;

use crate::clock::now_ns;
use crate::ctx::Ctx;
use crate::error::BenchError;
use crate::pool::Pool;
use crate::proto;
use crate::publisher::{self, Transport};
use crate::scenarios::ms;
use crate::servers::Store;

/// Scenario 5.
pub fn scenario(ctx: &Ctx) -> Result<(), BenchError> {
    let events: u64 = if ctx.smoke { 2_000 } else { 100_000 };
    let mut runs = Vec::new();
    let mut parts = Vec::new();
    for store in [Store::Memory, Store::Sqlite] {
        let server = ctx.start_bubble(store)?;
        let id = format!("c{}x{}", std::process::id(), now_ns() % 1_000_000);
        proto::create_thread(server.addr, &id)?;
        let rate = 20_000.0;
        let mut plan = ctx.plan(
            server.addr,
            Transport::Http,
            vec![proto::http_append(server.addr, &id, 64)],
            rate,
            1,
        );
        plan.conns = 8;
        plan.duration = Duration::from_secs_f64(events as f64 / rate);
        plan.max_backlog = usize::MAX;
        plan.drain = Duration::from_secs(300);
        let fill_start = now_ns();
        let fill = publisher::run(&plan)?;
        let fill_secs = (now_ns() - fill_start) as f64 / 1e9;
        if fill.ok != events {
            return Err(BenchError::Check(format!(
                "catch-up {}: {} of {events} appends acknowledged; first error: {:?}",
                store.name(),
                fill.ok,
                fill.first_error
            )));
        }
        std::thread::sleep(Duration::from_millis(500));
        let rss_before = server.rss_kib();
        let mut peak = rss_before;
        let t0 = now_ns();
        let pool = Pool::start(
            vec![proto::thread_subscriber(
                server.addr,
                std::slice::from_ref(&id),
                1,
                false,
            )],
            1,
            1,
            ctx.sub_coalesce,
        )?;
        let deadline = t0 + 120_000_000_000;
        let mut got = 0;
        while now_ns() < deadline {
            peak = peak.max(server.rss_kib());
            got = pool.with_stats(|s| s.delivered[1]);
            if got >= events {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(30));
        let stats = pool.stop();
        if got < events {
            return Err(BenchError::Check(format!(
                "catch-up {}: {got} of {events} events arrived",
                store.name()
            )));
        }
        let drain_ms = (stats.last_delivery_ns.saturating_sub(t0)) as f64 / 1e6;
        parts.push(format!(
            "{} {events} events in {} (rss {} -> peak {} MiB)",
            store.name(),
            ms(drain_ms),
            rss_before / 1024,
            peak / 1024
        ));
        runs.push(json!({
            "store": store.name(),
            "events": events,
            "fill_secs": fill_secs,
            "drain_ms": drain_ms,
            "rss_before_kib": rss_before,
            "rss_peak_during_drain_kib": peak,
            "rss_growth_kib": peak.saturating_sub(rss_before),
            "process_peak_rss_kib": server.peak_rss_kib(),
        }));
    }
    println!("catchup: {}", parts.join("; "));
    crate::results::append(&ctx.results_dir, "catchup", json!({ "runs": runs }))?;
    Ok(())
}
