//! A run driven one step at a time, with a view of the deployment between
//! steps (what a page shows while the simulation plays).

use serde::Serialize;

use super::clients::{Presence, Sub};
use super::step::THREADS;
use super::world::{thread_id, World, PRINCIPALS};
use super::{apply, head_of, Stats, Step};

/// One seed's run, stepped by the caller.
pub struct Simulation {
    seed: u64,
    steps: Vec<Step>,
    next: usize,
    world: World,
    outcome: Option<Result<Stats, (usize, String)>>,
}

/// What the deployment looks like between two steps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Snapshot {
    /// The run's seed.
    pub seed: u64,
    /// Steps run so far, out of `total`.
    pub done: usize,
    /// Steps of the run (the final settle not counted).
    pub total: usize,
    /// The simulated clock, in ms since the epoch.
    pub now_ms: u64,
    /// Engines in the deployment.
    pub nodes: usize,
    /// Each thread's durable head, in thread order (0 when absent).
    pub heads: Vec<u64>,
    /// The open `/v1/ws` clients.
    pub ws: Vec<WsView>,
    /// The open `/socket` clients.
    pub channels: Vec<ChannelView>,
    /// The first invariant broken, if any.
    pub violation: Option<String>,
}

/// One `/v1/ws` client in a [`Snapshot`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WsView {
    /// Its slot.
    pub slot: u8,
    /// The node it is connected to.
    pub node: usize,
    /// Its principal.
    pub principal: String,
    /// Whether it stopped reading.
    pub stalled: bool,
    /// Per subscribed thread, the next seq it expects (`None` while opening).
    pub subscriptions: Vec<(String, Option<u64>)>,
}

/// One `/socket` client in a [`Snapshot`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChannelView {
    /// Its slot.
    pub slot: u8,
    /// The node it is connected to.
    pub node: usize,
    /// The user it joins presence as.
    pub user: String,
    /// The public channels it subscribed to.
    pub channels: Vec<String>,
    /// The presence members it has been told of, when it joined.
    pub members: Option<Vec<String>>,
    /// Publications it received.
    pub received: usize,
}

impl Simulation {
    /// Seed `seed`'s run of `count` steps, not started.
    pub fn new(seed: u64, count: usize) -> Simulation {
        Simulation::with_steps(seed, super::steps_for(seed, count))
    }

    /// A run of `steps` on seed `seed`'s deployment, not started.
    pub fn with_steps(seed: u64, steps: Vec<Step>) -> Simulation {
        Simulation {
            seed,
            world: World::new(seed, super::nodes_for(seed)),
            steps,
            next: 0,
            outcome: None,
        }
    }

    /// Records every step, input and output from now on.
    pub(crate) fn record(&mut self, trace: Vec<String>) {
        self.world.trace = Some(trace);
    }

    /// What was recorded.
    pub(crate) fn recorded(&mut self) -> Vec<String> {
        self.world.trace.take().unwrap_or_default()
    }

    /// Runs the next step (after the last one, the final settle and its
    /// checks) and returns it; `None` once the run is over.
    pub fn step(&mut self) -> Option<Step> {
        if self.outcome.is_some() {
            return None;
        }
        let Some(step) = self.steps.get(self.next).copied() else {
            apply(&mut self.world, Step::Settle);
            self.outcome = Some(self.conclude(self.steps.len()));
            return Some(Step::Settle);
        };
        if let Some(trace) = &mut self.world.trace {
            trace.push(format!("step {}: {step:?}", self.next));
        }
        apply(&mut self.world, step);
        self.world.check_store();
        if self.world.violation().is_some() {
            self.outcome = Some(self.conclude(self.next));
        }
        self.next += 1;
        Some(step)
    }

    /// How the run ended: its figures, or the step index of the breach and
    /// what broke. `None` while it runs.
    pub fn outcome(&self) -> Option<&Result<Stats, (usize, String)>> {
        self.outcome.as_ref()
    }

    fn conclude(&self, at: usize) -> Result<Stats, (usize, String)> {
        match self.world.violation() {
            Some(message) => Err((at, message.to_owned())),
            None => Ok(Stats {
                steps: self.steps.len(),
                nodes: self.world.nodes.len(),
                events: (0..THREADS).map(|t| head_of(&self.world, t)).sum(),
            }),
        }
    }

    /// The deployment as it stands.
    pub fn snapshot(&self) -> Snapshot {
        let world = &self.world;
        let ws = world
            .ws
            .iter()
            .map(|(slot, client)| WsView {
                slot: *slot,
                node: client.node,
                principal: PRINCIPALS[client.who].to_owned(),
                stalled: client.stalled,
                subscriptions: client
                    .subs
                    .iter()
                    .filter_map(|(t, sub)| {
                        let next = match sub {
                            Sub::Open { next, .. } => Some(*next),
                            Sub::Subscribing { .. } | Sub::Doomed { .. } => None,
                            Sub::Leftover => return None,
                        };
                        Some((thread_id(*t).as_str().to_owned(), next))
                    })
                    .collect(),
            })
            .collect();
        let channels = world
            .channels
            .iter()
            .map(|(slot, client)| ChannelView {
                slot: *slot,
                node: client.node,
                user: client.user.clone(),
                channels: client.public.iter().cloned().collect(),
                members: match &client.presence {
                    Presence::In(members) => Some(members.iter().cloned().collect()),
                    _ => None,
                },
                received: client.delivered.len(),
            })
            .collect();
        Snapshot {
            seed: self.seed,
            done: self.next,
            total: self.steps.len(),
            now_ms: world.now.0,
            nodes: world.nodes.len(),
            heads: (0..THREADS).map(|t| head_of(world, t)).collect(),
            ws,
            channels,
            violation: world.violation().map(str::to_owned),
        }
    }
}
