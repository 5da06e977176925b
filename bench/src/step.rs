//! One measured step at a fixed rate, and the saturation search built from
//! steps.

use serde::Serialize;

use crate::pool::{Pool, Stats};
use crate::procstat::{CpuMeter, CpuTimes};
use crate::publisher::{self, Plan, Report};
use crate::servers::Server;

/// Generator CPU above this share of its cores makes a step invalid.
/// `bubble-crossgen` applies the same share to itself (its own `SATURATED`,
/// kept apart so that the two generators share no code): change both
/// together.
pub const GEN_SATURATED: f64 = 0.95;
/// More late sends (over `publisher::LATE_NS`) than this share makes a
/// step invalid.
pub const MAX_LATE: f64 = 0.05;
/// Run-queue waiting of the generator's threads (in cores) above which a
/// step is invalid: the generator's core was oversubscribed (by itself or by
/// other processes) and it may not have read or sent in time.
pub const GEN_MAX_WAIT: f64 = 0.25;
/// Steal on the server's core (in cores) above which a step is invalid:
/// the hypervisor ran something else while the server had work, so the
/// step's latencies carry those pauses and its verdict says more about the
/// host than about the server.
pub const MAX_SERVER_STEAL: f64 = 0.1;
/// Delivery ratio a sustainable step must reach.
pub const MIN_RATIO: f64 = 0.999;

/// The measured outcome of one step.
#[derive(Debug, Clone, Serialize)]
pub struct StepResult {
    /// Step number (stamp step).
    pub step: u8,
    /// Target rate of the measured items (deliveries or appends) per second.
    pub target_rate: f64,
    /// Seconds of sending.
    pub secs: f64,
    /// Items the schedule called for.
    pub expected: u64,
    /// Items that arrived.
    pub completed: u64,
    /// `completed / expected`.
    pub ratio: f64,
    /// `completed / secs`.
    pub throughput: f64,
    /// Latency percentiles, milliseconds.
    pub p50_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// 99.9th percentile, ms.
    pub p999_ms: f64,
    /// The slowest sample, ms.
    pub max_ms: f64,
    /// Latency samples behind the percentiles.
    pub samples: u64,
    /// Scheduled send to HTTP answer, 99th percentile, ms.
    pub ack_p99_ms: f64,
    /// Server CPU, in cores (its processes' user + system time).
    pub server_cores: f64,
    /// Of which user space, in cores, as the kernel's tick sampling splits
    /// it (coarse; the profile gives the reliable split).
    pub server_user_cores: f64,
    /// `ksoftirqd` of the server's core, in cores: network work done for
    /// the server outside its own time (0 when the server is not pinned).
    pub softirq_cores: f64,
    /// Server CPU per completed item, µs (`server_cores` / throughput).
    pub us_per_item: f64,
    /// Server CPU plus `ksoftirqd` per completed item, µs.
    pub with_softirq_us_per_item: f64,
    /// Generator CPU, in cores.
    pub gen_cores: f64,
    /// Busy CPU of the whole machine (server, generator and everything
    /// else, e.g. a database), in cores.
    pub machine_cores: f64,
    /// Time the server's threads were runnable but not running, in cores.
    pub server_wait: f64,
    /// Time the generator's threads were runnable but not running, in cores.
    pub gen_wait: f64,
    /// Share of sends more than 5 ms behind schedule.
    pub late_share: f64,
    /// Send lateness, 99th percentile, ms.
    pub late_p99_ms: f64,
    /// Sends dropped because the server stopped reading.
    pub dropped: u64,
    /// Error answers.
    pub errors: u64,
    /// The first error answer.
    pub first_error: Option<String>,
    /// Subscribers the server closed during the step.
    pub closed: u64,
    /// One-minute load average of the machine at the end of the step.
    pub loadavg: f64,
    /// Steal of the whole machine, in cores: time the hypervisor gave this
    /// guest's CPUs to something else while they had work (other tenants).
    pub steal_cores: f64,
    /// Of which on the server's core, in cores (0 when it is not pinned).
    pub server_core_steal: f64,
    /// The generator saturated or fell behind.
    pub generator_bound: bool,
    /// The server's core lost more than [`MAX_SERVER_STEAL`] to steal.
    pub stolen: bool,
    /// Neither generator-bound nor stolen from.
    pub valid: bool,
    /// Valid, ratio ≥ 0.999, p99 within the bound and no errors.
    pub sustainable: bool,
}

impl StepResult {
    /// A one-line summary.
    pub fn line(&self) -> String {
        format!(
            "rate {:>9.0}/s got {:>9.0}/s ratio {:.4} p50 {:.2} ms p99 {:.2} ms p99.9 {:.2} ms max {:.2} ms ack-p99 {:.2} ms server {:.2} cores = {:.2} us/item (+ksoftirqd {:.2} us) (wait {:.2}) gen {:.2} cores (wait {:.2}) machine {:.2} cores steal {:.2} (server core {:.2}) late {:.3} dropped {} load {:.1}{}{}",
            self.target_rate,
            self.throughput,
            self.ratio,
            self.p50_ms,
            self.p99_ms,
            self.p999_ms,
            self.max_ms,
            self.ack_p99_ms,
            self.server_cores,
            self.us_per_item,
            self.with_softirq_us_per_item,
            self.server_wait,
            self.gen_cores,
            self.gen_wait,
            self.machine_cores,
            self.steal_cores,
            self.server_core_steal,
            self.late_share,
            self.dropped,
            self.loadavg,
            if self.generator_bound {
                " INVALID(generator)"
            } else if self.stolen {
                " INVALID(steal)"
            } else {
                ""
            },
            if self.sustainable { "" } else { " unsustainable" },
        )
    }
}

/// Inputs common to every step of a run.
pub struct StepEnv<'a> {
    /// The servers under test (the nodes of a cluster), measured together.
    pub servers: &'a [Server],
    /// The core they are pinned to, if any.
    pub server_core: Option<usize>,
    /// Cores the generator may use.
    pub gen_cores: usize,
    /// p99 bound of a sustainable step, ms.
    pub p99_bound_ms: f64,
}

/// CPU of the server and of the generator over a step.
struct Cpu {
    server: f64,
    server_user: f64,
    softirq: f64,
    server_wait: f64,
    gen: f64,
    gen_wait: f64,
    machine: f64,
    steal: f64,
    server_core_steal: f64,
}

impl Cpu {
    /// Whether the generator, on `gen_cores` cores and with `late_share` of
    /// its sends late, could not keep up (see [`GEN_SATURATED`],
    /// [`MAX_LATE`], [`GEN_MAX_WAIT`]).
    fn generator_bound(&self, gen_cores: usize, late_share: f64) -> bool {
        self.gen >= GEN_SATURATED * gen_cores as f64
            || late_share > MAX_LATE
            || self.gen_wait > GEN_MAX_WAIT
    }

    /// Whether the server's core lost more than [`MAX_SERVER_STEAL`].
    fn stolen(&self) -> bool {
        self.server_core_steal > MAX_SERVER_STEAL
    }
}

/// The meters of one step.
struct Meters {
    server: CpuMeter,
    generator: CpuMeter,
    /// The machine's CPU times, and the clock, at the start.
    machine: (Option<CpuTimes>, u64),
}

impl Meters {
    fn start(env: &StepEnv) -> Meters {
        Meters {
            server: CpuMeter::start(
                env.servers.iter().flat_map(Server::pids).collect(),
                env.server_core,
            ),
            generator: CpuMeter::start(vec![std::process::id()], None),
            machine: (CpuTimes::read(env.server_core), crate::clock::now_ns()),
        }
    }

    /// The step's CPU so far; `env` is the step's, as at the start.
    fn read(&self, env: &StepEnv) -> Cpu {
        let machine = self.machine_since_start(env.server_core);
        Cpu {
            server: self.server.cores(),
            server_user: self.server.user_cores(),
            softirq: self.server.softirq_cores(),
            server_wait: self.server.waiting(),
            gen: self.generator.cores(),
            gen_wait: self.generator.waiting(),
            machine: machine.busy,
            steal: machine.steal,
            server_core_steal: machine.server_core_steal,
        }
    }

    /// The machine since `start`, in cores, from one reading of its CPU
    /// times, `server_core`'s steal apart (all zero when they cannot be
    /// read).
    fn machine_since_start(&self, server_core: Option<usize>) -> MachineCores {
        let (Some(before), Some(now)) = (self.machine.0, CpuTimes::read(server_core)) else {
            return MachineCores::default();
        };
        let wall = (crate::clock::now_ns() - self.machine.1) as f64 / 1e9;
        if wall <= 0.0 {
            return MachineCores::default();
        }
        let server_core_steal = match (before.core_steal, now.core_steal) {
            (Some(before), Some(now)) => (now - before) / wall,
            _ => 0.0,
        };
        MachineCores {
            busy: (now.cpus as f64 - (now.idle - before.idle) / wall).max(0.0),
            steal: (now.steal - before.steal) / wall,
            server_core_steal,
        }
    }
}

/// The machine over a step, in cores.
#[derive(Default)]
struct MachineCores {
    /// Busy: its CPUs less their idle time.
    busy: f64,
    /// Stolen by the hypervisor, all CPUs together.
    steal: f64,
    /// Stolen from the server's core.
    server_core_steal: f64,
}

/// The machine's one-minute load average.
pub fn loadavg() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|t| t.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0.0)
}

/// p50, p99, p99.9 and max in ms, and the number of samples.
fn percentiles(h: &hdrhistogram::Histogram<u64>) -> (f64, f64, f64, f64, u64) {
    if h.is_empty() {
        return (0.0, 0.0, 0.0, 0.0, 0);
    }
    let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    (
        ms(0.5),
        ms(0.99),
        ms(0.999),
        h.max() as f64 / 1000.0,
        h.len(),
    )
}

#[allow(clippy::too_many_arguments)]
fn judge(
    env: &StepEnv,
    step: u8,
    target_rate: f64,
    rep: &Report,
    expected: u64,
    completed: u64,
    hist: &hdrhistogram::Histogram<u64>,
    cpu: &Cpu,
    closed: u64,
    last_ns: u64,
) -> StepResult {
    // Until the last completion: stragglers after the last send count, and
    // so does the time they took.
    let end = rep.span_ns.1.max(last_ns);
    let secs = ((end - rep.span_ns.0) as f64 / 1e9).max(1e-3);
    let ratio = if expected == 0 {
        0.0
    } else {
        completed as f64 / expected as f64
    };
    let (p50, p99, p999, max, samples) = percentiles(hist);
    let late_share = if rep.scheduled == 0 {
        0.0
    } else {
        rep.late as f64 / rep.scheduled as f64
    };
    let generator_bound = cpu.generator_bound(env.gen_cores, late_share);
    let stolen = cpu.stolen();
    let valid = !generator_bound && !stolen;
    let throughput = completed as f64 / secs;
    let per_item = |cores: f64| {
        if throughput > 0.0 {
            cores / throughput * 1e6
        } else {
            0.0
        }
    };
    let sustainable = valid
        && ratio >= MIN_RATIO
        && p99 <= env.p99_bound_ms
        && rep.errors == 0
        && rep.dropped == 0
        && closed == 0;
    StepResult {
        step,
        target_rate,
        secs,
        expected,
        completed,
        ratio,
        throughput,
        p50_ms: p50,
        p99_ms: p99,
        p999_ms: p999,
        max_ms: max,
        samples,
        ack_p99_ms: percentiles(&rep.ack).1,
        server_cores: cpu.server,
        server_user_cores: cpu.server_user,
        softirq_cores: cpu.softirq,
        us_per_item: per_item(cpu.server),
        with_softirq_us_per_item: per_item(cpu.server + cpu.softirq),
        gen_cores: cpu.gen,
        machine_cores: cpu.machine,
        server_wait: cpu.server_wait,
        gen_wait: cpu.gen_wait,
        late_share,
        late_p99_ms: percentiles(&rep.lateness).1,
        dropped: rep.dropped,
        errors: rep.errors,
        first_error: rep.first_error.clone(),
        closed,
        loadavg: loadavg(),
        steal_cores: cpu.steal,
        server_core_steal: cpu.server_core_steal,
        generator_bound,
        stolen,
        valid,
        sustainable,
    }
}

/// The step number of `plans` (the first's; all share it) and their rate
/// together, messages/s.
fn step_and_rate(plans: &[Plan]) -> (u8, f64) {
    (
        plans.first().map_or(0, |p| p.step),
        plans.iter().map(|p| p.rate).sum(),
    )
}

/// Publishes `plans` at once (their rates in messages/s) while `pool`
/// receives, each message fanning out to `fanout` subscribers; waits for
/// stragglers and judges the step by deliveries.
pub fn delivery_step(
    env: &StepEnv,
    pool: &Pool,
    plans: &[Plan],
    fanout: u64,
) -> Result<StepResult, publisher::PublishError> {
    let (step, rate) = step_and_rate(plans);
    let s = step as usize;
    let closed_before = pool.with_stats(|st: &Stats| st.closed);
    let meters = Meters::start(env);
    let rep = publisher::run_all(plans)?;
    let cpu = meters.read(env);
    let expected = rep.scheduled * fanout;
    let mut last = (0u64, crate::clock::now_ns());
    let deadline = crate::clock::now_ns() + 10_000_000_000;
    loop {
        std::thread::sleep(std::time::Duration::from_millis(50));
        let got = pool.with_stats(|st| st.delivered[s]);
        let now = crate::clock::now_ns();
        if got >= expected || now > deadline {
            break;
        }
        if got != last.0 {
            last = (got, now);
        } else if now - last.1 > 1_000_000_000 {
            break;
        }
    }
    std::thread::sleep(std::time::Duration::from_millis(40));
    let (completed, hist, closed, last) = pool.with_stats(|st| {
        (
            st.delivered[s],
            st.hist[s].clone(),
            st.closed - closed_before,
            st.last_delivery_ns,
        )
    });
    Ok(judge(
        env,
        step,
        rate * fanout as f64,
        &rep,
        expected,
        completed,
        &hist,
        &cpu,
        closed,
        last,
    ))
}

/// Runs `plans` at once and judges them by their HTTP answers (appends
/// acknowledged).
pub fn ack_step(env: &StepEnv, plans: &[Plan]) -> Result<StepResult, publisher::PublishError> {
    let (step, rate) = step_and_rate(plans);
    let meters = Meters::start(env);
    let rep = publisher::run_all(plans)?;
    let cpu = meters.read(env);
    let hist = rep.ack.clone();
    Ok(judge(
        env,
        step,
        rate,
        &rep,
        rep.scheduled,
        rep.ok,
        &hist,
        &cpu,
        0,
        rep.last_ok_ns,
    ))
}

/// The rates of a saturation search: from `start`, grows by `factor`
/// while steps are sustainable (or shrinks by it until one is, when the
/// first is not), then bisects three times between the last good and the
/// first bad rate. A miss that would bound the maximum (one above a
/// sustained rate) is measured once more, and only a second miss bounds
/// it: one burst of noise in a step must not stop a search a third below
/// the server's capacity. A step whose generator was starved (a shared
/// machine) is measured once more; a second generator-bound step, or a
/// server that closed subscribers, ends the search. The first step also
/// warms a fresh server (connections, caches, the store's files): when it
/// misses, it is measured once more before the search shrinks. `run`
/// measures one rate at one step number.
pub fn search<E>(
    start: f64,
    factor: f64,
    max_moves: usize,
    first_step: u8,
    mut run: impl FnMut(u8, f64) -> Result<StepResult, E>,
) -> Result<Vec<StepResult>, E> {
    let mut out: Vec<StepResult> = Vec::new();
    let mut step = first_step;
    let mut good: Option<f64> = None;
    let mut bad: Option<f64> = None;
    let mut retried: Option<f64> = None;
    let mut rate = start;
    let mut warmed = false;
    let room = |step: u8| (step as usize) < crate::stamp::MAX_STEPS;
    let mut measure =
        |step: &mut u8, rate: f64, out: &mut Vec<StepResult>| -> Result<StepResult, E> {
            let r = run(*step, rate)?;
            *step += 1;
            if r.valid || !room(*step) {
                return Ok(r);
            }
            out.push(r);
            let again = run(*step, rate)?;
            *step += 1;
            Ok(again)
        };
    for _ in 0..max_moves.max(1) {
        if !room(step) {
            break;
        }
        let r = measure(&mut step, rate, &mut out)?;
        let (ok, invalid, closed) = (r.sustainable, !r.valid, r.closed > 0);
        out.push(r);
        // Past a sustained rate, an invalid step ends the search: the
        // generator gave out before the server. Before any rate was
        // sustained, the rate is beyond this pair, so the search shrinks as
        // from an unsustainable step. Subscribers the server closed are
        // gone for every later step, so that always ends it.
        if closed || (invalid && good.is_some()) {
            return Ok(out);
        }
        if !ok && !invalid && !warmed && good.is_none() && bad.is_none() {
            warmed = true;
            continue;
        }
        warmed = true;
        if ok {
            good = Some(rate);
            match bad.take() {
                // The shrinking found a sustained rate: the miss just above
                // it is measured once more before it bounds the search (once
                // a rate was sustained, a miss is only kept to end it).
                Some(above) => {
                    retried = Some(above);
                    rate = above;
                }
                None => rate *= factor,
            }
        } else if good.is_some() && retried != Some(rate) {
            retried = Some(rate);
        } else {
            bad = Some(rate);
            if good.is_some() {
                break;
            }
            rate /= factor;
        }
    }
    if let (Some(mut g), Some(mut b)) = (good, bad) {
        for _ in 0..3 {
            if !room(step) {
                break;
            }
            let mid = (g + b) / 2.0;
            let mut r = measure(&mut step, mid, &mut out)?;
            if !r.sustainable && r.valid && r.closed == 0 && room(step) {
                out.push(r);
                r = measure(&mut step, mid, &mut out)?;
            }
            let (ok, stop) = (r.sustainable, !r.valid || r.closed > 0);
            out.push(r);
            if stop {
                break;
            }
            if ok {
                g = mid;
            } else {
                b = mid;
            }
        }
    }
    Ok(out)
}

/// The highest throughput among sustainable steps.
pub fn max_sustainable(steps: &[StepResult]) -> f64 {
    steps
        .iter()
        .filter(|s| s.sustainable)
        .map(|s| s.throughput)
        .fold(0.0, f64::max)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn outcome(step: u8, rate: f64, sustainable: bool) -> StepResult {
        StepResult {
            step,
            target_rate: rate,
            secs: 1.0,
            expected: rate as u64,
            completed: rate as u64,
            ratio: 1.0,
            throughput: rate,
            p50_ms: 1.0,
            p99_ms: if sustainable { 1.0 } else { 100.0 },
            p999_ms: 1.0,
            max_ms: 1.0,
            samples: 1,
            ack_p99_ms: 1.0,
            server_cores: 0.5,
            server_user_cores: 0.1,
            softirq_cores: 0.0,
            us_per_item: 1.0,
            with_softirq_us_per_item: 1.0,
            gen_cores: 0.5,
            machine_cores: 1.0,
            server_wait: 0.0,
            gen_wait: 0.0,
            late_share: 0.0,
            late_p99_ms: 0.0,
            dropped: 0,
            errors: 0,
            first_error: None,
            closed: 0,
            loadavg: 0.0,
            steal_cores: 0.0,
            server_core_steal: 0.0,
            generator_bound: false,
            stolen: false,
            valid: true,
            sustainable,
        }
    }

    /// A server that sustains up to `capacity`, except for the steps in `misses`.
    fn rates(capacity: f64, misses: &[u8]) -> Vec<(f64, bool)> {
        judged(capacity, misses, f64::INFINITY)
            .into_iter()
            .map(|(rate, ok, _)| (rate, ok))
            .collect()
    }

    /// Like `rates`, with every step above `keeps_up` invalid (the
    /// generator fell behind); each step as (rate, sustainable, valid).
    fn judged(capacity: f64, misses: &[u8], keeps_up: f64) -> Vec<(f64, bool, bool)> {
        let steps = search(1000.0, 2.0, 10, 1, |step, rate| {
            let valid = rate <= keeps_up;
            let ok = valid && rate <= capacity && !misses.contains(&step);
            Ok::<_, ()>(StepResult {
                generator_bound: !valid,
                valid,
                ..outcome(step, rate, ok)
            })
        })
        .expect("search");
        steps
            .iter()
            .map(|s| (s.target_rate, s.sustainable, s.valid))
            .collect()
    }

    #[test]
    fn an_invalid_start_shrinks_the_rate() {
        assert_eq!(
            judged(400.0, &[], 600.0),
            [
                (1000.0, false, false),
                (1000.0, false, false),
                (500.0, false, true),
                (250.0, true, true),
                (500.0, false, true),
                (375.0, true, true),
                (437.5, false, true),
                (437.5, false, true),
                (406.25, false, true),
                (406.25, false, true)
            ]
        );
    }

    #[test]
    fn steal_on_the_servers_core_invalidates_a_step_the_generator_kept_up_with() {
        let cpu = |gen, server_core_steal| Cpu {
            server: 0.5,
            server_user: 0.1,
            softirq: 0.0,
            server_wait: 0.0,
            gen,
            gen_wait: 0.0,
            machine: 1.0,
            steal: server_core_steal,
            server_core_steal,
        };
        let quiet = cpu(0.5, 0.05);
        assert!(!quiet.generator_bound(1, 0.0) && !quiet.stolen());
        let stolen = cpu(0.5, 0.2);
        assert!(!stolen.generator_bound(1, 0.0) && stolen.stolen());
        let saturated = cpu(0.96, 0.0);
        assert!(saturated.generator_bound(1, 0.0) && !saturated.stolen());
        assert!(quiet.generator_bound(1, MAX_LATE * 2.0));
    }

    #[test]
    fn a_subscriber_closed_by_the_server_ends_the_search() {
        let steps = search(1000.0, 2.0, 10, 1, |step, rate| {
            Ok::<_, ()>(StepResult {
                closed: 1,
                ..outcome(step, rate, false)
            })
        })
        .expect("search");
        assert_eq!(steps.len(), 1);
    }

    #[test]
    fn an_invalid_step_past_a_sustained_rate_ends_the_search() {
        assert_eq!(
            judged(f64::INFINITY, &[], 3000.0),
            [
                (1000.0, true, true),
                (2000.0, true, true),
                (4000.0, false, false),
                (4000.0, false, false)
            ]
        );
    }

    #[test]
    fn grows_until_a_miss_measured_twice_then_bisects_three_times() {
        assert_eq!(
            rates(5000.0, &[]),
            [
                (1000.0, true),
                (2000.0, true),
                (4000.0, true),
                (8000.0, false),
                (8000.0, false),
                (6000.0, false),
                (6000.0, false),
                (5000.0, true),
                (5500.0, false),
                (5500.0, false)
            ]
        );
    }

    #[test]
    fn a_miss_that_holds_when_measured_again_lets_the_search_grow() {
        // The noisy step costs one step more and changes nothing else.
        let mut expected = rates(5000.0, &[]);
        expected.insert(2, (4000.0, false));
        assert_eq!(rates(5000.0, &[3]), expected);
    }

    #[test]
    fn a_missed_first_step_is_measured_once_more_before_shrinking() {
        assert_eq!(
            rates(1500.0, &[1]),
            [
                (1000.0, false),
                (1000.0, true),
                (2000.0, false),
                (2000.0, false),
                (1500.0, true),
                (1750.0, false),
                (1750.0, false),
                (1625.0, false),
                (1625.0, false)
            ]
        );
    }

    #[test]
    fn after_shrinking_the_miss_above_the_sustained_rate_is_measured_again() {
        assert_eq!(
            rates(700.0, &[]),
            [
                (1000.0, false),
                (1000.0, false),
                (500.0, true),
                (1000.0, false),
                (750.0, false),
                (750.0, false),
                (625.0, true),
                (687.5, true)
            ]
        );
    }
}
