//! The simulated deployment: engines sharing one store, the broker between
//! them, and the host loop that performs every output. Faults are steps:
//! the host answers reads in any order or fails them, commits batches late
//! and in groups, lets a second writer move a thread's version, delivers
//! broker messages late or (thread changes) never, stalls sockets, jumps
//! time and restarts nodes.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::cluster::ClusterMessage;
use crate::http::{HttpRequest, HttpResponse, Method};
use crate::ids::{BatchId, ClaimId, ConnId, Millis, PrincipalId, ReadId, RequestId, ThreadId};
use crate::io::{Input, Output};
use crate::store::{Batch, MemoryStore, ReadQuery};
use crate::{AppConfig, Config, Engine};

use super::check::Facts;
use super::clients::{ChannelClient, WsClient};
use super::step::THREADS;

/// The simulated clock's start.
const T0: u64 = 1_796_031_850_000;

/// The principals clients act as: the admin, two people and an agent.
pub(crate) const PRINCIPALS: [&str; 4] = ["root", "alice", "bob", "helper-agent"];

/// The one app of the pubb API.
pub(crate) const APP: &str = "app-1";
pub(crate) const APP_KEY: &str = "key-1";
pub(crate) const APP_SECRET: &str = "secret-1";

/// The thread id of thread index `i`.
pub(crate) fn thread_id(i: u8) -> ThreadId {
    ThreadId::parse(&format!("t{i}")).unwrap_or_else(|_| unreachable!("t<n> is a valid id"))
}

/// The thread index of `id`, if it is one of the run's.
pub(crate) fn thread_index(id: &str) -> Option<u8> {
    let n: u8 = id.strip_prefix('t')?.parse().ok()?;
    (n < THREADS).then_some(n)
}

/// The engines' configuration: small caches and pages so that eviction
/// and paging happen, rate limits out of the way.
pub(crate) fn config() -> Config {
    let mut config = Config::default();
    config.admins.push(PrincipalId::new(PRINCIPALS[0]));
    for p in PRINCIPALS {
        config
            .auth
            .tokens
            .push((format!("token-{p}"), PrincipalId::new(p)));
    }
    config.apps.push(AppConfig {
        id: APP.into(),
        key: APP_KEY.into(),
        secret: APP_SECRET.into(),
        max_connections: None,
        client_events: false,
        webhooks: Vec::new(),
    });
    config.cluster = true;
    config.limits.backlog_page = 2;
    config.limits.thread_cache = 2;
    config.limits.frame_rate = 1_000_000;
    config.limits.command_rate = 1_000_000;
    config
}

/// How long an idempotency key of a publication is held.
pub(crate) fn retention_ms() -> u64 {
    config().limits.idempotency_retention_ms
}

/// What a request was, to check its answer.
#[derive(Debug, Clone)]
pub(crate) enum Call {
    Append {
        thread: u8,
        key: Option<String>,
    },
    History {
        thread: u8,
        who: usize,
        from: u64,
        limit: usize,
        /// The latest commit of the thread the node had seen when the
        /// request was sent: its answer may rest on that state or a later one.
        since: u64,
    },
    Create {
        thread: u8,
    },
    Grant,
    Auth,
    Publish {
        key: Option<u8>,
        data: String,
    },
}

/// A message on its way through the broker.
#[derive(Debug, Clone)]
pub(crate) enum Relayed {
    Cluster(ClusterMessage),
    Changed {
        thread: ThreadId,
        head_seq: u64,
        version: u64,
    },
}

/// One pending idempotency-key claim.
pub(crate) struct PendingClaim {
    pub(crate) claim: ClaimId,
    pub(crate) key: String,
    pub(crate) value: String,
    pub(crate) ttl_ms: u64,
}

/// One engine and what its host holds for it.
pub(crate) struct Node {
    pub(crate) name: String,
    pub(crate) engine: Engine,
    pub(crate) reads: Vec<(ReadId, ReadQuery)>,
    pub(crate) batches: VecDeque<(BatchId, Batch)>,
    pub(crate) claims: Vec<PendingClaim>,
    pub(crate) drains: BTreeSet<ConnId>,
    pub(crate) requests: BTreeMap<RequestId, Call>,
    /// Per thread, the highest head this engine has certainly seen.
    pub(crate) known_head: BTreeMap<ThreadId, u64>,
    /// Per thread, the latest commit this engine has certainly seen.
    pub(crate) known_commit: BTreeMap<ThreadId, u64>,
}

/// Who holds a connection.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Owner {
    Ws(u8),
    Channel(u8),
}

/// What the broker holds of one node (of the one app).
#[derive(Debug, Default)]
pub(crate) struct NodeRows {
    /// The `seq` of the node's last state message.
    pub(crate) seq: u64,
    /// Presence members: `(channel, user)` with `user_info`.
    pub(crate) members: BTreeMap<(String, String), Option<String>>,
    /// Subscribers per channel.
    pub(crate) counts: BTreeMap<String, u64>,
    /// When the node reports webhooks from (its hello).
    pub(crate) since: Option<u64>,
}

/// The whole simulated deployment.
pub(crate) struct World {
    pub(crate) now: Millis,
    pub(crate) store: MemoryStore,
    pub(crate) nodes: Vec<Node>,
    pub(crate) seed: u64,
    pub(crate) restarts: u64,
    pub(crate) next_conn: u64,
    pub(crate) next_req: u64,
    pub(crate) counter: u64,
    pub(crate) relays: BTreeMap<(usize, usize), VecDeque<Relayed>>,
    /// What the broker holds of each node: its channel state.
    pub(crate) rows: BTreeMap<usize, NodeRows>,
    pub(crate) broker_keys: BTreeMap<String, (String, Millis)>,
    pub(crate) ws: BTreeMap<u8, WsClient>,
    pub(crate) channels: BTreeMap<u8, ChannelClient>,
    pub(crate) owners: BTreeMap<ConnId, Owner>,
    pub(crate) facts: Facts,
    pub(crate) auth_answer: Option<serde_json::Value>,
    /// `throughSeq`s to check once the outputs that carry their batches are out.
    pub(crate) deferred: Vec<super::clients::Opened>,
    /// Heads committed for a node, known to it once it has been told.
    pub(crate) learned: Vec<(ThreadId, u64, u64)>,
    /// Every input and output, when tracing.
    pub(crate) trace: Option<Vec<String>>,
    pub(crate) violation: Option<String>,
}

impl World {
    /// `nodes` engines over an empty store, their ids drawn from `seed`.
    pub(crate) fn new(seed: u64, nodes: usize) -> World {
        let mut world = World {
            now: Millis(T0),
            store: MemoryStore::default(),
            nodes: Vec::new(),
            seed,
            restarts: 0,
            next_conn: 1,
            next_req: 1,
            counter: 0,
            relays: BTreeMap::new(),
            rows: BTreeMap::new(),
            broker_keys: BTreeMap::new(),
            ws: BTreeMap::new(),
            channels: BTreeMap::new(),
            owners: BTreeMap::new(),
            facts: Facts::default(),
            auth_answer: None,
            deferred: Vec::new(),
            learned: Vec::new(),
            trace: None,
            violation: None,
        };
        for n in 0..nodes {
            let node = world.fresh_node(n);
            world.nodes.push(node);
        }
        world
    }

    pub(crate) fn fresh_node(&mut self, n: usize) -> Node {
        self.restarts += 1;
        let seed = self
            .seed
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .wrapping_add(self.restarts);
        let mut config = config();
        config.node = format!("node-{n}");
        Node {
            name: config.node.clone(),
            engine: Engine::new(config, seed),
            reads: Vec::new(),
            batches: VecDeque::new(),
            claims: Vec::new(),
            drains: BTreeSet::new(),
            requests: BTreeMap::new(),
            known_head: BTreeMap::new(),
            known_commit: BTreeMap::new(),
        }
    }

    /// Records the first invariant breach of the run.
    pub(crate) fn fail(&mut self, message: String) {
        if self.violation.is_none() {
            self.violation = Some(message);
        }
    }

    /// The breach found so far, if any.
    pub(crate) fn violation(&self) -> Option<&str> {
        self.violation.as_deref()
    }

    /// A fresh connection id (unique across nodes and restarts).
    pub(crate) fn conn_id(&mut self) -> ConnId {
        let conn = ConnId(self.next_conn);
        self.next_conn += 1;
        conn
    }

    // --- driving an engine ------------------------------------------------

    /// Hands `input` to node `n` and performs every output it causes.
    pub(crate) fn feed(&mut self, n: usize, input: Input<'_>) {
        if let Some(trace) = &mut self.trace {
            trace.push(format!("{} node {n} <- {input:?}", self.now.0));
        }
        if let Err(misuse) = self.nodes[n].engine.handle(self.now, input) {
            self.fail(format!("the simulated host misused node {n}: {misuse}"));
            return;
        }
        self.perform(n);
    }

    fn perform(&mut self, n: usize) {
        let mut closes = Vec::new();
        let mut pongs = Vec::new();
        while let Some(out) = self.nodes[n].engine.poll_output() {
            if let Some(trace) = &mut self.trace {
                trace.push(format!("    node {n} -> {out:?}"));
            }
            match out {
                Output::Send { conn, frame } => self.deliver(n, conn, &frame),
                Output::SendAll { conns, frame } => {
                    for conn in conns {
                        self.deliver(n, conn, &frame);
                    }
                }
                Output::Ping { conn } => pongs.push(conn),
                Output::Close { conn, .. } => closes.push(conn),
                Output::Respond { req, response } => self.respond(n, req, &response),
                Output::Persist { batch, writes } => {
                    self.facts.issued(&writes);
                    self.nodes[n].batches.push_back((batch, writes));
                }
                Output::Read { read, query } => self.nodes[n].reads.push((read, query)),
                Output::Broadcast { message } => self.broadcast(n, message),
                Output::Claim {
                    claim,
                    key,
                    value,
                    ttl_ms,
                    ..
                } => self.nodes[n].claims.push(PendingClaim {
                    claim,
                    key,
                    value,
                    ttl_ms,
                }),
                Output::WantDrained { conn } => {
                    if self.owners.contains_key(&conn) {
                        self.nodes[n].drains.insert(conn);
                    }
                }
                Output::Webhook { url, .. } => {
                    self.fail(format!(
                        "node {n} sent a webhook to {url}: the app has none"
                    ));
                }
                Output::FetchKeys => {
                    self.fail(format!("node {n} asked for a key set: none is configured"));
                }
            }
        }
        self.end_outputs();
        if self.trace.is_some() {
            let positions: Vec<String> = self
                .ws
                .values()
                .filter(|c| c.node == n)
                .map(|c| {
                    format!(
                        "{:?}: {:?}",
                        c.conn,
                        self.nodes[n].engine.thread_subscriptions(c.conn)
                    )
                })
                .collect();
            if let Some(trace) = &mut self.trace {
                trace.push(format!(
                    "    node {n} subscriptions {}",
                    positions.join(", ")
                ));
            }
        }
        for conn in closes {
            if self.forget_conn(conn) {
                self.feed(n, Input::Closed { conn });
            }
        }
        for conn in pongs {
            if self.owners.contains_key(&conn) && !self.stalled(conn) {
                self.feed(n, Input::Pong { conn });
            }
        }
    }

    /// Whether the socket `conn` stopped reading.
    pub(crate) fn stalled(&self, conn: ConnId) -> bool {
        match self.owners.get(&conn) {
            Some(Owner::Ws(slot)) => self.ws.get(slot).is_some_and(|c| c.stalled),
            _ => false,
        }
    }

    /// Drops the client holding `conn`; false when none did.
    pub(crate) fn forget_conn(&mut self, conn: ConnId) -> bool {
        let Some(owner) = self.owners.remove(&conn) else {
            return false;
        };
        match owner {
            Owner::Ws(slot) => {
                self.ws.remove(&slot);
            }
            Owner::Channel(slot) => {
                self.channels.remove(&slot);
            }
        }
        for node in &mut self.nodes {
            node.drains.remove(&conn);
        }
        true
    }

    fn deliver(&mut self, n: usize, conn: ConnId, frame: &str) {
        let Some(owner) = self.owners.get(&conn).copied() else {
            return;
        };
        let Ok(value) = serde_json::from_str::<serde_json::Value>(frame) else {
            self.fail(format!("node {n} sent a frame that is not JSON: {frame}"));
            return;
        };
        match owner {
            Owner::Ws(slot) => self.ws_frame(n, slot, &value),
            Owner::Channel(slot) => self.channel_frame(slot, &value),
        }
    }

    fn respond(&mut self, n: usize, req: RequestId, response: &HttpResponse) {
        let Some(call) = self.nodes[n].requests.remove(&req) else {
            self.fail(format!("node {n} answered {req:?} twice or unasked"));
            return;
        };
        self.check_response(call, response);
    }

    pub(crate) fn broadcast(&mut self, n: usize, message: ClusterMessage) {
        if let ClusterMessage::Hello { since } = message {
            self.rows.entry(n).or_default().since = Some(since);
        }
        if let Some(seq) = message.seq() {
            let rows = self.rows.entry(n).or_default();
            rows.seq = seq;
            match &message {
                ClusterMessage::MemberJoined {
                    channel,
                    user_id,
                    user_info,
                    ..
                } => {
                    let member = (channel.clone(), user_id.clone());
                    rows.members.insert(member, user_info.clone());
                }
                ClusterMessage::MemberLeft {
                    channel, user_id, ..
                } => {
                    rows.members.remove(&(channel.clone(), user_id.clone()));
                }
                ClusterMessage::Subscribers { channel, count, .. } if *count == 0 => {
                    rows.counts.remove(channel);
                }
                ClusterMessage::Subscribers { channel, count, .. } => {
                    rows.counts.insert(channel.clone(), *count);
                }
                _ => {}
            }
        }
        for to in 0..self.nodes.len() {
            if to != n {
                self.relays
                    .entry((n, to))
                    .or_default()
                    .push_back(Relayed::Cluster(message.clone()));
            }
        }
    }

    /// Sends an HTTP request to node `n`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn http(
        &mut self,
        n: usize,
        method: Method,
        authorization: &str,
        target: &str,
        body: &str,
        key: Option<&str>,
        call: Call,
    ) {
        let req = RequestId(self.next_req);
        self.next_req += 1;
        self.nodes[n].requests.insert(req, call);
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let request = HttpRequest {
            method,
            path,
            query,
            authorization: Some(authorization),
            idempotency_key: key,
            body: body.as_bytes(),
        };
        self.feed(n, Input::Http { req, request });
    }
}
