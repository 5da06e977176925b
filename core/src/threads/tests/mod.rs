//! Engine-level checks of the threads engine's own decisions: paged replay
//! racing appends, the durability fence, revocation, limits, and the HTTP
//! behaviour that docs/threads-engine.md documents.

use std::collections::VecDeque;

use serde_json::{json, Value};

use crate::http::{HttpRequest, Method};
use crate::store::{Backend, Batch, MemoryStore};
use crate::{
    BatchId, Config, ConnId, Engine, Input, Millis, Output, PrincipalId, RequestId, WsFrame,
};

pub(super) struct Host {
    engine: Engine,
    store: MemoryStore,
    held: VecDeque<(BatchId, Batch)>,
    hold: bool,
    drains: Vec<ConnId>,
    frames: Vec<(ConnId, Value)>,
    closes: Vec<(ConnId, u16)>,
    responses: Vec<(u16, Value)>,
}

impl Host {
    fn new(backlog_page: usize) -> Host {
        Host::with(crate::Limits {
            backlog_page,
            ..crate::Limits::default()
        })
    }

    fn with(limits: crate::Limits) -> Host {
        let mut config = Config {
            limits,
            ..Config::default()
        };
        for p in ["alice", "bob"] {
            config
                .auth
                .tokens
                .push((format!("t-{p}"), PrincipalId::new(p)));
        }
        let store = MemoryStore::default();
        let engine = Engine::new(config, 1);
        Host {
            engine,
            store,
            held: VecDeque::new(),
            hold: false,
            drains: Vec::new(),
            frames: Vec::new(),
            closes: Vec::new(),
            responses: Vec::new(),
        }
    }

    fn input(&mut self, input: Input<'_>) {
        self.engine.handle(Millis(1_000), input).unwrap();
        self.pump();
    }

    fn pump(&mut self) {
        loop {
            let mut reads = Vec::new();
            while let Some(out) = self.engine.poll_output() {
                self.output(out, &mut reads);
            }
            if reads.is_empty() {
                break;
            }
            for (read, query) in reads {
                let result = self.store.read(&query);
                let input = Input::ReadDone { read, result };
                self.engine.handle(Millis(1_000), input).unwrap();
            }
        }
        if !self.hold {
            self.persist_all();
        }
    }

    fn output(&mut self, out: Output, reads: &mut Vec<(crate::ReadId, crate::store::ReadQuery)>) {
        {
            match out {
                Output::Read { read, query } => reads.push((read, query)),
                Output::Persist { batch, writes } => self.held.push_back((batch, writes)),
                Output::Send { conn, frame } => self
                    .frames
                    .push((conn, serde_json::from_str(&frame).unwrap())),
                Output::SendAll { conns, frame } => {
                    let value: Value = serde_json::from_str(&frame).unwrap();
                    self.frames
                        .extend(conns.into_iter().map(|conn| (conn, value.clone())));
                }
                Output::Close { conn, reason } => {
                    self.closes.push((conn, reason.code().unwrap_or(1006)));
                }
                Output::Respond { response, .. } => {
                    let body = serde_json::from_str(&response.body).unwrap_or(Value::Null);
                    self.responses.push((response.status, body));
                }
                Output::WantDrained { conn } => self.drains.push(conn),
                Output::Ping { .. }
                | Output::Broadcast { .. }
                | Output::Claim { .. }
                | Output::Webhook { .. }
                | Output::FetchKeys => {}
            }
        }
    }

    fn persist_all(&mut self) {
        let mut last = None;
        while let Some((batch, writes)) = self.held.pop_front() {
            let refused = self.store.apply(&[&writes]).unwrap();
            assert_eq!(
                refused,
                [Vec::<crate::ThreadId>::new()],
                "one writer never conflicts"
            );
            last = Some(batch);
        }
        if let Some(batch) = last {
            self.input(Input::Persisted { batch });
        }
    }

    fn http(&mut self, method: Method, who: &str, target: &str, body: Value) -> (u16, Value) {
        let auth = format!("Bearer t-{who}");
        let body = if body.is_null() {
            String::new()
        } else {
            body.to_string()
        };
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let request = HttpRequest {
            method,
            path,
            query,
            authorization: Some(&auth),
            idempotency_key: None,
            body: body.as_bytes(),
        };
        self.input(Input::Http {
            req: RequestId(1),
            request,
        });
        self.responses.pop().expect("answered")
    }

    fn create(&mut self, who: &str, thread: &str, parent: Option<&str>) {
        let mut body = json!({ "threadId": thread });
        if let Some(parent) = parent {
            body["parentThreadId"] = json!(parent);
        }
        self.http(Method::Post, who, "/v1/threads", body);
    }

    fn status(&mut self, method: Method, who: &str, target: &str) -> u16 {
        self.http(method, who, target, Value::Null).0
    }

    fn append(&mut self, who: &str, n: usize) {
        for _ in 0..n {
            self.append_as(who, "t");
        }
    }

    fn append_as(&mut self, who: &str, thread: &str) {
        let event = json!({"type": "run_started", "runId": "r"});
        self.http(
            Method::Post,
            who,
            &format!("/v1/threads/{thread}/events"),
            event,
        );
    }

    fn open(&mut self, conn: u64, who: &str) -> ConnId {
        let token = format!("t-{who}");
        self.input(Input::OpenThreads {
            conn: ConnId(conn),
            token: Some(&token),
        });
        ConnId(conn)
    }

    fn send(&mut self, conn: ConnId, frame: Value) {
        let text = frame.to_string();
        self.input(Input::Frame {
            conn,
            frame: WsFrame::Text(&text),
        });
    }

    fn drain(&mut self) {
        for conn in std::mem::take(&mut self.drains) {
            self.input(Input::Drained { conn });
        }
    }

    fn take(&mut self, conn: ConnId) -> Vec<Value> {
        let (mine, rest) = std::mem::take(&mut self.frames)
            .into_iter()
            .partition(|(c, _)| *c == conn);
        self.frames = rest;
        mine.into_iter().map(|(_, f)| f).collect()
    }
}

fn seqs(frames: &[Value]) -> Vec<u64> {
    frames
        .iter()
        .filter(|f| f["type"] == "thread.event")
        .map(|f| f["event"]["seq"].as_u64().unwrap())
        .collect()
}

mod http;
mod ws;
