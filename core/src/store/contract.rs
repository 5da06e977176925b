//! The store contract: behaviour every storage backend must keep.
//!
//! Each case drives a real [`Engine`] over the backend under test through the
//! HTTP API, applying every [`Output::Persist`] batch to the backend's writer
//! and reading history through its [`EventStore`]. The `reopen` cases drop
//! the engine and the writer, open the same data again and rebuild the
//! engine from [`Backend::load`], as a restarted server would.
//!
//! A backend's test file implements [`ContractBackend`] and either calls
//! [`run_all`] or lists the cases with [`store_contract_tests!`]:
//!
//! ```ignore
//! struct Memory(MemoryStore);
//! impl ContractBackend for Memory {
//!     type Writer = MemoryStore;
//!     fn open(&self) -> (MemoryStore, Box<dyn EventStore>) {
//!         (self.0.clone(), Box::new(self.0.clone()))
//!     }
//! }
//! bubble_core::store_contract_tests!(Memory(MemoryStore::default()));
//! ```

use serde_json::{json, Value};

use crate::http::{HttpRequest, Method};
use crate::store::{Backend, EventStore};
use crate::{Config, Engine, Input, Millis, Output, PrincipalId, RequestId};

/// A backend under test.
pub trait ContractBackend {
    /// The writer half: applies batches and loads the start-up snapshot.
    type Writer: Backend;

    /// Opens the backend's data: a writer and a reader for the engine.
    ///
    /// Each case starts from a value whose data is empty. `open` is called
    /// again on the same value to simulate a restart over the same data;
    /// the previous writer and reader are dropped first.
    fn open(&self) -> (Self::Writer, Box<dyn EventStore>);
}

/// A named contract case.
pub type Case<C> = (&'static str, fn(&C));

/// Every case, by name, for backends that run them in a loop.
pub fn cases<C: ContractBackend>() -> Vec<Case<C>> {
    vec![
        (
            "create_thread_returns_empty_snapshot",
            create_thread_returns_empty_snapshot::<C>,
        ),
        (
            "create_thread_is_idempotent",
            create_thread_is_idempotent::<C>,
        ),
        ("create_thread_rejections", create_thread_rejections::<C>),
        ("get_thread_shape", get_thread_shape::<C>),
        ("head_seq_counts_appends", head_seq_counts_appends::<C>),
        ("title_set_and_clear", title_set_and_clear::<C>),
        ("seqs_are_gapless", seqs_are_gapless::<C>),
        ("idempotency_keys", idempotency_keys::<C>),
        ("history_paging", history_paging::<C>),
        ("grants", grants::<C>),
        ("participants", participants::<C>),
        (
            "reopen_keeps_threads_and_events",
            reopen_keeps_threads_and_events::<C>,
        ),
        (
            "reopen_keeps_grants_and_participants",
            reopen_keeps_grants_and_participants::<C>,
        ),
        (
            "reopen_keeps_idempotency_keys",
            reopen_keeps_idempotency_keys::<C>,
        ),
        ("reopen_continues_seqs", reopen_continues_seqs::<C>),
    ]
}

/// Runs every case, each on a fresh value from `fresh`.
pub fn run_all<C: ContractBackend>(fresh: impl Fn() -> C) {
    for (_name, case) in cases::<C>() {
        case(&fresh());
    }
}

/// Declares one `#[test]` per contract case; `$fresh` is an expression that
/// builds a fresh [`ContractBackend`] (evaluated once per case).
#[macro_export]
macro_rules! store_contract_tests {
    ($fresh:expr) => {
        $crate::store_contract_tests!(@cases $fresh;
            create_thread_returns_empty_snapshot, create_thread_is_idempotent,
            create_thread_rejections, get_thread_shape, head_seq_counts_appends,
            title_set_and_clear, seqs_are_gapless, idempotency_keys, history_paging,
            grants, participants, reopen_keeps_threads_and_events,
            reopen_keeps_grants_and_participants, reopen_keeps_idempotency_keys,
            reopen_continues_seqs);
    };
    (@cases $fresh:expr; $($case:ident),*) => {
        $(
            #[test]
            fn $case() {
                $crate::store::contract::$case(&$fresh);
            }
        )*
    };
}

const ADMIN: &str = "root";
const START: u64 = 1_796_031_850_000;

fn config() -> Config {
    let mut config = Config::default();
    config.admins.push(PrincipalId::new(ADMIN));
    for p in [ADMIN, "alice", "bob", "carol"] {
        config
            .auth
            .tokens
            .push((format!("token-{p}"), PrincipalId::new(p)));
    }
    config
}

/// A status and parsed JSON body (`Null` when empty).
struct Reply {
    status: u16,
    body: Value,
}

impl Reply {
    #[track_caller]
    fn expect(self, status: u16) -> Value {
        assert_eq!(self.status, status, "unexpected reply: {}", self.body);
        self.body
    }

    #[track_caller]
    fn expect_ok(self) -> Value {
        assert!(
            (200..300).contains(&self.status),
            "unexpected reply {}: {}",
            self.status,
            self.body
        );
        self.body
    }

    #[track_caller]
    fn expect_error(self, status: u16, code: &str) {
        assert_eq!(self.status, status, "unexpected reply: {}", self.body);
        assert_eq!(
            self.body["error"]["code"], code,
            "unexpected reply: {}",
            self.body
        );
    }
}

/// One running engine over the backend, driven like a host drives it.
struct Node<W: Backend> {
    engine: Engine,
    writer: W,
    now: u64,
    next_req: u64,
}

impl<W: Backend> Node<W> {
    fn start<C: ContractBackend<Writer = W>>(backend: &C, now: u64) -> Node<W> {
        let (writer, reader) = backend.open();
        let snapshot = writer.load().expect("the backend loads its snapshot");
        let engine = Engine::new(config(), 1, snapshot, reader).expect("the snapshot is valid");
        Node {
            engine,
            writer,
            now,
            next_req: 1,
        }
    }

    /// Drops this node and starts another over the same data, later.
    fn restart<C: ContractBackend<Writer = W>>(self, backend: &C) -> Node<W> {
        let now = self.now + 1_000;
        drop(self);
        Node::start(backend, now)
    }

    fn call(
        &mut self,
        method: Method,
        who: &str,
        target: &str,
        body: Option<&Value>,
        idempotency_key: Option<&str>,
    ) -> Reply {
        self.now += 1;
        let req = RequestId(self.next_req);
        self.next_req += 1;
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let authorization = format!("Bearer token-{who}");
        let body = body.map(Value::to_string).unwrap_or_default();
        let request = HttpRequest {
            method,
            path,
            query,
            authorization: Some(&authorization),
            idempotency_key,
            body: body.as_bytes(),
        };
        let now = Millis(self.now);
        self.engine
            .handle(now, Input::Http { req, request })
            .expect("valid input");
        let mut reply = None;
        while let Some(out) = self.engine.poll_output() {
            match out {
                Output::Persist { batch, writes } => {
                    self.writer
                        .apply(&writes)
                        .expect("the backend applies the engine's writes");
                    self.engine
                        .handle(now, Input::Persisted { batch })
                        .expect("issued batch");
                }
                Output::Respond { req: r, response } if r == req => {
                    let body = if response.body.is_empty() {
                        Value::Null
                    } else {
                        serde_json::from_str(&response.body).expect("JSON response body")
                    };
                    reply = Some(Reply {
                        status: response.status,
                        body,
                    });
                }
                _ => {}
            }
        }
        reply.unwrap_or_else(|| panic!("no reply to {target}"))
    }

    fn get(&mut self, who: &str, target: &str) -> Reply {
        self.call(Method::Get, who, target, None, None)
    }

    fn post(&mut self, who: &str, target: &str, body: Value) -> Reply {
        self.call(Method::Post, who, target, Some(&body), None)
    }

    fn delete(&mut self, who: &str, target: &str) -> Reply {
        self.call(Method::Delete, who, target, None, None)
    }

    fn grant(&mut self, who: &str, thread: &str, principal: &str, role: &str) -> Reply {
        let body = json!({ "role": role });
        let target = format!("/v1/threads/{thread}/grants/{principal}");
        self.call(Method::Put, who, &target, Some(&body), None)
    }

    fn create(&mut self, who: &str, thread: &str, parent: Option<&str>) -> Reply {
        let mut body = json!({ "threadId": thread });
        if let Some(parent) = parent {
            body["parentThreadId"] = json!(parent);
        }
        self.post(who, "/v1/threads", body)
    }

    fn thread(&mut self, thread: &str) -> Value {
        self.get(ADMIN, &format!("/v1/threads/{thread}"))
            .expect(200)
    }

    fn append(&mut self, who: &str, thread: &str, run: &str, key: Option<&str>) -> Reply {
        let body = json!({ "type": "run_started", "runId": run });
        self.call(
            Method::Post,
            who,
            &format!("/v1/threads/{thread}/events"),
            Some(&body),
            key,
        )
    }

    fn title(&mut self, who: &str, thread: &str, title: Value) -> Reply {
        let body = json!({ "title": title });
        self.call(
            Method::Patch,
            who,
            &format!("/v1/threads/{thread}"),
            Some(&body),
            None,
        )
    }

    fn history(&mut self, thread: &str) -> Vec<Value> {
        let mut events = Vec::new();
        let mut from = 1;
        loop {
            let target = format!("/v1/threads/{thread}/events?fromSeq={from}&limit=1000");
            let page = self.get(ADMIN, &target).expect(200);
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

    fn grant_rows(&mut self, thread: &str) -> Vec<Value> {
        let body = self
            .get(ADMIN, &format!("/v1/threads/{thread}/grants"))
            .expect(200);
        let rows = if body.is_array() {
            &body
        } else {
            &body["grants"]
        };
        let mut rows = rows.as_array().expect("grant rows").clone();
        rows.sort_by(|a, b| a["principalId"].as_str().cmp(&b["principalId"].as_str()));
        rows
    }
}

fn seqs(events: &[Value]) -> Vec<u64> {
    events
        .iter()
        .map(|e| e["seq"].as_u64().expect("seq"))
        .collect()
}

fn types(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e["type"].as_str().expect("type"))
        .collect()
}

#[track_caller]
fn assert_rfc3339_millis(value: &Value) {
    let s = value
        .as_str()
        .unwrap_or_else(|| panic!("not a timestamp: {value}"));
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| r.into_iter().all(|i| b[i].is_ascii_digit());
    let ok = b.len() == 24
        && digits(0..4)
        && b[4] == b'-'
        && digits(5..7)
        && b[7] == b'-'
        && digits(8..10)
        && b[10] == b'T'
        && digits(11..13)
        && b[13] == b':'
        && digits(14..16)
        && b[16] == b':'
        && digits(17..19)
        && b[19] == b'.'
        && digits(20..23)
        && b[23] == b'Z';
    assert!(ok, "not RFC 3339 UTC with milliseconds: {s}");
}

#[track_caller]
fn assert_keys(value: &Value, keys: &[&str]) {
    let mut got: Vec<&str> = value
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    got.sort_unstable();
    let mut want = keys.to_vec();
    want.sort_unstable();
    assert_eq!(got, want, "keys of {value}");
}

/// A new thread is empty: `headSeq` 0, no participants, no parent, no title.
pub fn create_thread_returns_empty_snapshot<C: ContractBackend>(backend: &C) {
    let mut node = Node::start(backend, START);
    let thread = node.create("alice", "thread-42", None).expect(201);
    assert_eq!(thread["threadId"], "thread-42");
    assert_eq!(thread["headSeq"], 0);
    assert_eq!(thread["participants"], json!([]));
    assert_keys(
        &thread,
        &["threadId", "headSeq", "createdAt", "participants"],
    );
    assert_rfc3339_millis(&thread["createdAt"]);
    assert_eq!(node.thread("thread-42"), thread);
}

/// Creating an existing thread with the same parent returns it unchanged.
pub fn create_thread_is_idempotent<C: ContractBackend>(backend: &C) {
    let mut node = Node::start(backend, START);
    let first = node.create("alice", "thread-42", None).expect(201);
    assert_eq!(node.create("alice", "thread-42", None).expect(200), first);
    let child = node
        .create("alice", "thread-child", Some("thread-42"))
        .expect(201);
    assert_eq!(child["parentThreadId"], "thread-42");
    assert_eq!(
        node.create("alice", "thread-child", Some("thread-42"))
            .expect(200),
        child
    );
}

/// The four rejections of createThread, and the parent relation unchanged.
pub fn create_thread_rejections<C: ContractBackend>(backend: &C) {
    let mut node = Node::start(backend, START);
    node.create("alice", "thread-root", None).expect(201);
    node.create("alice", "thread-other", None).expect(201);
    node.create("alice", "thread-child", Some("thread-root"))
        .expect(201);
    // A top-level thread cannot become a subthread.
    node.create("alice", "thread-other", Some("thread-root"))
        .expect_error(409, "conflict");
    // A subthread cannot move to another parent.
    node.create("alice", "thread-child", Some("thread-other"))
        .expect_error(409, "conflict");
    // A subthread cannot become top-level.
    node.create("alice", "thread-child", None)
        .expect_error(409, "conflict");
    // The parent must exist.
    node.create("alice", "thread-orphan", Some("thread-missing"))
        .expect_error(404, "not_found");
    // A thread cannot be its own parent.
    node.create("alice", "thread-self", Some("thread-self"))
        .expect_error(400, "invalid_request");
    assert!(node.thread("thread-other").get("parentThreadId").is_none());
    assert_eq!(node.thread("thread-child")["parentThreadId"], "thread-root");
    node.get(ADMIN, "/v1/threads/thread-orphan")
        .expect_error(404, "not_found");
    node.get(ADMIN, "/v1/threads/thread-self")
        .expect_error(404, "not_found");
}

/// `getThread`: exactly the `BubbleThread` keys; `parentThreadId` only on
/// subthreads, `title` only when set.
pub fn get_thread_shape<C: ContractBackend>(backend: &C) {
    let mut node = Node::start(backend, START);
    node.create("alice", "thread-root", None).expect(201);
    node.create("alice", "thread-child", Some("thread-root"))
        .expect(201);
    let root = node.get("alice", "/v1/threads/thread-root").expect(200);
    assert_keys(&root, &["threadId", "headSeq", "createdAt", "participants"]);
    let child = node.get("alice", "/v1/threads/thread-child").expect(200);
    assert_keys(
        &child,
        &[
            "threadId",
            "parentThreadId",
            "headSeq",
            "createdAt",
            "participants",
        ],
    );
    assert_eq!(child["parentThreadId"], "thread-root");
    node.title("alice", "thread-root", json!("Planning"))
        .expect(200);
    let root = node.get("alice", "/v1/threads/thread-root").expect(200);
    assert_keys(
        &root,
        &["threadId", "title", "headSeq", "createdAt", "participants"],
    );
    assert_eq!(root["title"], "Planning");
    node.get("alice", "/v1/threads/thread-none")
        .expect_error(404, "not_found");
}

/// `headSeq` grows by one per append and is per thread.
pub fn head_seq_counts_appends<C: ContractBackend>(backend: &C) {
    let mut node = Node::start(backend, START);
    node.create("alice", "thread-root", None).expect(201);
    node.create("alice", "thread-child", Some("thread-root"))
        .expect(201);
    for n in 1..=3 {
        let event = node
            .append("alice", "thread-root", &format!("run-{n}"), None)
            .expect(201);
        assert_eq!(event["event"]["seq"], n);
        assert_eq!(node.thread("thread-root")["headSeq"], n);
    }
    assert_eq!(node.thread("thread-child")["headSeq"], 0);
    assert!(node.history("thread-child").is_empty());
}

/// Title set, replace, clear; `thread_title_updated` only on change.
pub fn title_set_and_clear<C: ContractBackend>(backend: &C) {
    let mut node = Node::start(backend, START);
    node.create("alice", "thread-42", None).expect(201);
    let set = node
        .title("alice", "thread-42", json!("Q3 planning"))
        .expect(200);
    assert_eq!(set["title"], "Q3 planning");
    assert_eq!(set["headSeq"], 1);
    node.title("alice", "thread-42", json!("Q3 planning"))
        .expect(200);
    let body = json!({});
    let untouched = node
        .call(
            Method::Patch,
            "alice",
            "/v1/threads/thread-42",
            Some(&body),
            None,
        )
        .expect(200);
    assert_eq!(untouched["title"], "Q3 planning");
    let cleared = node.title("alice", "thread-42", Value::Null).expect(200);
    assert!(
        cleared.get("title").is_none(),
        "a cleared title has no key: {cleared}"
    );
    node.title("alice", "thread-42", Value::Null).expect(200);
    let history = node.history("thread-42");
    assert_eq!(seqs(&history), [1, 2]);
    assert_eq!(history[0]["type"], "thread_title_updated");
    assert_eq!(history[0]["byPrincipalId"], "alice");
    assert_eq!(history[0]["title"], "Q3 planning");
    assert_eq!(history[1]["type"], "thread_title_updated");
    assert_eq!(history[1]["title"], Value::Null);
    assert_eq!(node.thread("thread-42")["headSeq"], 2);
}

/// Seqs run 1, 2, … without gaps; each persisted event carries `seq`,
/// `threadId`, `createdAt` and its body verbatim.
pub fn seqs_are_gapless<C: ContractBackend>(backend: &C) {
    let mut node = Node::start(backend, START);
    node.create("alice", "thread-1", None).expect(201);
    node.create("alice", "thread-2", None).expect(201);
    let part =
        json!({ "type": "text-delta", "id": "m1", "delta": "Hel", "extra": { "k": [1, 2] } });
    let bodies = [
        json!({ "type": "run_started", "runId": "run-1" }),
        json!({ "type": "message_part", "runId": "run-1", "part": part, "version": "ai-sdk-v6" }),
        json!({ "type": "tool_call_approval", "runId": "run-1", "toolCallId": "c1", "approved": false, "reason": "no" }),
        json!({ "type": "run_finished", "runId": "run-1", "status": "completed" }),
    ];
    for (i, body) in bodies.iter().enumerate() {
        let event = node
            .post("alice", "/v1/threads/thread-1/events", body.clone())
            .expect(201);
        assert_eq!(event["event"]["seq"], i + 1);
        node.append("alice", "thread-2", "run-x", None).expect(201);
    }
    let history = node.history("thread-1");
    assert_eq!(seqs(&history), [1, 2, 3, 4]);
    for (event, body) in history.iter().zip(&bodies) {
        assert_eq!(event["threadId"], "thread-1");
        assert_eq!(event["principalId"], "alice");
        assert_rfc3339_millis(&event["createdAt"]);
        for (key, value) in body.as_object().expect("object") {
            assert_eq!(&event[key], value, "field {key} of {event}");
        }
    }
    assert_eq!(seqs(&node.history("thread-2")), [1, 2, 3, 4]);
}

/// A repeated idempotency key returns the original event and appends nothing.
pub fn idempotency_keys<C: ContractBackend>(backend: &C) {
    let mut node = Node::start(backend, START);
    node.create("alice", "thread-1", None).expect(201);
    node.create("alice", "thread-2", None).expect(201);
    let first = node
        .append("alice", "thread-1", "run-1", Some("key-1"))
        .expect(201);
    node.append("alice", "thread-1", "run-2", None).expect(201);
    let again = node
        .append("alice", "thread-1", "run-1", Some("key-1"))
        .expect(200);
    assert_eq!(again["event"], first["event"]);
    assert_eq!(again["duplicate"], true);
    assert_eq!(node.thread("thread-1")["headSeq"], 2);
    // Keys are scoped to their thread.
    let other = node
        .append("alice", "thread-2", "run-1", Some("key-1"))
        .expect(201);
    assert_eq!(other["event"]["seq"], 1);
    let next = node
        .append("alice", "thread-1", "run-3", Some("key-2"))
        .expect(201);
    assert_eq!(next["event"]["seq"], 3);
    assert_eq!(seqs(&node.history("thread-1")), [1, 2, 3]);
}

/// History pages: `fromSeq`, `limit`, `nextSeq` null once the page reaches
/// the head; bad parameters are `invalid_request`.
pub fn history_paging<C: ContractBackend>(backend: &C) {
    let mut node = Node::start(backend, START);
    node.create("alice", "thread-1", None).expect(201);
    for n in 1..=7 {
        node.append("alice", "thread-1", &format!("run-{n}"), None)
            .expect(201);
    }
    let page = |node: &mut Node<C::Writer>, query: &str| {
        node.get("alice", &format!("/v1/threads/thread-1/events?{query}"))
            .expect(200)
    };
    let p = page(&mut node, "fromSeq=1&limit=3");
    assert_eq!(seqs(p["events"].as_array().expect("events")), [1, 2, 3]);
    assert_eq!(p["nextSeq"], 4);
    let p = page(&mut node, "fromSeq=4&limit=3");
    assert_eq!(seqs(p["events"].as_array().expect("events")), [4, 5, 6]);
    assert_eq!(p["nextSeq"], 7);
    let p = page(&mut node, "fromSeq=7&limit=3");
    assert_eq!(seqs(p["events"].as_array().expect("events")), [7]);
    assert_eq!(p["nextSeq"], Value::Null);
    let p = page(&mut node, "fromSeq=5&limit=3");
    assert_eq!(seqs(p["events"].as_array().expect("events")), [5, 6, 7]);
    assert_eq!(p["nextSeq"], Value::Null);
    let p = page(&mut node, "fromSeq=8");
    assert_eq!(p["events"], json!([]));
    assert_eq!(p["nextSeq"], Value::Null);
    let p = node.get("alice", "/v1/threads/thread-1/events").expect(200);
    assert_eq!(
        seqs(p["events"].as_array().expect("events")),
        [1, 2, 3, 4, 5, 6, 7]
    );
    assert_eq!(p["nextSeq"], Value::Null);
    let p = page(&mut node, "limit=1000");
    assert_eq!(p["events"].as_array().map(Vec::len), Some(7));
    for bad in [
        "fromSeq=0",
        "limit=0",
        "limit=1001",
        "fromSeq=abc",
        "limit=-1",
        "fromSeq=1.5",
    ] {
        node.get("alice", &format!("/v1/threads/thread-1/events?{bad}"))
            .expect_error(400, "invalid_request");
    }
}

/// Grants: the creator owns; put, list, replace, delete; access follows.
pub fn grants<C: ContractBackend>(backend: &C) {
    let mut node = Node::start(backend, START);
    node.create("alice", "thread-1", None).expect(201);
    let rows = node.grant_rows("thread-1");
    assert_eq!(
        rows,
        [json!({ "threadId": "thread-1", "principalId": "alice", "role": "owner" })]
    );
    node.get("bob", "/v1/threads/thread-1")
        .expect_error(404, "not_found");
    let row = node.grant("alice", "thread-1", "bob", "reader").expect_ok();
    assert_eq!(
        row,
        json!({ "threadId": "thread-1", "principalId": "bob", "role": "reader" })
    );
    node.get("bob", "/v1/threads/thread-1").expect(200);
    node.append("bob", "thread-1", "run-1", None)
        .expect_error(403, "forbidden");
    node.grant("alice", "thread-1", "bob", "member").expect_ok();
    node.append("bob", "thread-1", "run-1", None).expect(201);
    assert_eq!(
        node.grant_rows("thread-1"),
        [
            json!({ "threadId": "thread-1", "principalId": "alice", "role": "owner" }),
            json!({ "threadId": "thread-1", "principalId": "bob", "role": "member" }),
        ]
    );
    node.delete("alice", "/v1/threads/thread-1/grants/bob")
        .expect(204);
    node.get("bob", "/v1/threads/thread-1")
        .expect_error(404, "not_found");
    assert_eq!(node.grant_rows("thread-1").len(), 1);
}

/// Participants: join and leave append `participant_joined` and
/// `participant_left`; the snapshot lists the current rows.
pub fn participants<C: ContractBackend>(backend: &C) {
    let mut node = Node::start(backend, START);
    node.create("alice", "thread-1", None).expect(201);
    node.grant("alice", "thread-1", "bob", "member").expect_ok();
    let row = node
        .post("bob", "/v1/threads/thread-1/participants", json!({}))
        .expect_ok();
    assert_eq!(row["principalId"], "bob");
    assert!(row["role"].is_string(), "participant row has a role: {row}");
    assert_rfc3339_millis(&row["joinedAt"]);
    assert_keys(&row, &["principalId", "role", "joinedAt"]);
    let added = node
        .post(
            "alice",
            "/v1/threads/thread-1/participants",
            json!({ "principalId": "carol", "role": "reader" }),
        )
        .expect_ok();
    assert_eq!(added["principalId"], "carol");
    let thread = node.thread("thread-1");
    assert_eq!(thread["participants"], json!([row, added]));
    node.delete("bob", "/v1/threads/thread-1/participants/bob")
        .expect(204);
    let history = node.history("thread-1");
    assert_eq!(
        types(&history),
        [
            "participant_joined",
            "participant_joined",
            "participant_left"
        ]
    );
    assert_eq!(history[0]["principalId"], "bob");
    assert_eq!(history[0]["role"], row["role"]);
    assert_eq!(history[1]["principalId"], "carol");
    assert_eq!(history[2]["principalId"], "bob");
    assert_eq!(node.thread("thread-1")["participants"], json!([added]));
    assert_eq!(node.thread("thread-1")["headSeq"], 3);
}

/// After a restart the same threads, titles and events are served.
pub fn reopen_keeps_threads_and_events<C: ContractBackend>(backend: &C) {
    let mut node = Node::start(backend, START);
    node.create("alice", "thread-root", None).expect(201);
    node.create("alice", "thread-child", Some("thread-root"))
        .expect(201);
    node.create("alice", "thread-plain", None).expect(201);
    node.title("alice", "thread-root", json!("Q3 planning"))
        .expect(200);
    for n in 1..=4 {
        node.append("alice", "thread-child", &format!("run-{n}"), None)
            .expect(201);
    }
    let before: Vec<(Value, Vec<Value>)> = ["thread-root", "thread-child", "thread-plain"]
        .iter()
        .map(|t| (node.thread(t), node.history(t)))
        .collect();
    let mut node = node.restart(backend);
    let after: Vec<(Value, Vec<Value>)> = ["thread-root", "thread-child", "thread-plain"]
        .iter()
        .map(|t| (node.thread(t), node.history(t)))
        .collect();
    assert_eq!(after, before);
    // The creation rules still see the stored parents.
    node.create("alice", "thread-child", Some("thread-root"))
        .expect(200);
    node.create("alice", "thread-child", None)
        .expect_error(409, "conflict");
    node.create("alice", "thread-plain", Some("thread-root"))
        .expect_error(409, "conflict");
    // The title is remembered: setting it again appends nothing.
    node.title("alice", "thread-root", json!("Q3 planning"))
        .expect(200);
    assert_eq!(node.thread("thread-root")["headSeq"], 1);
}

/// After a restart grants and participants still decide access.
pub fn reopen_keeps_grants_and_participants<C: ContractBackend>(backend: &C) {
    let mut node = Node::start(backend, START);
    node.create("alice", "thread-1", None).expect(201);
    node.grant("alice", "thread-1", "bob", "member").expect_ok();
    node.grant("alice", "thread-1", "carol", "reader")
        .expect_ok();
    node.post("bob", "/v1/threads/thread-1/participants", json!({}))
        .expect_ok();
    node.create("alice", "thread-child", Some("thread-1"))
        .expect(201);
    let grants = node.grant_rows("thread-1");
    let thread = node.thread("thread-1");
    let mut node = node.restart(backend);
    assert_eq!(node.grant_rows("thread-1"), grants);
    assert_eq!(node.thread("thread-1"), thread);
    // Grants on the parent still confer read access on the child.
    node.get("carol", "/v1/threads/thread-child").expect(200);
    node.get("bob", "/v1/threads/thread-child").expect(200);
    node.append("bob", "thread-1", "run-1", None).expect(201);
    node.append("carol", "thread-1", "run-1", None)
        .expect_error(403, "forbidden");
    node.delete("bob", "/v1/threads/thread-1/participants/bob")
        .expect(204);
    assert_eq!(node.thread("thread-1")["participants"], json!([]));
}

/// After a restart a repeated idempotency key still appends nothing.
pub fn reopen_keeps_idempotency_keys<C: ContractBackend>(backend: &C) {
    let mut node = Node::start(backend, START);
    node.create("alice", "thread-1", None).expect(201);
    let first = node
        .append("alice", "thread-1", "run-1", Some("key-1"))
        .expect(201);
    let mut node = node.restart(backend);
    let again = node
        .append("alice", "thread-1", "run-1", Some("key-1"))
        .expect(200);
    assert_eq!(again["event"], first["event"]);
    assert_eq!(again["duplicate"], true);
    assert_eq!(node.thread("thread-1")["headSeq"], 1);
}

/// After a restart appends continue at the stored head, without gaps.
pub fn reopen_continues_seqs<C: ContractBackend>(backend: &C) {
    let mut node = Node::start(backend, START);
    node.create("alice", "thread-1", None).expect(201);
    node.append("alice", "thread-1", "run-1", None).expect(201);
    node.append("alice", "thread-1", "run-2", None).expect(201);
    let mut node = node.restart(backend);
    let next = node.append("alice", "thread-1", "run-3", None).expect(201);
    assert_eq!(next["event"]["seq"], 3);
    let mut node = node.restart(backend);
    node.create("alice", "thread-2", None).expect(201);
    assert_eq!(
        node.append("alice", "thread-1", "run-4", None).expect(201)["event"]["seq"],
        4
    );
    assert_eq!(seqs(&node.history("thread-1")), [1, 2, 3, 4]);
}
