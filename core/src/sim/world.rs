//! The simulated deployment: engines sharing one store, the broker between
//! them, and the host loop that performs every output. Faults are steps:
//! the host answers reads in any order or fails them, commits batches late
//! and in groups, lets a second writer move a thread's version, delivers
//! broker messages late or (thread changes) never, stalls sockets, jumps
//! time and restarts nodes.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::cluster::{ClaimOutcome, ClusterMessage, PresenceEntry};
use crate::http::{HttpRequest, HttpResponse, Method};
use crate::ids::{BatchId, ClaimId, ConnId, Millis, PrincipalId, ReadId, RequestId, ThreadId};
use crate::io::{Input, Output};
use crate::store::{Backend, Batch, MemoryStore, ReadQuery, ReadResult, StoreError, Write};
use crate::{AppConfig, Config, Engine};

use super::check::Facts;
use super::clients::{ChannelClient, WsClient};
use super::step::THREADS;

/// The simulated clock's start.
const T0: u64 = 1_796_031_850_000;

/// The principals clients act as; the first is the admin.
pub(crate) const PRINCIPALS: [&str; 4] = ["root", "alice", "bob", "carol"];

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
    claim: ClaimId,
    key: String,
    value: String,
    ttl_ms: u64,
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

/// The whole simulated deployment.
pub(crate) struct World {
    pub(crate) now: Millis,
    pub(crate) store: MemoryStore,
    pub(crate) nodes: Vec<Node>,
    seed: u64,
    restarts: u64,
    next_conn: u64,
    next_req: u64,
    pub(crate) counter: u64,
    relays: BTreeMap<(usize, usize), VecDeque<Relayed>>,
    presence_rows: BTreeMap<(usize, String, String), Option<String>>,
    broker_keys: BTreeMap<String, (String, Millis)>,
    pub(crate) ws: BTreeMap<u8, WsClient>,
    pub(crate) channels: BTreeMap<u8, ChannelClient>,
    pub(crate) owners: BTreeMap<ConnId, Owner>,
    pub(crate) facts: Facts,
    pub(crate) auth_answer: Option<serde_json::Value>,
    /// `throughSeq`s to check once the outputs that carry their batches are out.
    pub(crate) deferred: Vec<super::clients::Opened>,
    /// Heads committed for a node, known to it once it has been told.
    learned: Vec<(ThreadId, u64, u64)>,
    /// Every input and output, when tracing.
    pub(crate) trace: Option<Vec<String>>,
    violation: Option<String>,
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
            presence_rows: BTreeMap::new(),
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

    fn fresh_node(&mut self, n: usize) -> Node {
        self.restarts += 1;
        let seed = self
            .seed
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .wrapping_add(self.restarts);
        Node {
            name: format!("node-{n}"),
            engine: Engine::new(config(), seed),
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
    fn stalled(&self, conn: ConnId) -> bool {
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

    fn broadcast(&mut self, n: usize, message: ClusterMessage) {
        match &message {
            ClusterMessage::MemberJoined {
                channel,
                user_id,
                user_info,
                ..
            } => {
                self.presence_rows
                    .insert((n, channel.clone(), user_id.clone()), user_info.clone());
            }
            ClusterMessage::MemberLeft {
                channel, user_id, ..
            } => {
                self.presence_rows
                    .remove(&(n, channel.clone(), user_id.clone()));
            }
            _ => {}
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

    // --- the host's faults and completions ----------------------------------

    /// Answers (or fails) one pending read of node `n`.
    pub(crate) fn answer_read(&mut self, n: usize, pick: usize, fail: bool) {
        let reads = &mut self.nodes[n].reads;
        if reads.is_empty() {
            return;
        }
        let (read, query) = reads.remove(pick % reads.len());
        let result = if fail {
            Err(StoreError::Unavailable("injected read failure".into()))
        } else {
            self.store.read(&query)
        };
        if let Ok(ReadResult::Thread(Some(record))) = &result {
            self.saw_version(n, &record.thread_id, record.version);
        }
        self.feed(n, Input::ReadDone { read, result });
    }

    /// Commits the first `count` pending batches of node `n` and reports them.
    pub(crate) fn persist(&mut self, n: usize, count: usize) {
        let count = count.min(self.nodes[n].batches.len());
        let taken: Vec<(BatchId, Batch)> = self.nodes[n].batches.drain(..count).collect();
        let mut reports = Vec::new();
        for (batch, writes) in taken {
            let refused = self.commit(&writes);
            reports.push((batch, refused));
        }
        let mut last = None;
        for (batch, refused) in reports {
            if refused.is_empty() {
                last = Some(batch);
                continue;
            }
            if let Some(done) = last.take() {
                self.feed(n, Input::Persisted { batch: done });
            }
            self.feed(
                n,
                Input::PersistFailed {
                    batch,
                    conflicts: refused,
                },
            );
        }
        if let Some(batch) = last {
            self.feed(n, Input::Persisted { batch });
        }
        for (thread, head, version) in std::mem::take(&mut self.learned) {
            self.saw_head(n, &thread, head);
            self.saw_version(n, &thread, version);
        }
    }

    /// Applies one batch to the store, recording who could read each event
    /// it makes durable; returns the refused threads.
    fn commit(&mut self, writes: &Batch) -> Vec<ThreadId> {
        let before: Vec<_> = writes
            .threads
            .iter()
            .map(|g| self.facts.readers(&self.store, &g.thread_id))
            .collect();
        let refused = match self.store.apply(&[writes]) {
            Ok(mut per_batch) => per_batch.pop().unwrap_or_default(),
            Err(e) => {
                self.fail(format!("the memory store failed: {e}"));
                return Vec::new();
            }
        };
        for (group, before) in writes.threads.iter().zip(before) {
            if refused.contains(&group.thread_id) {
                continue;
            }
            // The states between the group's writes were decided in order
            // and acknowledged with it: a read between a grant and its
            // revocation in one group is a read with access.
            let after = self.facts.readers(&self.store, &group.thread_id);
            let mut current = before.clone();
            for write in &group.writes {
                match write {
                    Write::PutGrant { principal_id, .. } => {
                        current.insert(principal_id.as_str().to_owned());
                        self.facts
                            .committed_group(&group.thread_id, 0, current.clone());
                    }
                    Write::DeleteGrant { principal_id, .. } => {
                        current.remove(principal_id.as_str());
                        self.facts
                            .committed_group(&group.thread_id, 0, current.clone());
                    }
                    Write::AppendEvent { seq, .. } => {
                        let then: BTreeSet<String> = current.union(&after).cloned().collect();
                        self.facts
                            .committed_event(&group.thread_id, *seq, &before, &then);
                    }
                    _ => {}
                }
            }
            self.facts
                .committed_group(&group.thread_id, group.record.version, after);
            self.learned.push((
                group.thread_id.clone(),
                group.record.head_seq,
                group.record.version,
            ));
        }
        refused
    }

    /// Another writer commits a new version of thread `thread` (same
    /// content), announcing it through the broker or not at all.
    pub(crate) fn second_writer(&mut self, thread: u8, announce: bool) {
        let id = thread_id(thread);
        let Ok(ReadResult::Thread(Some(mut record))) = self.store.read(&ReadQuery::Thread {
            thread_id: id.clone(),
        }) else {
            return;
        };
        self.counter += 1;
        let expect = record.at();
        record.version = record.version.wrapping_mul(31).wrapping_add(self.counter) | 1;
        let batch = Batch {
            threads: vec![crate::store::ThreadWrites {
                thread_id: id.clone(),
                expect: Some(expect),
                record: record.clone(),
                writes: Vec::new(),
            }],
        };
        if self.store.apply(&[&batch]).is_err() {
            self.fail("the memory store failed".into());
        }
        let readers = self.facts.readers(&self.store, &id);
        self.facts.committed_group(&id, record.version, readers);
        if announce {
            let ghost = self.nodes.len();
            for to in 0..self.nodes.len() {
                self.relays
                    .entry((ghost, to))
                    .or_default()
                    .push_back(Relayed::Changed {
                        thread: id.clone(),
                        head_seq: record.head_seq,
                        version: record.version,
                    });
            }
        }
    }

    /// Delivers the next broker message from `from` to `to`; a thread
    /// change is dropped when `drop` says so.
    pub(crate) fn relay(&mut self, from: usize, to: usize, drop: bool) -> bool {
        let Some(message) = self
            .relays
            .get_mut(&(from, to))
            .and_then(VecDeque::pop_front)
        else {
            return false;
        };
        let from_name = self
            .nodes
            .get(from)
            .map_or_else(|| "second-writer".to_owned(), |node| node.name.clone());
        match message {
            Relayed::Cluster(ClusterMessage::ThreadChanged { .. }) | Relayed::Changed { .. }
                if drop => {}
            Relayed::Cluster(message) => {
                if let ClusterMessage::ThreadChanged {
                    thread_id,
                    head_seq,
                    ..
                } = &message
                {
                    self.saw_head(to, thread_id, *head_seq);
                    if let ClusterMessage::ThreadChanged { version, .. } = &message {
                        self.saw_version(to, thread_id, *version);
                    }
                }
                self.feed(
                    to,
                    Input::Remote {
                        node: &from_name,
                        message,
                    },
                );
            }
            Relayed::Changed {
                thread,
                head_seq,
                version,
            } => {
                self.saw_head(to, &thread, head_seq);
                self.saw_version(to, &thread, version);
                self.feed(
                    to,
                    Input::Changed {
                        thread,
                        head_seq,
                        version,
                    },
                );
            }
        }
        true
    }

    /// Node `n` has been told of `thread` at `version`: it knows at least
    /// the commit that made it.
    fn saw_version(&mut self, n: usize, thread: &ThreadId, version: u64) {
        let commit = self.facts.commit_of(thread, version);
        let known = self.nodes[n]
            .known_commit
            .entry(thread.clone())
            .or_default();
        *known = (*known).max(commit);
    }

    fn saw_head(&mut self, n: usize, thread: &ThreadId, head: u64) {
        let known = self.nodes[n].known_head.entry(thread.clone()).or_default();
        *known = (*known).max(head);
    }

    /// The broker settles one pending key claim of node `n`.
    pub(crate) fn claim(&mut self, n: usize, pick: usize) {
        let claims = &mut self.nodes[n].claims;
        if claims.is_empty() {
            return;
        }
        let pending = claims.remove(pick % claims.len());
        let outcome = match self.broker_keys.get(&pending.key) {
            Some((value, expires)) if *expires > self.now => ClaimOutcome::Taken(value.clone()),
            _ => {
                let expires = self.now.plus(pending.ttl_ms);
                self.broker_keys
                    .insert(pending.key.clone(), (pending.value, expires));
                ClaimOutcome::Won
            }
        };
        self.feed(
            n,
            Input::Claimed {
                claim: pending.claim,
                outcome,
            },
        );
    }

    /// A socket of node `n` waiting for it reports it drained.
    pub(crate) fn drain(&mut self, n: usize, pick: usize) {
        let ready: Vec<ConnId> = self.nodes[n]
            .drains
            .iter()
            .copied()
            .filter(|c| !self.stalled(*c))
            .collect();
        if ready.is_empty() {
            return;
        }
        let conn = ready[pick % ready.len()];
        self.nodes[n].drains.remove(&conn);
        self.feed(n, Input::Drained { conn });
    }

    /// Time jumps to the earliest deadline; every engine due gets `Tick`.
    pub(crate) fn advance_time(&mut self) {
        let next = self
            .nodes
            .iter()
            .filter_map(|node| node.engine.poll_timeout())
            .min();
        self.now = next.map_or(self.now.plus(1_000), |at| self.now.max(at));
        for n in 0..self.nodes.len() {
            if self.nodes[n]
                .engine
                .poll_timeout()
                .is_some_and(|at| at <= self.now)
            {
                self.feed(n, Input::Tick);
            }
        }
    }

    /// The other nodes' presence rows, as the broker holds them.
    fn presence_for(&self, n: usize) -> Vec<PresenceEntry> {
        self.presence_rows
            .iter()
            .filter(|((node, _, _), _)| *node != n)
            .map(|((node, channel, user), info)| PresenceEntry {
                node: self.nodes[*node].name.clone(),
                app_id: APP.into(),
                channel: channel.clone(),
                user_id: user.clone(),
                user_info: info.clone(),
            })
            .collect()
    }

    /// The broker hands node `n` everyone else's presence rows.
    pub(crate) fn remote_presence(&mut self, n: usize) {
        let entries = self.presence_for(n);
        self.feed(n, Input::RemotePresence { entries });
    }

    /// Node `n` crashes: its sockets drop, its unreported work is lost
    /// except the first `keep` batches, which had landed in the store. It
    /// restarts empty over the same store; the broker tells the others.
    pub(crate) fn restart(&mut self, n: usize, keep: usize) {
        let batches: Vec<(BatchId, Batch)> = self.nodes[n].batches.drain(..).collect();
        for (_, writes) in batches.iter().take(keep) {
            self.commit(writes);
        }
        self.learned.clear();
        let conns: Vec<ConnId> = self
            .owners
            .iter()
            .filter(|(_, owner)| match owner {
                Owner::Ws(slot) => self.ws.get(slot).is_some_and(|c| c.node == n),
                Owner::Channel(slot) => self.channels.get(slot).is_some_and(|c| c.node == n),
            })
            .map(|(conn, _)| *conn)
            .collect();
        for conn in conns {
            self.forget_conn(conn);
        }
        self.presence_rows.retain(|(node, _, _), _| *node != n);
        self.relays.retain(|(_, to), _| *to != n);
        let name = self.nodes[n].name.clone();
        self.broadcast(n, ClusterMessage::NodeGone { node: name });
        self.nodes[n] = self.fresh_node(n);
        self.remote_presence(n);
    }

    /// Completes everything pending: reads (none fail), batches, claims,
    /// drains (stalled sockets resume), broker messages; then the broker
    /// repairs presence and every node rechecks its threads, and the whole
    /// runs again until nothing moves.
    pub(crate) fn quiesce(&mut self) {
        for client in self.ws.values_mut() {
            client.stalled = false;
        }
        self.run_until_quiet();
        for n in 0..self.nodes.len() {
            self.remote_presence(n);
            self.feed(n, Input::Recheck);
        }
        self.run_until_quiet();
    }

    fn run_until_quiet(&mut self) {
        for _ in 0..100_000 {
            if self.violation.is_some() || !self.one_completion() {
                return;
            }
        }
        self.fail("the deployment never went quiet".into());
    }

    fn one_completion(&mut self) -> bool {
        for n in 0..self.nodes.len() {
            if !self.nodes[n].reads.is_empty() {
                self.answer_read(n, 0, false);
                return true;
            }
            if !self.nodes[n].batches.is_empty() {
                let all = self.nodes[n].batches.len();
                self.persist(n, all);
                return true;
            }
            if !self.nodes[n].claims.is_empty() {
                self.claim(n, 0);
                return true;
            }
            if !self.nodes[n].drains.is_empty() {
                self.drain(n, 0);
                return true;
            }
        }
        let keys: Vec<(usize, usize)> = self
            .relays
            .iter()
            .filter(|(_, q)| !q.is_empty())
            .map(|(k, _)| *k)
            .collect();
        for (from, to) in keys {
            if self.relay(from, to, false) {
                return true;
            }
        }
        false
    }
}
