//! One run of a scenario: the engine under a harness over a store (memory,
//! or a real backend from another crate's test), the reference model
//! beside it, and what every connection saw.

use std::collections::HashMap;

use bubble_core::http::Method;
use bubble_core::store::{Backend, MemoryStore, ReadQuery, ReadResult};
use bubble_core::{ConnId, Millis, RequestId, ThreadId};
use proptest::prelude::*;
use serde_json::{json, Value};

use crate::common::{self, Harness, ADMIN};
use crate::model::{Model, ThreadModel};
use crate::scenario::*;

/// A store a run can use: a [`Backend`] that a crash reopens.
pub(crate) trait Reopen: Backend {
    /// What a restarted process does to reach the same data again.
    fn reopen(&mut self);
}

/// The memory store outlives the engine: a restart finds it as it was.
impl Reopen for MemoryStore {
    fn reopen(&mut self) {}
}

/// What the client should see on one connection for one thread, in order,
/// apart from `thread.event` frames.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Marker {
    Opened(usize),
    Error(&'static str),
    Closed,
}

#[derive(Debug, Clone)]
pub(crate) struct Episode {
    pub(crate) from_seq: u64,
    pub(crate) through_lo: u64,
    pub(crate) through_hi: u64,
    /// The op index of the client's unsubscribe (or of the crash that
    /// ended its connection).
    pub(crate) unsubscribed_at: Option<usize>,
    pub(crate) revoked: bool,
}

#[derive(Debug, Default)]
pub(crate) struct Track {
    pub(crate) markers: Vec<Marker>,
    pub(crate) episodes: Vec<Episode>,
    pub(crate) active: Option<usize>,
}

/// An HTTP answer the model expects.
#[derive(Debug)]
pub(crate) enum Answer {
    Ok,
    Status(u16),
    Event {
        status: u16,
        seq: u64,
    },
    Error(u16, &'static str),
    /// A history page from `from`, at most `limit` events, resting on a
    /// head between the durable one (`lo`) and the model's (`runs.len()`)
    /// when it was asked; `runs` holds each seq's `runId`.
    Page {
        from: u64,
        limit: u64,
        lo: u64,
        runs: Vec<String>,
    },
    /// Asked before a crash that came before the answer: none comes.
    Lost,
}

pub(crate) struct Run<S: Reopen> {
    pub(crate) h: Harness<S>,
    pub(crate) model: Model,
    /// The open connection of each slot of [`CONNS`].
    conns: Vec<ConnId>,
    /// The connection instance each slot holds now; a reconnect starts a
    /// new instance.
    current: Vec<usize>,
    /// Every connection instance: its slot and whether it was closed.
    pub(crate) instances: Vec<(usize, bool)>,
    pub(crate) tracks: HashMap<(usize, usize), Track>,
    /// Frames per connection instance with the op index they arrived at.
    pub(crate) seen: Vec<Vec<(usize, Value)>>,
    pub(crate) answers: Vec<(RequestId, Answer, String)>,
}

impl<S: Reopen> Run<S> {
    fn new(s: &Scenario, store: S) -> Run<S> {
        let mut config = common::config();
        config.limits.backlog_page = s.backlog_page;
        let mut h = Harness::over(config, store, Millis(common::T0));
        if s.hold_persistence {
            h.hold_persistence();
        }
        if s.hold_drains {
            h.hold_drains();
        }
        if let Some(seed) = s.shuffle_reads {
            h.shuffle_reads(seed);
        }
        let conns = CONNS
            .iter()
            .map(|p| h.connect(&principal_name(*p)))
            .collect();
        Run {
            h,
            model: Model::default(),
            conns,
            current: (0..CONNS.len()).collect(),
            instances: (0..CONNS.len()).map(|slot| (slot, false)).collect(),
            tracks: HashMap::new(),
            seen: vec![Vec::new(); CONNS.len()],
            answers: Vec::new(),
        }
    }

    fn durable_head(&self, thread: usize) -> u64 {
        let query = ReadQuery::Thread {
            thread_id: ThreadId::parse(&thread_name(thread)).expect("valid thread id"),
        };
        match self.h.store.read(&query) {
            Ok(ReadResult::Thread(record)) => record.map_or(0, |r| r.head_seq),
            other => panic!("the store reads threads: {other:?}"),
        }
    }

    fn collect(&mut self, at: usize) {
        for (slot, conn) in self.conns.clone().into_iter().enumerate() {
            let frames = self.h.frames(conn);
            self.seen[self.current[slot]].extend(frames.into_iter().map(|f| (at, f)));
        }
    }

    fn track(&mut self, conn: usize, thread: usize) -> &mut Track {
        self.tracks.entry((self.current[conn], thread)).or_default()
    }

    fn step(&mut self, at: usize, op: &Op) {
        self.h.advance(1);
        match *op {
            Op::Create { thread, parent } => {
                let answer = match (self.model.threads.get(&thread), parent) {
                    (Some(existing), _) if existing.parent == parent => Answer::Status(200),
                    (Some(_), _) => Answer::Error(409, "conflict"),
                    (None, Some(p)) if !self.model.threads.contains_key(&p) => {
                        Answer::Error(404, "not_found")
                    }
                    (None, _) => {
                        self.model.threads.insert(
                            thread,
                            ThreadModel {
                                parent,
                                ..ThreadModel::default()
                            },
                        );
                        Answer::Status(201)
                    }
                };
                let mut body = json!({ "threadId": thread_name(thread) });
                if let Some(p) = parent {
                    body["parentThreadId"] = json!(thread_name(p));
                }
                let req = self.h.send_request(
                    Method::Post,
                    Some(ADMIN),
                    "/v1/threads",
                    Some(&body),
                    None,
                );
                self.answers.push((req, answer, format!("op {at}: {op:?}")));
            }
            Op::HttpAppend { thread, by, key } => {
                let answer = match self.model.append_denied(by, thread) {
                    Some("forbidden") => Answer::Error(403, "forbidden"),
                    Some(_) => Answer::Error(404, "not_found"),
                    None => match self.model.append_keyed(thread, key, format!("r{at}")) {
                        (seq, true) => Answer::Event { status: 200, seq },
                        (seq, false) => Answer::Event { status: 201, seq },
                    },
                };
                let key = key.map(|k| format!("key-{k}"));
                let target = format!("/v1/threads/{}/events", thread_name(thread));
                let body = json!({ "type": "run_started", "runId": format!("r{at}") });
                let req = self.h.send_request(
                    Method::Post,
                    Some(&principal_name(by)),
                    &target,
                    Some(&body),
                    key.as_deref(),
                );
                self.answers.push((req, answer, format!("op {at}: {op:?}")));
            }
            Op::WsAppend { conn, thread, key } => {
                match self.model.append_denied(CONNS[conn], thread) {
                    Some(code) => self.track(conn, thread).markers.push(Marker::Error(code)),
                    None => {
                        self.model.append_keyed(thread, key, format!("w{at}"));
                    }
                }
                let mut body = json!({ "type": "run_started", "runId": format!("w{at}") });
                if let Some(k) = key {
                    body["idempotencyKey"] = json!(format!("key-{k}"));
                }
                self.h
                    .ws_append(self.conns[conn], &thread_name(thread), body);
            }
            Op::Reconnect { conn } => {
                self.end_connection(at, conn);
                self.h.disconnect(self.conns[conn]);
                self.connect_again(conn);
            }
            Op::History {
                thread,
                by,
                from_seq,
                limit,
            } => {
                let answer = if self.model.readable(by, thread) {
                    let runs = self.model.threads[&thread].runs.clone();
                    Answer::Page {
                        from: from_seq,
                        limit,
                        lo: self.durable_head(thread),
                        runs,
                    }
                } else {
                    Answer::Error(404, "not_found")
                };
                let target = format!(
                    "/v1/threads/{}/events?fromSeq={from_seq}&limit={limit}",
                    thread_name(thread)
                );
                let req = self.h.send_request(
                    Method::Get,
                    Some(&principal_name(by)),
                    &target,
                    None,
                    None,
                );
                self.answers.push((req, answer, format!("op {at}: {op:?}")));
            }
            Op::Restart => {
                for conn in 0..CONNS.len() {
                    self.end_connection(at, conn);
                }
                for (req, answer, _) in &mut self.answers {
                    if !self.h.has_response(*req) {
                        *answer = Answer::Lost;
                    }
                }
                self.h.crash_and_restart(S::reopen);
                for conn in 0..CONNS.len() {
                    self.connect_again(conn);
                }
            }
            Op::Subscribe {
                conn,
                thread,
                from_seq,
            } => {
                let readable = self.model.readable(CONNS[conn], thread);
                let head = self.model.threads.get(&thread).map_or(0, |m| m.head);
                let durable = self.durable_head(thread);
                let track = self.track(conn, thread);
                if track.active.is_some() {
                    track.markers.push(Marker::Error("conflict"));
                } else if !readable {
                    track.markers.push(Marker::Error("not_found"));
                    track.markers.push(Marker::Closed);
                } else {
                    track.episodes.push(Episode {
                        from_seq,
                        through_lo: durable,
                        through_hi: head,
                        unsubscribed_at: None,
                        revoked: false,
                    });
                    track.active = Some(track.episodes.len() - 1);
                    track.markers.push(Marker::Opened(track.episodes.len() - 1));
                }
                self.h
                    .subscribe(self.conns[conn], &thread_name(thread), Some(from_seq));
            }
            Op::Unsubscribe { conn, thread } => {
                let track = self.track(conn, thread);
                let Some(active) = track.active.take() else {
                    return;
                };
                track.episodes[active].unsubscribed_at = Some(at);
                self.h.unsubscribe(self.conns[conn], &thread_name(thread));
            }
            Op::Grant {
                thread,
                principal,
                role,
            } => {
                if !self.model.threads.contains_key(&thread) {
                    return;
                }
                let target = format!(
                    "/v1/threads/{}/grants/{}",
                    thread_name(thread),
                    principal_name(principal)
                );
                let (req, answer) = match role {
                    Some(role) => {
                        self.model.grants.insert((thread, principal), role);
                        let body = json!({ "role": ROLES[role] });
                        (
                            self.h.send_request(
                                Method::Put,
                                Some(ADMIN),
                                &target,
                                Some(&body),
                                None,
                            ),
                            Answer::Ok,
                        )
                    }
                    None => {
                        if self.model.grants.remove(&(thread, principal)).is_none() {
                            return;
                        }
                        (
                            self.h
                                .send_request(Method::Delete, Some(ADMIN), &target, None, None),
                            Answer::Status(204),
                        )
                    }
                };
                self.answers.push((req, answer, format!("op {at}: {op:?}")));
                self.close_unreadable();
            }
            Op::Persist { batches } => self.h.persist(batches),
            Op::Drain { conn } => self.h.drain(self.conns[conn]),
        }
    }

    /// Connection `conn`'s current instance ends at op `at`: its
    /// subscriptions end as if unsubscribed then.
    fn end_connection(&mut self, at: usize, conn: usize) {
        for thread in 0..THREADS {
            let track = self.track(conn, thread);
            if let Some(active) = track.active.take() {
                track.episodes[active].unsubscribed_at = Some(at);
            }
        }
        self.instances[self.current[conn]].1 = true;
    }

    /// Slot `conn` connects again, as a new instance.
    fn connect_again(&mut self, conn: usize) {
        self.current[conn] = self.instances.len();
        self.instances.push((conn, false));
        self.seen.push(Vec::new());
        self.conns[conn] = self.h.connect(&principal_name(CONNS[conn]));
    }

    /// Subscriptions whose principal can no longer read end with a
    /// `not_found` error (denial hiding) and `subscription_closed`.
    fn close_unreadable(&mut self) {
        for (conn, principal) in CONNS.iter().enumerate() {
            for thread in 0..THREADS {
                let readable = self.model.readable(*principal, thread);
                let track = self.track(conn, thread);
                if let (Some(active), false) = (track.active, readable) {
                    track.active = None;
                    track.episodes[active].revoked = true;
                    track.markers.push(Marker::Error("not_found"));
                    track.markers.push(Marker::Closed);
                }
            }
        }
    }

    fn finish(&mut self, at: usize) {
        self.h.release_persistence();
        self.h.release_drains();
        self.collect(at);
    }
}

/// Runs scenario `s` over `store` and checks it.
pub(crate) fn run<S: Reopen>(s: &Scenario, store: S) -> Result<(), TestCaseError> {
    let mut run = Run::new(s, store);
    for (at, op) in s.ops.iter().enumerate() {
        run.step(at, op);
        run.collect(at);
    }
    run.finish(s.ops.len());
    run.check()
}

/// `PROPTEST_CASES` when set (for long local runs), else `default`.
pub(crate) fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Everything the clients saw: frames per connection (with the op they
/// arrived at) and every HTTP answer.
pub(crate) type Transcript = (Vec<Vec<(usize, Value)>>, Vec<Option<common::Resp>>);

/// Everything the clients saw when `s` ran over `store`.
pub(crate) fn transcript<S: Reopen>(s: &Scenario, store: S) -> Transcript {
    let mut run = Run::new(s, store);
    for (at, op) in s.ops.iter().enumerate() {
        run.step(at, op);
        run.collect(at);
    }
    run.finish(s.ops.len());
    let answers = std::mem::take(&mut run.answers);
    let responses = answers
        .iter()
        .map(|(req, _, _)| run.h.response(*req))
        .collect();
    (run.seen, responses)
}
