//! A host simulator for the engine's integration tests.
//!
//! It drives one [`Engine`] over a store (a [`MemoryStore`] unless a test
//! brings another [`Backend`]) the way a real host does:
//! every input is followed by draining `poll_output`, `Persist` batches are
//! applied to the store and reported with `Input::Persisted`, `WantDrained`
//! is answered with `Input::Drained`, and an engine-requested close is
//! reported back as `Input::Closed`. Time is simulated: it moves only when a
//! test says so, and [`Harness::advance_to_timeout`] jumps straight to the
//! engine's next deadline.
//!
//! Persistence and drains can be held back ([`Harness::hold_persistence`],
//! [`Harness::hold_drains`]) so tests can check that nothing is acknowledged
//! or delivered before it is durable. Every `thread.event` frame and every
//! successful append response is checked against the store when it leaves
//! the engine: an event that is not durable yet fails the test at once.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

use bubble_core::cluster::{ClaimOutcome, ClusterMessage, NodeState};
use bubble_core::http::HttpResponse;
use bubble_core::store::{Backend, Batch, MemoryStore, ReadQuery, ReadResult, StoreError};
use bubble_core::{
    BatchId, ClaimId, Config, ConnId, Engine, Input, Millis, Output, PrincipalId, ReadId,
    RequestId, ThreadId,
};
use serde_json::Value;

mod bodies;
mod http;
mod ws;

pub use bodies::*;

/// The simulated clock's start: 2026-11-30T09:44:10.000Z.
pub const T0: u64 = 1_796_031_850_000;

/// The admin principal every harness is configured with.
pub const ADMIN: &str = "root";

/// Principals with a static bearer token (`token-<name>`).
pub const PRINCIPALS: &[&str] = &[
    "root",
    "alice",
    "bob",
    "carol",
    "dave",
    "erin",
    "frank",
    "olga",
    "zed",
    "bot-research",
    "p0",
    "p1",
    "p2",
    "p3",
    "p4",
    "p5",
];

/// The bearer token of `principal`.
pub fn token(principal: &str) -> String {
    format!("token-{principal}")
}

/// The default test configuration: static tokens for [`PRINCIPALS`] and
/// [`ADMIN`] as the only admin.
pub fn config() -> Config {
    let mut config = Config::default();
    config.admins.push(PrincipalId::new(ADMIN));
    for p in PRINCIPALS {
        config.auth.tokens.push((token(p), PrincipalId::new(*p)));
    }
    config
}

/// An HTTP response: status and parsed JSON body (`Null` when empty).
#[derive(Debug, Clone, PartialEq)]
pub struct Resp {
    /// The status code.
    pub status: u16,
    /// The parsed body.
    pub body: Value,
}

impl Resp {
    fn from_http(response: &HttpResponse) -> Resp {
        let body = if response.body.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&response.body)
                .unwrap_or_else(|e| panic!("response body is not JSON ({e}): {}", response.body))
        };
        Resp {
            status: response.status,
            body,
        }
    }

    /// `error.code` of an error body.
    pub fn code(&self) -> &str {
        self.body["error"]["code"].as_str().unwrap_or("")
    }

    /// `error.message` of an error body.
    pub fn message(&self) -> &str {
        self.body["error"]["message"].as_str().unwrap_or("")
    }

    /// Panics unless the status is `status`.
    #[track_caller]
    pub fn expect(self, status: u16) -> Resp {
        assert_eq!(self.status, status, "unexpected response: {}", self.body);
        self
    }

    /// Panics unless the status is 2xx.
    #[track_caller]
    pub fn expect_ok(self) -> Resp {
        assert!(
            (200..300).contains(&self.status),
            "unexpected response {}: {}",
            self.status,
            self.body
        );
        self
    }

    /// Panics unless the response is the error `code` with `status`.
    #[track_caller]
    pub fn expect_error(self, status: u16, code: &str) -> Resp {
        assert_eq!(
            (self.status, self.code()),
            (status, code),
            "unexpected response: {}",
            self.body
        );
        self
    }
}

/// The simulated host.
pub struct Harness<S = MemoryStore> {
    /// The engine under test.
    pub engine: Engine,
    /// The backend the harness applies `Persist` batches to.
    pub store: S,
    /// The engine's configuration and id seed (a restart starts another
    /// engine with them).
    config: Config,
    seed: u64,
    now: Millis,
    next_conn: u64,
    next_req: u64,
    hold_persist: bool,
    hold_drains: bool,
    held: VecDeque<(BatchId, Batch)>,
    reads: Vec<(ReadId, ReadQuery)>,
    /// `Some(state)`: reads complete in a pseudo-random order.
    shuffle: Option<u64>,
    committed: Vec<(ThreadId, u64, u64)>,
    hold_reads: bool,
    /// Reads that fail instead of being answered.
    failing: Option<fn(&ReadQuery) -> bool>,
    want_drained: BTreeSet<ConnId>,
    frames: HashMap<ConnId, Vec<Value>>,
    closes: HashMap<ConnId, u16>,
    open: BTreeSet<ConnId>,
    responses: BTreeMap<RequestId, Resp>,
    pings: Vec<ConnId>,
    broadcasts: Vec<ClusterMessage>,
    claims: Vec<(ClaimId, String, String, String)>,
    key_fetches: usize,
    /// `Some`: every read asked for and every answer sent, in order.
    work: Option<Vec<String>>,
}

impl Default for Harness {
    fn default() -> Harness {
        Harness::new()
    }
}

impl Harness {
    /// A harness over an empty store with [`config`].
    pub fn new() -> Harness {
        Harness::with_config(config())
    }

    /// A harness over an empty store with `config`.
    pub fn with_config(config: Config) -> Harness {
        Harness::over(config, MemoryStore::default(), Millis(T0))
    }
}

impl<S: Backend> Harness<S> {
    /// A harness over `store` (e.g. one left by another harness: a restart).
    pub fn over(config: Config, store: S, now: Millis) -> Harness<S> {
        Harness::engine_over(config, store, now, 7)
    }

    /// A harness whose engine draws ids from `seed`, over `store`: several
    /// of them over one store are engines sharing it, as cluster nodes do.
    pub fn engine_over(config: Config, store: S, now: Millis, seed: u64) -> Harness<S> {
        let engine = Engine::new(config.clone(), seed);
        Harness {
            config,
            seed,
            reads: Vec::new(),
            shuffle: None,
            committed: Vec::new(),
            hold_reads: false,
            failing: None,
            engine,
            store,
            now,
            next_conn: 1,
            next_req: 1,
            hold_persist: false,
            hold_drains: false,
            held: VecDeque::new(),
            want_drained: BTreeSet::new(),
            frames: HashMap::new(),
            closes: HashMap::new(),
            open: BTreeSet::new(),
            responses: BTreeMap::new(),
            pings: Vec::new(),
            broadcasts: Vec::new(),
            claims: Vec::new(),
            key_fetches: 0,
            work: None,
        }
    }

    /// Starts recording the engine's work: each store read it asks for
    /// (`read <query>`), each response (`respond <status> <content type>
    /// <retry-after> <body>`) and each frame (`send <conn> <text>`), in
    /// order, as the bytes leave it.
    pub fn record_work(&mut self) {
        self.work = Some(Vec::new());
    }

    /// What was recorded since the last call.
    pub fn take_work(&mut self) -> Vec<String> {
        self.work.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// The engine crashes and another starts over the same store: every
    /// batch issued had landed (committed, never reported: a crash between
    /// a commit and its report), `reopen` reopens the store (SQLite: a new
    /// connection to the file), every connection is gone without a close,
    /// and reads, drains and answers still in flight are lost.
    pub fn crash_and_restart(&mut self, reopen: impl FnOnce(&mut S)) {
        for (_, writes) in std::mem::take(&mut self.held) {
            let refused = self
                .store
                .apply(&[&writes])
                .expect("the engine's writes apply");
            assert!(refused.iter().all(Vec::is_empty), "one writer: {refused:?}");
        }
        reopen(&mut self.store);
        // A new process draws new ids, as the native host's random seed does.
        self.seed = self.seed.wrapping_add(1);
        self.engine = Engine::new(self.config.clone(), self.seed);
        self.reads.clear();
        self.want_drained.clear();
        self.open.clear();
        self.committed.clear();
    }

    /// Whether the engine has answered `req` (and the answer was not taken).
    pub fn has_response(&self, req: RequestId) -> bool {
        self.responses.contains_key(&req)
    }

    /// The simulated time.
    pub fn now(&self) -> Millis {
        self.now
    }

    /// Moves the simulated clock forward by `ms`.
    pub fn advance(&mut self, ms: u64) {
        self.now = self.now.plus(ms);
    }

    /// Jumps to the engine's next deadline and delivers `Tick`. Returns
    /// false when the engine has no deadline.
    pub fn advance_to_timeout(&mut self) -> bool {
        let Some(at) = self.engine.poll_timeout() else {
            return false;
        };
        self.now = self.now.max(at);
        self.input(Input::Tick);
        true
    }

    /// Delivers one input, then runs the host loop until it is quiet.
    pub fn input(&mut self, input: Input<'_>) {
        self.engine
            .handle(self.now, input)
            .expect("the harness drives the engine correctly");
        self.pump();
    }

    /// Drains outputs, persists held-back batches and answers drains until
    /// nothing more happens.
    pub fn pump(&mut self) {
        loop {
            while let Some(out) = self.engine.poll_output() {
                self.dispatch(out);
            }
            if !self.reads.is_empty() && !self.hold_reads {
                self.answer_one_read();
                continue;
            }
            if !self.hold_persist && !self.held.is_empty() {
                let n = self.held.len();
                self.persist(n);
                continue;
            }
            if !self.hold_drains {
                if let Some(conn) = self.want_drained.pop_first() {
                    self.engine
                        .handle(self.now, Input::Drained { conn })
                        .expect("drained conn is open");
                    continue;
                }
            }
            break;
        }
    }

    /// Completes reads in a pseudo-random order from `seed` (interleaved
    /// with persistence and drains) instead of in the order asked.
    pub fn shuffle_reads(&mut self, seed: u64) {
        self.shuffle = Some(seed | 1);
    }

    fn answer_one_read(&mut self) {
        let pick = match &mut self.shuffle {
            None => 0,
            Some(state) => {
                *state ^= *state << 13;
                *state ^= *state >> 7;
                *state ^= *state << 17;
                usize::try_from(*state % self.reads.len() as u64).unwrap_or(0)
            }
        };
        let (read, query) = self.reads.remove(pick);
        let result = match self.failing {
            Some(fails) if fails(&query) => Err(StoreError::Failed("injected read failure".into())),
            _ => self.store.read(&query),
        };
        self.engine
            .handle(self.now, Input::ReadDone { read, result })
            .expect("read was asked for");
        if self.shuffle.is_some() && !self.held.is_empty() && !self.hold_persist {
            self.persist(1);
        }
    }

    /// A frame for `conn`; a host drops frames for sockets already gone.
    fn sent(&mut self, conn: ConnId, frame: &str) {
        if !self.open.contains(&conn) {
            return;
        }
        let value: Value = serde_json::from_str(frame)
            .unwrap_or_else(|e| panic!("server frame is not JSON ({e}): {frame}"));
        self.check_durable_frame(&value);
        self.frames.entry(conn).or_default().push(value);
    }

    fn dispatch(&mut self, out: Output) {
        if let Some(work) = &mut self.work {
            match &out {
                Output::Read { query, .. } => work.push(format!("read {query:?}")),
                Output::Respond { response, .. } => work.push(format!(
                    "respond {} {:?} {:?} {}",
                    response.status, response.content_type, response.retry_after, response.body
                )),
                Output::Send { conn, frame } => work.push(format!("send {} {}", conn.0, &**frame)),
                _ => {}
            }
        }
        match out {
            Output::Read { read, query } => self.reads.push((read, query)),
            Output::Persist { batch, writes } => self.held.push_back((batch, writes)),
            Output::Send { conn, frame } => self.sent(conn, &frame),
            Output::SendAll { conns, frame } => {
                for conn in conns {
                    self.sent(conn, &frame);
                }
            }
            Output::Close { conn, reason } => {
                self.closes.insert(conn, reason.code().unwrap_or(1006));
                if self.open.remove(&conn) {
                    self.want_drained.remove(&conn);
                    self.engine
                        .handle(self.now, Input::Closed { conn })
                        .expect("close reported");
                }
            }
            Output::Respond { req, response } => {
                let resp = Resp::from_http(&response);
                self.check_durable_response(&resp);
                assert!(
                    self.responses.insert(req, resp).is_none(),
                    "two responses to {req:?}"
                );
            }
            Output::WantDrained { conn } => {
                if self.open.contains(&conn) {
                    self.want_drained.insert(conn);
                }
            }
            Output::Ping { conn } => self.pings.push(conn),
            Output::Broadcast { message } => self.broadcasts.push(message),
            Output::Claim {
                claim,
                app_id,
                key,
                value,
                ..
            } => self.claims.push((claim, app_id, key, value)),
            Output::Webhook { url, .. } => panic!("a webhook to {url}: no app here has one"),
            Output::FetchKeys => self.key_fetches += 1,
        }
    }

    /// How many key-set fetches the engine asked for since the last call.
    pub fn take_key_fetches(&mut self) -> usize {
        std::mem::take(&mut self.key_fetches)
    }

    /// Whether event `seq` of `thread` is in the durable store.
    fn durable(&self, thread: &ThreadId, seq: u64) -> Option<Value> {
        let query = ReadQuery::Events {
            thread_id: thread.clone(),
            from_seq: seq,
            through_seq: seq,
            limit: 1,
        };
        let Ok(ReadResult::Events(stored)) = self.store.read(&query) else {
            panic!("the store reads events");
        };
        stored
            .first()
            .map(|e| serde_json::from_str(&e.json).expect("stored JSON"))
    }

    #[track_caller]
    fn check_durable_event(&self, event: &Value) {
        let thread = event["threadId"].as_str().expect("event has threadId");
        let seq = event["seq"].as_u64().expect("event has seq");
        let thread = ThreadId::parse(thread).expect("valid threadId");
        let Some(stored) = self.durable(&thread, seq) else {
            panic!("event {thread}#{seq} released before it was durable");
        };
        assert_eq!(
            &stored, event,
            "released event differs from the durable one"
        );
    }

    /// A head the engine tells (`headSeq` of a snapshot, `throughSeq` of a
    /// subscription) counts only durable events: the event at that seq is
    /// in the store.
    #[track_caller]
    fn check_durable_head(&self, thread: &str, head: u64, what: &str) {
        let thread = ThreadId::parse(thread).expect("valid threadId");
        if head > 0 {
            assert!(
                self.durable(&thread, head).is_some(),
                "{what} {head} of {thread} released before event {head} was durable"
            );
        }
    }

    #[track_caller]
    fn check_durable_snapshot(&self, snapshot: &Value) {
        if let (Some(thread), Some(head)) =
            (snapshot["threadId"].as_str(), snapshot["headSeq"].as_u64())
        {
            self.check_durable_head(thread, head, "headSeq");
        }
    }

    #[track_caller]
    fn check_durable_frame(&self, frame: &Value) {
        if frame["type"] == "thread.event" {
            self.check_durable_event(&frame["event"]);
        }
        if frame["type"] == "thread.subscription_opened" {
            let thread = frame["threadId"].as_str().expect("threadId");
            let through = frame["throughSeq"].as_u64().expect("throughSeq");
            self.check_durable_head(thread, through, "throughSeq");
        }
    }

    /// Appended events, history pages and thread snapshots (one, or a
    /// listing) answered with a success hold only durable events.
    #[track_caller]
    fn check_durable_response(&self, resp: &Resp) {
        if !(200..300).contains(&resp.status) {
            return;
        }
        if resp.body["event"].is_object() {
            self.check_durable_event(&resp.body["event"]);
        }
        for event in resp.body["events"].as_array().into_iter().flatten() {
            self.check_durable_event(event);
        }
        self.check_durable_snapshot(&resp.body);
        for thread in resp.body["threads"].as_array().into_iter().flatten() {
            self.check_durable_snapshot(thread);
        }
    }

    // --- persistence and flow control -------------------------------------

    /// Holds `Persist` batches back until [`Harness::persist`] or
    /// [`Harness::release_persistence`].
    pub fn hold_persistence(&mut self) {
        self.hold_persist = true;
    }

    /// Stops holding batches and makes every held batch durable.
    pub fn release_persistence(&mut self) {
        self.hold_persist = false;
        self.pump();
    }

    /// Whether `thread` is in the durable store.
    pub fn store_has_thread(&self, thread: &str) -> bool {
        let query = ReadQuery::Thread {
            thread_id: ThreadId::parse(thread).expect("valid thread id"),
        };
        matches!(self.store.read(&query), Ok(ReadResult::Thread(Some(_))))
    }

    /// Batches issued but not yet made durable.
    pub fn held_batches(&self) -> usize {
        self.held.len()
    }

    /// Makes the first `n` held batches durable in one group commit and
    /// reports the last of them.
    pub fn persist(&mut self, n: usize) {
        let mut last = None;
        for _ in 0..n.min(self.held.len()) {
            let (batch, writes) = self.held.pop_front().expect("held batch");
            let refused = self
                .store
                .apply(&[&writes])
                .expect("the engine's writes apply")
                .remove(0);
            for group in &writes.threads {
                if !refused.contains(&group.thread_id) {
                    let at = group.record.at();
                    self.committed
                        .push((group.thread_id.clone(), at.head_seq, at.version));
                }
            }
            if refused.is_empty() {
                last = Some(batch);
                continue;
            }
            if let Some(batch) = last.take() {
                self.engine
                    .handle(self.now, Input::Persisted { batch })
                    .expect("batch was issued");
            }
            let conflicts = Input::PersistFailed {
                batch,
                conflicts: refused,
            };
            self.engine
                .handle(self.now, conflicts)
                .expect("batch was issued");
        }
        if let Some(batch) = last {
            self.engine
                .handle(self.now, Input::Persisted { batch })
                .expect("batch was issued");
        }
        self.pump();
    }

    /// Fails every read `fails` picks (`None`: answer them all again).
    pub fn fail_reads(&mut self, fails: Option<fn(&ReadQuery) -> bool>) {
        self.failing = fails;
    }

    /// Holds store reads back until [`Harness::release_reads`].
    pub fn hold_reads(&mut self) {
        self.hold_reads = true;
    }

    /// Reads asked for and not answered yet.
    pub fn held_reads(&self) -> usize {
        self.reads.len()
    }

    /// Stops holding reads and answers every pending one.
    pub fn release_reads(&mut self) {
        self.hold_reads = false;
        self.pump();
    }

    /// What this engine committed since the last call: `(thread, head,
    /// version)` as a broker would announce it.
    pub fn take_committed(&mut self) -> Vec<(ThreadId, u64, u64)> {
        std::mem::take(&mut self.committed)
    }

    /// What the engine told the other nodes since the last call.
    pub fn take_broadcasts(&mut self) -> Vec<ClusterMessage> {
        std::mem::take(&mut self.broadcasts)
    }

    /// The key claims the engine asked for since the last call:
    /// `(claim, app id, key, value)`.
    pub fn take_claims(&mut self) -> Vec<(ClaimId, String, String, String)> {
        std::mem::take(&mut self.claims)
    }

    /// Feeds a message from another node.
    pub fn remote(&mut self, node: &str, message: ClusterMessage) {
        self.input(Input::Remote { node, message });
    }

    /// Feeds the other nodes' channel state.
    pub fn cluster_state(&mut self, nodes: Vec<NodeState>) {
        self.input(Input::ClusterState { nodes });
    }

    /// Settles a key claim.
    pub fn claimed(&mut self, claim: ClaimId, outcome: ClaimOutcome) {
        self.input(Input::Claimed { claim, outcome });
    }

    /// Tells the engine another writer changed `thread`.
    pub fn changed(&mut self, thread: &ThreadId, head_seq: u64, version: u64) {
        self.input(Input::Changed {
            thread: thread.clone(),
            head_seq,
            version,
        });
    }

    /// Holds `WantDrained` requests until [`Harness::drain`].
    pub fn hold_drains(&mut self) {
        self.hold_drains = true;
    }

    /// Stops holding drains and answers every pending one.
    pub fn release_drains(&mut self) {
        self.hold_drains = false;
        self.pump();
    }

    /// Whether the engine is waiting for `Drained` on `conn`.
    pub fn wants_drained(&self, conn: ConnId) -> bool {
        self.want_drained.contains(&conn)
    }

    /// Answers a pending `WantDrained` on `conn`, if any.
    pub fn drain(&mut self, conn: ConnId) {
        if self.want_drained.remove(&conn) {
            self.input(Input::Drained { conn });
        }
    }
}
