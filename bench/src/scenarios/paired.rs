//! Paired rounds of the headline's fixed-rate steps: every server of the
//! comparison is started and subscribed at once (each sits idle while
//! another is measured), then their steps are taken in turn, round after
//! round, the order rotating each round. Right after nchan's and Bubble's
//! channels' step at a rate, the second generator (`bubble-crossgen`)
//! drives the same server at the same rate, so that the two generators'
//! readings of one server are seconds apart, not minutes.
//!
//! A machine whose speed drifts over minutes (a VM's host can move one
//! measurement by a quarter between two runs) moves every server's
//! readings of one round alike. So a server's reading is compared with the
//! peer's reading of the same round and rate, and the headline ratio is
//! the median of those paired ratios over the rounds, beside the spread.

use serde::Serialize;
use serde_json::{json, Value};

use crate::ctx::Ctx;
use crate::error::BenchError;
use crate::scenarios::fanout::{
    crosscheck, start, with_log, Contender, FanoutShape, Rig, P99_BOUND_MS,
};
use crate::scenarios::kps;
use crate::step::{StepResult, MIN_RATIO};

/// One step of the paired rounds, taken by either generator.
#[derive(Debug, Clone, Serialize)]
pub(super) struct Reading {
    /// The server measured; [`crossgen_label`] of it when the second
    /// generator drove it.
    pub server: String,
    /// The round, from 1.
    pub round: usize,
    /// Deliveries/s the step was scheduled at.
    pub rate: f64,
    /// Server CPU per delivery, µs.
    pub us_per_item: f64,
    /// Whether the server sustained the rate.
    pub sustainable: bool,
    /// The generator's own record of the step.
    pub record: Value,
}

impl Reading {
    /// A step of `bubble-bench`.
    fn bench(server: &str, round: usize, step: &StepResult) -> Reading {
        Reading {
            server: server.to_string(),
            round,
            rate: step.target_rate,
            us_per_item: step.us_per_item,
            sustainable: step.sustainable,
            record: serde_json::to_value(step).unwrap_or(Value::Null),
        }
    }

    /// A rate of `bubble-crossgen`: its server CPU per delivery is the
    /// schedstat reading (every thread of the server, as `bubble-bench`
    /// counts them); sustained on the same terms as a `bubble-bench` step.
    fn crossgen(server: &str, round: usize, record: Value) -> Reading {
        let num = |k: &str| record[k].as_f64().unwrap_or(0.0);
        let count = |k: &str| record[k].as_u64().unwrap_or(0);
        let sustainable = record["valid"].as_bool() == Some(true)
            && num("ratio") >= MIN_RATIO
            && num("p99_ms") <= P99_BOUND_MS
            && count("pub_failed") == 0
            && count("subs_lost") == 0;
        Reading {
            server: crossgen_label(server),
            round,
            rate: num("rate"),
            us_per_item: num("us_per_delivery_schedstat"),
            sustainable,
            record,
        }
    }
}

/// The name of `server`'s readings taken by `bubble-crossgen`.
pub(super) fn crossgen_label(server: &str) -> String {
    format!("{server} (crossgen)")
}

/// Whether the second generator drives `who` in each round: nchan and
/// Bubble's channels, the two servers it speaks to (the floor servers
/// speak nchan's protocol but are not what the generators are compared
/// on).
fn crossed(who: Contender) -> bool {
    matches!(who, Contender::Nchan(_) | Contender::BubblePubb)
}

/// The median of `values` (0 when there are none).
fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

/// Takes the fixed-rate steps of `who` in `rounds` paired rounds (see the
/// module's comment).
pub(super) fn readings(
    ctx: &Ctx,
    shape: &FanoutShape,
    who: &[Contender],
    rounds: usize,
) -> Result<Vec<Reading>, BenchError> {
    let started = who
        .iter()
        .map(|&w| start(ctx, w))
        .collect::<Result<Vec<_>, _>>()?;
    let rigs = started
        .iter()
        .map(|(server, load, label)| {
            Rig::wire(ctx, server, shape, *load, label).map_err(|e| with_log(e, server))
        })
        .collect::<Result<Vec<_>, _>>()?;
    for rig in &rigs {
        rig.warm(ctx)?;
    }
    let mut readings = Vec::new();
    let mut step: u8 = 0;
    for round in 0..rounds {
        for &rate in &shape.fixed_rates {
            step = step.saturating_add(1);
            for k in 0..rigs.len() {
                let i = (k + round) % rigs.len();
                let (server, load, label) = &started[i];
                let r = rigs[i]
                    .step(ctx, None, step, rate)
                    .map_err(|e| with_log(e, server))?;
                readings.push(Reading::bench(label, round + 1, &r));
                let Some(proto) = load.crossgen_proto().filter(|_| crossed(who[i])) else {
                    continue;
                };
                let records = crosscheck(ctx, server, shape, proto, &[rate])
                    .map_err(|e| with_log(e, server))?;
                readings.extend(
                    records
                        .into_iter()
                        .map(|r| Reading::crossgen(label, round + 1, r)),
                );
            }
        }
    }
    for rig in rigs {
        rig.stop()?;
    }
    Ok(readings)
}

/// The readings of `server` at `rate`, by round.
fn of<'a>(readings: &'a [Reading], server: &str, rate: f64) -> Vec<&'a Reading> {
    readings
        .iter()
        .filter(|r| r.server == server && r.rate == rate)
        .collect()
}

/// Per server and rate, the median CPU per delivery of its sustained
/// readings; per pair (subject, peer) of `pairs` and rate, the median over
/// rounds of the subject's reading over the peer's of the same round
/// (rounds where both sustained the rate), with the lowest and highest of
/// those ratios. Printed as it is summed up.
pub(super) fn summary(readings: &[Reading], shape: &FanoutShape, pairs: &[(&str, &str)]) -> Value {
    let mut servers: Vec<&str> = Vec::new();
    for r in readings {
        if !servers.contains(&r.server.as_str()) {
            servers.push(&r.server);
        }
    }
    let mut medians = Vec::new();
    for &server in &servers {
        for &rate in &shape.fixed_rates {
            let taken = of(readings, server, rate);
            let mut us: Vec<f64> = taken
                .iter()
                .filter(|r| r.sustainable)
                .map(|r| r.us_per_item)
                .collect();
            let sustained = us.len();
            let us = median(&mut us);
            println!(
                "paired: {server} at {}: median {us:.2} us/delivery ({sustained} of {} readings sustained)",
                kps(rate),
                taken.len()
            );
            medians.push(json!({
                "server": server,
                "rate": rate,
                "us_per_item": us,
                "sustained": sustained,
                "readings": taken.len(),
            }));
        }
    }
    let mut ratios = Vec::new();
    for &(subject, peer) in pairs {
        for &rate in &shape.fixed_rates {
            let mut paired: Vec<f64> = of(readings, subject, rate)
                .iter()
                .filter_map(|s| {
                    let p = of(readings, peer, rate)
                        .into_iter()
                        .find(|p| p.round == s.round)?;
                    (s.sustainable && p.sustainable && p.us_per_item > 0.0)
                        .then(|| s.us_per_item / p.us_per_item)
                })
                .collect();
            let rounds = paired.len();
            let m = median(&mut paired);
            let (low, high) = (
                paired.first().copied().unwrap_or(0.0),
                paired.last().copied().unwrap_or(0.0),
            );
            println!(
                "paired: {subject} at {}: {m:.2}x {peer} (median of {rounds} rounds, {low:.2}-{high:.2})",
                kps(rate)
            );
            ratios.push(json!({
                "server": subject,
                "vs": peer,
                "rate": rate,
                "median": m,
                "low": low,
                "high": high,
                "rounds": rounds,
            }));
        }
    }
    json!({ "medians": medians, "ratios": ratios })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::step::tests::outcome;

    fn reading(server: &str, round: usize, us: f64, sustainable: bool) -> Reading {
        let step = StepResult {
            us_per_item: us,
            ..outcome(1, 20_000.0, sustainable)
        };
        Reading::bench(server, round, &step)
    }

    #[test]
    fn ratios_pair_readings_of_the_same_round() {
        let shape = FanoutShape {
            subs: 2,
            channels: 1,
            payload: 64,
            sample_every: 1,
            fixed_rates: vec![20_000.0],
            factor: 2.0,
            growth_steps: 1,
            bubble_write_delay_ms: None,
        };
        // The machine slows down in round 2: both servers cost more, their
        // ratio does not move; round 3's peer did not sustain the rate.
        let readings = [
            reading("a", 1, 8.0, true),
            reading("p", 1, 10.0, true),
            reading("a", 2, 12.0, true),
            reading("p", 2, 15.0, true),
            reading("a", 3, 9.0, true),
            reading("p", 3, 30.0, false),
        ];
        let out = summary(&readings, &shape, &[("a", "p")]);
        let r = &out["ratios"][0];
        assert_eq!(r["rounds"], 2);
        assert!((r["median"].as_f64().unwrap() - 0.8).abs() < 1e-9);
        let m = &out["medians"];
        assert_eq!(m[0]["us_per_item"], 9.0);
        assert_eq!(m[1]["sustained"], 2);
        assert_eq!(m[1]["us_per_item"], 12.5);
    }

    #[test]
    fn a_crossgen_rate_is_sustained_on_the_terms_of_a_bench_step() {
        let record = |valid: bool, ratio: f64, p99: f64| {
            json!({
                "rate": 40_000.0,
                "valid": valid,
                "ratio": ratio,
                "p99_ms": p99,
                "pub_failed": 0,
                "subs_lost": 0,
                "us_per_delivery_schedstat": 7.5,
            })
        };
        let ok = Reading::crossgen("nchan", 2, record(true, 1.0, 3.0));
        assert_eq!(ok.server, "nchan (crossgen)");
        assert_eq!((ok.round, ok.rate, ok.us_per_item), (2, 40_000.0, 7.5));
        assert!(ok.sustainable);
        let generator_bound = Reading::crossgen("nchan", 2, record(false, 1.0, 3.0));
        let lost = Reading::crossgen("nchan", 2, record(true, 0.99, 3.0));
        let slow = Reading::crossgen("nchan", 2, record(true, 1.0, P99_BOUND_MS + 1.0));
        for r in [generator_bound, lost, slow] {
            assert!(!r.sustainable);
        }
    }

    #[test]
    fn the_median_of_an_even_count_is_the_mean_of_the_middle_two() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&mut []), 0.0);
    }
}
