//! Scenario 6: idle connections. Open N subscribed WebSockets, let them
//! sit, and divide the server's RSS growth by N. Source addresses are
//! spread over 127.0.0.x so more than one address's ephemeral ports serve.

use serde_json::json;
use std::net::Ipv4Addr;
use std::time::Duration;

use crate::ctx::Ctx;
use crate::error::BenchError;
use crate::pool::{ConnSpec, Pool};
use crate::proto;
use crate::servers::{self, Server, Store};

/// Open-files headroom besides the connections themselves.
const FD_MARGIN: u64 = 512;

fn measure(
    ctx: &Ctx,
    server: &Server,
    n: usize,
    sources: u8,
) -> Result<serde_json::Value, BenchError> {
    std::thread::sleep(Duration::from_millis(300));
    let before = server.rss_kib();
    let nchan = server.name == "nchan";
    let specs: Vec<ConnSpec> = (0..n)
        .map(|i| {
            let ch = format!("idle{}", i % 10);
            let mut s = if nchan {
                proto::nchan_subscriber(server.addr, &ch, false)
            } else {
                proto::pubb_subscriber(server.addr, &ch, false)
            };
            if sources > 1 {
                s.local_ip = Some(Ipv4Addr::new(127, 0, 0, 1 + (i % sources as usize) as u8));
            }
            s
        })
        .collect();
    let t0 = crate::clock::now_ns();
    let pool = Pool::start(specs, ctx.workers(), 256, ctx.sub_coalesce)?;
    pool.wait_ready(Duration::from_secs(300))?;
    let connect_secs = (crate::clock::now_ns() - t0) as f64 / 1e9;
    std::thread::sleep(Duration::from_secs(if ctx.smoke { 1 } else { 3 }));
    let after = server.rss_kib();
    let closed = pool.with_stats(|s| s.closed);
    pool.stop();
    let per_conn = after.saturating_sub(before) as f64 * 1024.0 / n as f64;
    println!(
        "idle {}: {n} connections, server rss {} -> {} MiB, {:.1} KiB per connection{}",
        server.name,
        before / 1024,
        after / 1024,
        per_conn / 1024.0,
        if closed > 0 {
            format!(" ({closed} closed by the server)")
        } else {
            String::new()
        }
    );
    Ok(json!({
        "server": server.name,
        "connections": n,
        "source_addresses": sources,
        "connect_secs": connect_secs,
        "rss_before_kib": before,
        "rss_after_kib": after,
        "bytes_per_connection": per_conn,
        "closed": closed,
    }))
}

/// Scenario 6.
pub fn scenario(ctx: &Ctx) -> Result<(), BenchError> {
    let nofile = crate::limits::raise_nofile();
    let (small, large) = if ctx.smoke {
        (200, 400)
    } else {
        (10_000, 50_000)
    };
    let mut runs = Vec::new();
    {
        let server = ctx.start_bubble(Store::Memory)?;
        runs.push(measure(ctx, &server, small, 1)?);
    }
    {
        let server = servers::start_nchan(&ctx.nchan_conf, ctx.server_core)?;
        runs.push(measure(ctx, &server, small, 1)?);
    }
    // Past the open-files limit the server cannot hold `large` sockets; the
    // largest round count that fits stands in for it, and says so.
    let fits = usize::try_from(nofile.saturating_sub(FD_MARGIN)).unwrap_or(usize::MAX);
    let n = large.min(fits / 1000 * 1000);
    if n < large {
        println!(
            "idle bubble: {large} connections need an open-files limit of {}; the hard limit is {nofile} here (raising it needs CAP_SYS_RESOURCE): measuring {n}",
            large as u64 + FD_MARGIN
        );
    }
    if n > small {
        let server = ctx.start_bubble(Store::Memory)?;
        let mut run = measure(ctx, &server, n, 4)?;
        run["wanted_connections"] = json!(large);
        run["nofile_limit"] = json!(nofile);
        runs.push(run);
    } else {
        runs.push(json!({ "server": "bubble", "connections": large, "skipped": format!("RLIMIT_NOFILE hard limit {nofile}") }));
    }
    crate::results::append(&ctx.results_dir, "idle", json!({ "runs": runs }))?;
    Ok(())
}
