//! Scenario 9: the channel fan-out of scenario 1 with Pusher protocol 7
//! subscribers (`/app/:key`) beside the same fan-out with pubb subscribers
//! (`/socket`), on fresh servers, same shape and rates, same publications:
//! what the second wire format costs per delivery.

use serde_json::json;

use crate::ctx::Ctx;
use crate::error::BenchError;
use crate::scenarios::fanout::{measure, FanoutShape, Load};
use crate::servers::Store;

/// `a / b`, or 0 when `b` is 0.
fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        0.0
    }
}

/// Runs pubb then Pusher subscribers and records both with the per-delivery
/// CPU ratio at each fixed rate.
pub fn scenario(ctx: &Ctx) -> Result<(), BenchError> {
    let shape = FanoutShape::for_ctx(ctx);
    let mut runs = Vec::new();
    for (load, label) in [(Load::Pubb, "bubble-pubb"), (Load::Pusher, "bubble-pusher")] {
        let server = ctx.start_bubble(Store::Memory)?;
        let run = measure(ctx, &server, &shape, load, label)?;
        println!("{}", run.line());
        runs.push(run);
    }
    let ratios: Vec<_> = runs[1]
        .fixed
        .iter()
        .zip(&runs[0].fixed)
        .map(|(pusher, pubb)| {
            let cpu = ratio(pusher.us_per_item, pubb.us_per_item);
            println!(
                "pusher at {:.0}/s: cpu/delivery {cpu:.3}x pubb",
                pusher.target_rate
            );
            json!({ "rate": pusher.target_rate, "cpu_pusher_vs_pubb": cpu })
        })
        .collect();
    crate::results::append(
        &ctx.results_dir,
        "fanout-pusher",
        json!({ "shape": shape, "runs": runs, "ratios": ratios }),
    )?;
    Ok(())
}
