//! The harness of the contract cases: an engine over the backend under
//! test, driven through the HTTP API like a host drives it, and the
//! assertions the cases share.

use serde_json::{json, Value};

use super::ContractBackend;
use crate::http::{HttpRequest, Method};
use crate::store::{Backend, ReadQuery, StoreError};
use crate::{Config, Engine, Input, Millis, Output, PrincipalId, ReadId, RequestId, ThreadId};

pub(super) const ADMIN: &str = "root";
pub(super) const START: u64 = 1_796_031_850_000;

pub(super) fn config() -> Config {
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
pub(super) struct Reply {
    pub(super) status: u16,
    pub(super) body: Value,
}

impl Reply {
    #[track_caller]
    pub(super) fn expect(self, status: u16) -> Value {
        assert_eq!(self.status, status, "unexpected reply: {}", self.body);
        self.body
    }

    #[track_caller]
    pub(super) fn expect_ok(self) -> Value {
        assert!(
            (200..300).contains(&self.status),
            "unexpected reply {}: {}",
            self.status,
            self.body
        );
        self.body
    }

    #[track_caller]
    pub(super) fn expect_error(self, status: u16, code: &str) {
        assert_eq!(self.status, status, "unexpected reply: {}", self.body);
        assert_eq!(
            self.body["error"]["code"], code,
            "unexpected reply: {}",
            self.body
        );
    }
}

/// How a node answers the engine's reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reads {
    /// Each read is answered as soon as it is asked for.
    AtOnce,
    /// Reads wait, and complete in a random order (from this seed), with
    /// timer inputs in between.
    Shuffled(u64),
}

/// One running engine over the backend, driven like a host drives it.
pub(super) struct Node<W: Backend> {
    engine: Engine,
    writer: W,
    now: u64,
    next_req: u64,
    reads: Reads,
    rng: u64,
    /// Reads asked for and not answered yet.
    waiting: Vec<(ReadId, ReadQuery)>,
    /// Reads to fail instead of answering, by kind (`"events"`, …).
    fail: Option<&'static str>,
    /// What other engines over the same data must hear of our commits.
    pub(super) changed: Vec<(ThreadId, u64, u64)>,
}

fn kind(query: &ReadQuery) -> &'static str {
    match query {
        ReadQuery::Events { .. } => "events",
        ReadQuery::Idempotent { .. } => "idempotent",
        ReadQuery::Thread { .. } => "thread",
        ReadQuery::Threads { .. } => "threads",
    }
}

impl<W: Backend> Node<W> {
    pub(super) fn start<C: ContractBackend<Store = W>>(backend: &C, now: u64) -> Node<W> {
        Node::with(backend, now, 1, backend.reads())
    }

    /// A node with its own id seed (engines sharing data need distinct
    /// seeds) and read mode.
    pub(super) fn with<C: ContractBackend<Store = W>>(
        backend: &C,
        now: u64,
        seed: u64,
        reads: Reads,
    ) -> Node<W> {
        let rng = match reads {
            Reads::AtOnce => 0,
            Reads::Shuffled(seed) => seed | 1,
        };
        Node {
            engine: Engine::new(config(), seed),
            writer: backend.open(),
            now,
            next_req: 1,
            reads,
            rng,
            waiting: Vec::new(),
            fail: None,
            changed: Vec::new(),
        }
    }

    /// Drops this node and starts another over the same data, later.
    pub(super) fn restart<C: ContractBackend<Store = W>>(self, backend: &C) -> Node<W> {
        let now = self.now + 1_000;
        let reads = self.reads;
        drop(self);
        Node::with(backend, now, 2, reads)
    }

    /// Fails every read of `kind` from now on (`None`: answer them again).
    pub(super) fn fail_reads(&mut self, kind: Option<&'static str>) {
        self.fail = kind;
    }

    fn random(&mut self, n: usize) -> usize {
        // xorshift64: a deterministic order from the mode's seed.
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        usize::try_from(self.rng % n as u64).unwrap_or(0)
    }

    fn input(&mut self, input: Input<'_>) {
        self.engine
            .handle(Millis(self.now), input)
            .expect("valid input");
    }

    /// Tells the engine another writer changed `thread`.
    pub(super) fn hear(&mut self, thread: &ThreadId, head_seq: u64, version: u64) {
        self.input(Input::Changed {
            thread: thread.clone(),
            head_seq,
            version,
        });
        self.settle(None);
    }

    /// Performs outputs until nothing is waiting; returns the response to
    /// `req`, if one came.
    fn settle(&mut self, req: Option<RequestId>) -> Option<Reply> {
        let mut reply = None;
        loop {
            while let Some(out) = self.engine.poll_output() {
                match out {
                    Output::Persist { batch, writes } => {
                        let refused = self
                            .writer
                            .apply(&[&writes])
                            .expect("the backend applies the engine's writes")
                            .remove(0);
                        for group in &writes.threads {
                            if !refused.contains(&group.thread_id) {
                                let at = group.record.at();
                                self.changed.push((
                                    group.thread_id.clone(),
                                    at.head_seq,
                                    at.version,
                                ));
                            }
                        }
                        let input = if refused.is_empty() {
                            Input::Persisted { batch }
                        } else {
                            Input::PersistFailed {
                                batch,
                                conflicts: refused,
                            }
                        };
                        self.input(input);
                    }
                    Output::Read { read, query } => self.waiting.push((read, query)),
                    Output::Respond { req: r, response } if Some(r) == req => {
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
            if self.waiting.is_empty() {
                return reply;
            }
            let pick = match self.reads {
                Reads::AtOnce => 0,
                Reads::Shuffled(_) => self.random(self.waiting.len()),
            };
            let (read, query) = self.waiting.swap_remove(pick);
            let result = if self.fail == Some(kind(&query)) {
                Err(StoreError::Failed("injected read failure".into()))
            } else {
                self.writer.read(&query)
            };
            if let Reads::Shuffled(_) = self.reads {
                self.input(Input::Tick);
            }
            self.input(Input::ReadDone { read, result });
        }
    }

    pub(super) fn call(
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
        self.input(Input::Http { req, request });
        self.settle(Some(req))
            .unwrap_or_else(|| panic!("no reply to {target}"))
    }

    pub(super) fn get(&mut self, who: &str, target: &str) -> Reply {
        self.call(Method::Get, who, target, None, None)
    }

    pub(super) fn post(&mut self, who: &str, target: &str, body: Value) -> Reply {
        self.call(Method::Post, who, target, Some(&body), None)
    }

    pub(super) fn delete(&mut self, who: &str, target: &str) -> Reply {
        self.call(Method::Delete, who, target, None, None)
    }

    pub(super) fn grant(&mut self, who: &str, thread: &str, principal: &str, role: &str) -> Reply {
        let body = json!({ "role": role });
        let target = format!("/v1/threads/{thread}/grants/{principal}");
        self.call(Method::Put, who, &target, Some(&body), None)
    }

    pub(super) fn create(&mut self, who: &str, thread: &str, parent: Option<&str>) -> Reply {
        let mut body = json!({ "threadId": thread });
        if let Some(parent) = parent {
            body["parentThreadId"] = json!(parent);
        }
        self.post(who, "/v1/threads", body)
    }

    pub(super) fn thread(&mut self, thread: &str) -> Value {
        self.get(ADMIN, &format!("/v1/threads/{thread}"))
            .expect(200)
    }

    pub(super) fn append(
        &mut self,
        who: &str,
        thread: &str,
        run: &str,
        key: Option<&str>,
    ) -> Reply {
        let body = json!({ "type": "run_started", "runId": run });
        self.call(
            Method::Post,
            who,
            &format!("/v1/threads/{thread}/events"),
            Some(&body),
            key,
        )
    }

    pub(super) fn title(&mut self, who: &str, thread: &str, title: Value) -> Reply {
        let body = json!({ "title": title });
        self.call(
            Method::Patch,
            who,
            &format!("/v1/threads/{thread}"),
            Some(&body),
            None,
        )
    }

    pub(super) fn history(&mut self, thread: &str) -> Vec<Value> {
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

    pub(super) fn grant_rows(&mut self, thread: &str) -> Vec<Value> {
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

pub(super) fn seqs(events: &[Value]) -> Vec<u64> {
    events
        .iter()
        .map(|e| e["seq"].as_u64().expect("seq"))
        .collect()
}

pub(super) fn types(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e["type"].as_str().expect("type"))
        .collect()
}

#[track_caller]
pub(super) fn assert_rfc3339_millis(value: &Value) {
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
pub(super) fn assert_keys(value: &Value, keys: &[&str]) {
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
