//! A deterministic simulator of whole deployments (feature `sim`).
//!
//! One seed draws a run: two or three clustered engines sharing one
//! [`MemoryStore`](crate::store::MemoryStore), `/v1/ws` and `/socket`
//! clients connecting to any of them, HTTP requests of both APIs, and a
//! host that performs every output late, out of order or not at all (see
//! [`Step`]). The simulator owns no clock and no randomness beyond the
//! seed: the same seed always runs the same steps to the same outcome.
//!
//! After every step it checks the invariants (docs/simulation.md): every
//! thread's seqs are gapless; every subscription delivers its range once,
//! in order; `throughSeq` is a head the engine had at registration; every
//! acknowledged or delivered event is durable at its seq; nothing reaches
//! a principal who cannot read the thread; presence views equal the users
//! connected; a repeated idempotency key never creates a second event or
//! publication. A failing run is shrunk to the fewest steps that still
//! fail, and [`Failure`] prints the seed and that replay.
//!
//! ```
//! let stats = bubble_core::sim::check_seed(7, 200).expect("seed 7 passes");
//! assert_eq!(stats.steps, 200);
//! ```

use std::fmt;

use crate::http::Method;

mod check;
mod clients;
mod host;
mod session;
mod step;
mod world;

pub use session::{ChannelView, Simulation, Snapshot, WsView};
pub use step::Step;

use step::{Bytes, Choices, Rng};
use world::{Call, World, PRINCIPALS};

/// What a run that passed did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Steps run.
    pub steps: usize,
    /// Engines in the deployment.
    pub nodes: usize,
    /// Durable events at the end, over all threads.
    pub events: u64,
}

/// A run that broke an invariant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// The run's seed.
    pub seed: u64,
    /// The breach, as first seen in the shrunk replay.
    pub message: String,
    /// The fewest steps found that still fail (a replay of [`replay`]).
    pub steps: Vec<Step>,
    /// Their indices in the seed's full run.
    pub kept: Vec<usize>,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "simulation seed {} failed: {}", self.seed, self.message)?;
        let kept: Vec<String> = self.kept.iter().map(usize::to_string).collect();
        writeln!(
            f,
            "replay: cargo run -p bubble-core --example simulate --features sim -- --seed {} --keep {}",
            self.seed,
            kept.join(",")
        )?;
        writeln!(f, "minimal replay ({} steps):", self.steps.len())?;
        writeln!(f, "bubble_core::sim::replay({}, &[", self.seed)?;
        for step in &self.steps {
            writeln!(f, "    Step::{step:?},")?;
        }
        write!(f, "]);")
    }
}

/// The engines a seed's deployment has (2 or 3).
pub fn nodes_for(seed: u64) -> usize {
    2 + usize::try_from(Rng::new(seed ^ 0x6E6F_6465).below(2)).unwrap_or(0)
}

/// The first `count` steps seed `seed` draws.
pub fn steps_for(seed: u64, count: usize) -> Vec<Step> {
    let mut rng = Rng::new(seed);
    (0..count).map(|_| Step::draw(&mut rng)).collect()
}

/// The most steps [`steps_from_bytes`] decodes: a seed's run in the test
/// command is as long, and shorter runs keep a fuzzer fast.
pub const MAX_BYTE_STEPS: usize = 400;

/// Steps decoded from `bytes`, each choice a seed would draw read from the
/// bytes instead (about eight bytes a step), until they run out or
/// [`MAX_BYTE_STEPS`]: any byte string is a valid run, which is what a
/// fuzzer needs to drive the simulator with inputs of its own.
pub fn steps_from_bytes(bytes: &[u8]) -> Vec<Step> {
    let mut choices = Bytes::new(bytes);
    let mut steps = Vec::new();
    while !choices.is_empty() && steps.len() < MAX_BYTE_STEPS {
        steps.push(Step::draw(&mut choices));
    }
    steps
}

/// Runs `steps` on seed `seed`'s deployment, then completes everything and
/// checks the eventual invariants. `Err` carries the step index of the
/// breach (`steps.len()` for the final check) and what broke.
pub fn replay(seed: u64, steps: &[Step]) -> Result<Stats, (usize, String)> {
    run(seed, steps, &mut None)
}

/// Like [`replay`], and also returns every step, input and output in order
/// (the run's full story, for reading a failure).
pub fn trace(seed: u64, steps: &[Step]) -> (Result<Stats, (usize, String)>, Vec<String>) {
    let mut trace = Some(Vec::new());
    let result = run(seed, steps, &mut trace);
    (result, trace.unwrap_or_default())
}

fn run(
    seed: u64,
    steps: &[Step],
    trace: &mut Option<Vec<String>>,
) -> Result<Stats, (usize, String)> {
    let mut sim = Simulation::with_steps(seed, steps.to_vec());
    let recording = trace.take().map(|lines| sim.record(lines)).is_some();
    while sim.step().is_some() {}
    if recording {
        *trace = Some(sim.recorded());
    }
    sim.outcome()
        .cloned()
        .unwrap_or_else(|| Err((steps.len(), "the run did not end".into())))
}

fn head_of(world: &World, thread: u8) -> u64 {
    use crate::store::{Backend, ReadQuery, ReadResult};
    match world.store.read(&ReadQuery::Thread {
        thread_id: world::thread_id(thread),
    }) {
        Ok(ReadResult::Thread(Some(record))) => record.head_seq,
        _ => 0,
    }
}

/// Runs seed `seed` for `count` steps; a failure comes back shrunk.
pub fn check_seed(seed: u64, count: usize) -> Result<Stats, Failure> {
    let steps = steps_for(seed, count);
    match replay(seed, &steps) {
        Ok(stats) => Ok(stats),
        Err((at, message)) => Err(shrink(seed, &steps, at, message)),
    }
}

/// The steps of seed `seed` whose indices are in `kept`, in order.
pub fn kept_steps(seed: u64, kept: &[usize]) -> Vec<Step> {
    let count = kept.iter().max().map_or(0, |m| m + 1);
    let all = steps_for(seed, count);
    kept.iter().filter_map(|&i| all.get(i).copied()).collect()
}

/// Drops steps while the run still fails: the steps after the breach,
/// then ever smaller chunks, then single steps (bounded work).
fn shrink(seed: u64, steps: &[Step], at: usize, message: String) -> Failure {
    let mut kept: Vec<usize> = (0..steps.len().min(at + 1)).collect();
    let mut message = match replay(seed, &pick(steps, &kept)) {
        Err((_, m)) => m,
        Ok(_) => {
            kept = (0..steps.len()).collect();
            message
        }
    };
    let mut budget = 3_000usize;
    let mut chunk = kept.len() / 2;
    while chunk >= 1 && budget > 0 {
        let mut start = 0;
        let mut removed_any = false;
        while start < kept.len() && budget > 0 {
            budget -= 1;
            let end = (start + chunk).min(kept.len());
            let candidate: Vec<usize> = kept[..start].iter().chain(&kept[end..]).copied().collect();
            match replay(seed, &pick(steps, &candidate)) {
                Err((_, m)) => {
                    kept = candidate;
                    message = m;
                    removed_any = true;
                }
                Ok(_) => start = end,
            }
        }
        if !removed_any {
            chunk /= 2;
        }
    }
    Failure {
        seed,
        message,
        steps: pick(steps, &kept),
        kept,
    }
}

fn pick(steps: &[Step], kept: &[usize]) -> Vec<Step> {
    kept.iter().map(|&i| steps[i]).collect()
}

/// Performs one step on the deployment.
fn apply(world: &mut World, step: Step) {
    let nodes = world.nodes.len();
    let node = |n: u8| usize::from(n) % nodes;
    let who = |w: u8| usize::from(w) % PRINCIPALS.len();
    match step {
        Step::WsOpen {
            slot,
            node: n,
            who: w,
        } => world.ws_open(slot, node(n), who(w)),
        Step::WsClose { slot } => world.ws_close(slot),
        Step::WsSubscribe { slot, thread, from } => world.ws_subscribe(slot, thread, from),
        Step::WsUnsubscribe { slot, thread } => world.ws_unsubscribe(slot, thread),
        Step::WsAppend { slot, thread } => world.ws_append(slot, thread),
        Step::Append {
            node: n,
            who: w,
            thread,
            key,
        } => {
            world.counter += 1;
            let (run, header) = if key == 0 {
                (format!("http-{}", world.counter), None)
            } else {
                (format!("key-{key}"), Some(format!("append-key-{key}")))
            };
            let body = serde_json::json!({ "type": "run_started", "runId": run });
            world.http(
                node(n),
                Method::Post,
                &bearer(who(w)),
                &format!("/v1/threads/{}/events", world::thread_id(thread)),
                &body.to_string(),
                header.as_deref(),
                Call::Append {
                    thread,
                    key: header.clone(),
                },
            );
        }
        Step::History {
            node: n,
            who: w,
            thread,
            from,
            limit,
        } => {
            let from = u64::from(from.max(1));
            let limit = usize::from(limit) + 1;
            let id = world::thread_id(thread);
            let since = world.nodes[node(n)]
                .known_commit
                .get(&id)
                .copied()
                .unwrap_or(0);
            world.http(
                node(n),
                Method::Get,
                &bearer(who(w)),
                &format!("/v1/threads/{id}/events?fromSeq={from}&limit={limit}"),
                "",
                None,
                Call::History {
                    thread,
                    who: who(w),
                    from,
                    limit,
                    since,
                },
            );
        }
        Step::Create {
            node: n,
            who: w,
            thread,
        } => {
            let body = serde_json::json!({ "threadId": world::thread_id(thread) });
            world.http(
                node(n),
                Method::Post,
                &bearer(who(w)),
                "/v1/threads",
                &body.to_string(),
                None,
                Call::Create { thread },
            );
        }
        Step::Grant {
            node: n,
            thread,
            who: w,
            role,
        } => {
            let target = format!(
                "/v1/threads/{}/grants/{}",
                world::thread_id(thread),
                PRINCIPALS[who(w)]
            );
            let (method, body) = match role {
                0 => (Method::Put, r#"{"role":"reader"}"#),
                1 => (Method::Put, r#"{"role":"member"}"#),
                2 => (Method::Put, r#"{"role":"thread_manager"}"#),
                3 => (Method::Put, r#"{"role":"owner"}"#),
                _ => (Method::Delete, ""),
            };
            world.http(
                node(n),
                method,
                &bearer(0),
                &target,
                body,
                None,
                Call::Grant,
            );
        }
        Step::ChannelOpen {
            slot,
            node: n,
            legacy,
        } => world.channel_open(slot, node(n), legacy),
        Step::ChannelClose { slot } => world.channel_close(slot),
        Step::ChannelSubscribe { slot, channel } => world.channel_subscribe(slot, channel),
        Step::PresenceJoin { slot } => world.presence_join(slot),
        Step::PresenceLeave { slot } => world.presence_leave(slot),
        Step::Publish {
            node: n,
            channel,
            key,
        } => world.publish(node(n), channel, key),
        Step::Read {
            node: n,
            pick,
            fail,
        } => world.answer_read(node(n), usize::from(pick), fail),
        Step::Persist {
            node: n,
            count,
            unavailable,
        } => world.persist(node(n), usize::from(count), unavailable),
        Step::SecondWriter { thread, announce } => world.second_writer(thread, announce),
        Step::Relay { from, to, drop } => {
            let from = usize::from(from) % (nodes + 1);
            let to = node(to);
            if from != to {
                world.relay(from, to, drop);
            }
        }
        Step::Claim { node: n, pick } => world.claim(node(n), usize::from(pick)),
        Step::Drain { node: n, pick } => world.drain(node(n), usize::from(pick)),
        Step::Stall { slot } => world.ws_stall(slot),
        Step::Time => world.advance_time(),
        Step::Recheck { node: n } => world.feed(node(n), crate::Input::Recheck),
        Step::Restart { node: n, keep } => world.restart(node(n), usize::from(keep)),
        Step::Settle => {
            world.quiesce();
            world.check_settled();
        }
    }
}

fn bearer(who: usize) -> String {
    format!("Bearer token-{}", PRINCIPALS[who])
}
