//! A host simulator for the engine's integration tests.
//!
//! It drives one [`Engine`] over a [`MemoryStore`] the way a real host does:
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

use bubble_core::http::{HttpRequest, HttpResponse, Method};
use bubble_core::store::{Backend, EventStore, MemoryStore, Write};
use bubble_core::{
    BatchId, Config, ConnId, Engine, Input, Millis, Output, PrincipalId, RequestId, ThreadId,
    WsFrame,
};
use serde_json::{json, Value};

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
pub struct Harness {
    /// The engine under test.
    pub engine: Engine,
    /// The backend the harness applies `Persist` batches to.
    pub store: MemoryStore,
    now: Millis,
    next_conn: u64,
    next_req: u64,
    hold_persist: bool,
    hold_drains: bool,
    held: VecDeque<(BatchId, Vec<Write>)>,
    want_drained: BTreeSet<ConnId>,
    frames: HashMap<ConnId, Vec<Value>>,
    closes: HashMap<ConnId, u16>,
    open: BTreeSet<ConnId>,
    responses: BTreeMap<RequestId, Resp>,
    pings: Vec<ConnId>,
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

    /// A harness over `store` (e.g. one left by another harness: a restart).
    pub fn over(config: Config, store: MemoryStore, now: Millis) -> Harness {
        let snapshot = store.load().expect("memory store loads");
        let engine = Engine::new(config, 7, snapshot, Box::new(store.clone())).expect("engine");
        Harness {
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
        }
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

    fn dispatch(&mut self, out: Output) {
        match out {
            Output::Persist { batch, writes } => self.held.push_back((batch, writes)),
            Output::Send { conn, frame } => {
                // A host drops frames for sockets that are already gone.
                if !self.open.contains(&conn) {
                    return;
                }
                let value: Value = serde_json::from_str(&frame)
                    .unwrap_or_else(|e| panic!("server frame is not JSON ({e}): {frame}"));
                self.check_durable_frame(&value);
                self.frames.entry(conn).or_default().push(value);
            }
            Output::Close { conn, code } => {
                self.closes.insert(conn, code);
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
        }
    }

    #[track_caller]
    fn check_durable_event(&self, event: &Value) {
        let thread = event["threadId"].as_str().expect("event has threadId");
        let seq = event["seq"].as_u64().expect("event has seq");
        let thread = ThreadId::parse(thread).expect("valid threadId");
        let stored = self
            .store
            .read_events(&thread, seq, seq, 1)
            .expect("store reads");
        assert_eq!(
            stored.len(),
            1,
            "event {thread}#{seq} released before it was durable"
        );
        let stored: Value = serde_json::from_str(&stored[0].json).expect("stored JSON");
        assert_eq!(
            &stored, event,
            "released event differs from the durable one"
        );
    }

    #[track_caller]
    fn check_durable_frame(&self, frame: &Value) {
        if frame["type"] == "thread.event" {
            self.check_durable_event(&frame["event"]);
        }
    }

    #[track_caller]
    fn check_durable_response(&self, resp: &Resp) {
        if (200..300).contains(&resp.status) && resp.body["event"].is_object() {
            self.check_durable_event(&resp.body["event"]);
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
        let snapshot = self.store.load().expect("memory store loads");
        snapshot
            .threads
            .iter()
            .any(|r| r.thread_id.as_str() == thread)
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
            self.store
                .apply(&writes)
                .expect("the engine's writes apply");
            last = Some(batch);
        }
        if let Some(batch) = last {
            self.engine
                .handle(self.now, Input::Persisted { batch })
                .expect("batch was issued");
            self.pump();
        }
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

    // --- HTTP ---------------------------------------------------------------

    /// Sends a request and returns its id; the response may be held behind
    /// persistence (see [`Harness::response`]).
    pub fn send_request(
        &mut self,
        method: Method,
        who: Option<&str>,
        target: &str,
        body: Option<&Value>,
        idempotency_key: Option<&str>,
    ) -> RequestId {
        let req = RequestId(self.next_req);
        self.next_req += 1;
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let authorization = who.map(|p| format!("Bearer {}", token(p)));
        let body = body.map(Value::to_string).unwrap_or_default();
        let request = HttpRequest {
            method,
            path,
            query,
            authorization: authorization.as_deref(),
            idempotency_key,
            body: body.as_bytes(),
        };
        self.input(Input::Http { req, request });
        req
    }

    /// The response to `req`, once the engine has answered.
    pub fn response(&mut self, req: RequestId) -> Option<Resp> {
        self.responses.remove(&req)
    }

    /// Sends a request with a raw body and returns the answer.
    #[track_caller]
    pub fn raw_request(
        &mut self,
        method: Method,
        authorization: Option<&str>,
        target: &str,
        body: &[u8],
    ) -> Resp {
        let req = RequestId(self.next_req);
        self.next_req += 1;
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let request = HttpRequest {
            method,
            path,
            query,
            authorization,
            idempotency_key: None,
            body,
        };
        self.input(Input::Http { req, request });
        self.response(req).expect("the engine answered")
    }

    /// Sends a request and returns the answer (which must not be held).
    #[track_caller]
    pub fn request(
        &mut self,
        method: Method,
        who: &str,
        target: &str,
        body: Option<&Value>,
        idempotency_key: Option<&str>,
    ) -> Resp {
        let req = self.send_request(method, Some(who), target, body, idempotency_key);
        self.response(req)
            .unwrap_or_else(|| panic!("no response to {target}"))
    }

    /// `GET target` as `who`.
    #[track_caller]
    pub fn get(&mut self, who: &str, target: &str) -> Resp {
        self.request(Method::Get, who, target, None, None)
    }

    /// `POST target` as `who`.
    #[track_caller]
    pub fn post(&mut self, who: &str, target: &str, body: Value) -> Resp {
        self.request(Method::Post, who, target, Some(&body), None)
    }

    /// `PATCH target` as `who`.
    #[track_caller]
    pub fn patch(&mut self, who: &str, target: &str, body: Value) -> Resp {
        self.request(Method::Patch, who, target, Some(&body), None)
    }

    /// `PUT target` as `who`.
    #[track_caller]
    pub fn put(&mut self, who: &str, target: &str, body: Value) -> Resp {
        self.request(Method::Put, who, target, Some(&body), None)
    }

    /// `DELETE target` as `who`.
    #[track_caller]
    pub fn delete(&mut self, who: &str, target: &str) -> Resp {
        self.request(Method::Delete, who, target, None, None)
    }

    // --- thread helpers -------------------------------------------------------

    /// Creates top-level `thread` as `who` (who becomes its owner).
    #[track_caller]
    pub fn create_thread(&mut self, who: &str, thread: &str) -> Value {
        self.post(who, "/v1/threads", json!({ "threadId": thread }))
            .expect(201)
            .body
    }

    /// Creates `thread` under `parent` as `who`.
    #[track_caller]
    pub fn create_subthread(&mut self, who: &str, thread: &str, parent: &str) -> Value {
        self.post(
            who,
            "/v1/threads",
            json!({ "threadId": thread, "parentThreadId": parent }),
        )
        .expect(201)
        .body
    }

    /// Grants `role` on `thread` to `principal`, as the admin.
    #[track_caller]
    pub fn grant(&mut self, thread: &str, principal: &str, role: &str) {
        let resp = self.put(
            ADMIN,
            &format!("/v1/threads/{thread}/grants/{principal}"),
            json!({ "role": role }),
        );
        assert!(
            (200..300).contains(&resp.status),
            "grant failed: {}",
            resp.body
        );
    }

    /// Revokes `principal`'s grant on `thread`, as the admin.
    #[track_caller]
    pub fn revoke(&mut self, thread: &str, principal: &str) {
        self.delete(ADMIN, &format!("/v1/threads/{thread}/grants/{principal}"))
            .expect(204);
    }

    /// Appends `event` to `thread` over HTTP as `who`.
    #[track_caller]
    pub fn append(&mut self, who: &str, thread: &str, event: Value) -> Resp {
        self.post(who, &format!("/v1/threads/{thread}/events"), event)
    }

    /// Appends `n` `run_started` events to `thread` as the admin.
    #[track_caller]
    pub fn append_n(&mut self, thread: &str, n: usize) {
        for i in 0..n {
            self.append(ADMIN, thread, run_started(&format!("run-{i}")))
                .expect(201);
        }
    }

    /// Sends `n` `run_started` appends to `thread` as the admin without
    /// waiting for their answers (they may be held behind persistence).
    pub fn append_n_async(&mut self, thread: &str, n: usize) -> Vec<RequestId> {
        let target = format!("/v1/threads/{thread}/events");
        (0..n)
            .map(|i| {
                let body = run_started(&format!("run-async-{i}"));
                self.send_request(Method::Post, Some(ADMIN), &target, Some(&body), None)
            })
            .collect()
    }

    /// Sends a revocation of `principal`'s grant on `thread` as the admin
    /// without waiting for the answer.
    pub fn revoke_async(&mut self, thread: &str, principal: &str) -> RequestId {
        let target = format!("/v1/threads/{thread}/grants/{principal}");
        self.send_request(Method::Delete, Some(ADMIN), &target, None, None)
    }

    /// `GET /v1/threads/:thread` as the admin.
    #[track_caller]
    pub fn thread(&mut self, thread: &str) -> Value {
        self.get(ADMIN, &format!("/v1/threads/{thread}"))
            .expect(200)
            .body
    }

    /// The thread's whole history, read as the admin.
    #[track_caller]
    pub fn history(&mut self, thread: &str) -> Vec<Value> {
        let mut events = Vec::new();
        let mut from = 1;
        loop {
            let page = self
                .get(
                    ADMIN,
                    &format!("/v1/threads/{thread}/events?fromSeq={from}&limit=1000"),
                )
                .expect(200)
                .body;
            events.extend(
                page["events"]
                    .as_array()
                    .expect("events array")
                    .iter()
                    .cloned(),
            );
            match page["nextSeq"].as_u64() {
                Some(next) => from = next,
                None => return events,
            }
        }
    }

    // --- WebSocket --------------------------------------------------------------

    /// Opens a `/v1/ws` connection as `who`.
    pub fn connect(&mut self, who: &str) -> ConnId {
        self.connect_with_token(Some(&token(who)))
    }

    /// Opens a `/v1/ws` connection presenting `token` (or none).
    pub fn connect_with_token(&mut self, token: Option<&str>) -> ConnId {
        let conn = ConnId(self.next_conn);
        self.next_conn += 1;
        self.open.insert(conn);
        self.input(Input::OpenThreads { conn, token });
        conn
    }

    /// Sends a JSON text frame.
    pub fn send(&mut self, conn: ConnId, frame: Value) {
        self.send_text(conn, &frame.to_string());
    }

    /// Sends a text frame.
    pub fn send_text(&mut self, conn: ConnId, text: &str) {
        self.input(Input::Frame {
            conn,
            frame: WsFrame::Text(text),
        });
    }

    /// Sends a binary frame.
    pub fn send_binary(&mut self, conn: ConnId, bytes: &[u8]) {
        self.input(Input::Frame {
            conn,
            frame: WsFrame::Binary(bytes),
        });
    }

    /// Sends a WebSocket Pong.
    pub fn pong(&mut self, conn: ConnId) {
        self.input(Input::Pong { conn });
    }

    /// The client closes `conn`.
    pub fn disconnect(&mut self, conn: ConnId) {
        if self.open.remove(&conn) {
            self.want_drained.remove(&conn);
            self.input(Input::Closed { conn });
        }
    }

    /// `thread.subscribe`, with `fromSeq` when given.
    pub fn subscribe(&mut self, conn: ConnId, thread: &str, from_seq: Option<u64>) {
        let mut frame = json!({ "type": "thread.subscribe", "threadId": thread });
        if let Some(from) = from_seq {
            frame["fromSeq"] = json!(from);
        }
        self.send(conn, frame);
    }

    /// `thread.unsubscribe`.
    pub fn unsubscribe(&mut self, conn: ConnId, thread: &str) {
        self.send(
            conn,
            json!({ "type": "thread.unsubscribe", "threadId": thread }),
        );
    }

    /// `thread.append`.
    pub fn ws_append(&mut self, conn: ConnId, thread: &str, event: Value) {
        self.send(
            conn,
            json!({ "type": "thread.append", "threadId": thread, "event": event }),
        );
    }

    /// Takes the frames `conn` received since the last call.
    pub fn frames(&mut self, conn: ConnId) -> Vec<Value> {
        self.frames.remove(&conn).unwrap_or_default()
    }

    /// The close code the engine asked for on `conn`, if any.
    pub fn close_code(&self, conn: ConnId) -> Option<u16> {
        self.closes.get(&conn).copied()
    }

    /// Whether `conn` is still open.
    pub fn is_open(&self, conn: ConnId) -> bool {
        self.open.contains(&conn)
    }

    /// Takes the connections pinged since the last call.
    pub fn pings(&mut self) -> Vec<ConnId> {
        std::mem::take(&mut self.pings)
    }
}

// --- event bodies -----------------------------------------------------------------

/// A `run_started` body without `principalId` (the engine fills the caller).
pub fn run_started(run: &str) -> Value {
    json!({ "type": "run_started", "runId": run })
}

/// A `message_part` body without `principalId`.
pub fn message_part(run: &str, text: &str) -> Value {
    json!({
        "type": "message_part",
        "runId": run,
        "part": { "type": "text-delta", "id": "m1", "delta": text },
        "version": "ai-sdk-v6",
    })
}

/// A `tool_call_approval` body without `principalId`.
pub fn tool_call_approval(run: &str) -> Value {
    json!({ "type": "tool_call_approval", "runId": run, "toolCallId": "call-1", "approved": true })
}

/// A `run_finished` body without `principalId`.
pub fn run_finished(run: &str) -> Value {
    json!({ "type": "run_finished", "runId": run, "status": "completed" })
}

/// A body of appendable `kind` (`run_started`, `message_part`, …).
pub fn body_of(kind: &str, run: &str) -> Value {
    match kind {
        "run_started" => run_started(run),
        "message_part" => message_part(run, "hi"),
        "tool_call_approval" => tool_call_approval(run),
        "run_finished" => run_finished(run),
        other => panic!("not an appendable type: {other}"),
    }
}

/// `body` with `principalId` set.
pub fn by(principal: &str, mut body: Value) -> Value {
    body["principalId"] = json!(principal);
    body
}

// --- frame helpers ------------------------------------------------------------------

/// The `seq`s of the `thread.event` frames for `thread`, in order.
pub fn event_seqs(frames: &[Value], thread: &str) -> Vec<u64> {
    frames
        .iter()
        .filter(|f| f["type"] == "thread.event" && f["threadId"] == thread)
        .map(|f| f["event"]["seq"].as_u64().expect("event seq"))
        .collect()
}

/// The frames of type `kind`.
pub fn of_type<'a>(frames: &'a [Value], kind: &str) -> Vec<&'a Value> {
    frames.iter().filter(|f| f["type"] == kind).collect()
}

/// The `thread.subscription_opened` frame.
pub fn opened(thread: &str, through_seq: u64) -> Value {
    json!({ "type": "thread.subscription_opened", "threadId": thread, "throughSeq": through_seq })
}

/// The `thread.subscription_closed` frame.
pub fn closed(thread: &str, reason: &str) -> Value {
    json!({ "type": "thread.subscription_closed", "threadId": thread, "reason": reason })
}

/// Panics unless `frame` is an error with `code`, scoped to `thread` (or
/// unscoped: no `threadId` key at all, when `thread` is `None`).
#[track_caller]
pub fn assert_error(frame: &Value, thread: Option<&str>, code: &str) {
    assert_eq!(frame["type"], "error", "not an error frame: {frame}");
    assert_eq!(frame["code"], code, "wrong code: {frame}");
    assert!(
        frame["message"].is_string(),
        "error without message: {frame}"
    );
    match thread {
        Some(t) => assert_eq!(frame["threadId"], t, "wrong scope: {frame}"),
        None => assert!(
            frame.get("threadId").is_none(),
            "error should be unscoped: {frame}"
        ),
    }
}

/// The forbidden message of SPEC §3.
pub fn forbidden_message(principal: &str, capability: &str, thread: &str) -> String {
    format!("Principal \"{principal}\" lacks \"{capability}\" on thread \"{thread}\".")
}
