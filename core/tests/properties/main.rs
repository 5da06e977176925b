//! Property tests: random interleavings of thread creation, appends (some
//! repeating an idempotency key), subscribes with random `fromSeq`,
//! unsubscribes and grant changes across several connections, with random
//! persistence and drain delays, checked against a small reference model.
//!
//! Invariants:
//! - every thread's seqs are 1..=head, gapless, and head counts exactly the
//!   appends that were not idempotent repeats;
//! - every subscription delivers `fromSeq..=head` (or from `throughSeq + 1`
//!   when `fromSeq` is beyond the head) in order, once: backlog then live,
//!   however appends race the registration and the backlog pages;
//! - `throughSeq` is the head at registration;
//! - a connection receives only events its principal could read when they
//!   were appended, and loses its subscription (error, then
//!   `subscription_closed{not_found}`) when it can no longer read;
//! - every answer and error matches the model; nothing is acknowledged or
//!   delivered before it is durable (checked by the harness on every output).

mod check;
#[path = "../common/mod.rs"]
mod common;
mod model;
mod scenario;

use std::collections::HashMap;

use bubble_core::http::Method;
use bubble_core::store::{Backend, ReadQuery, ReadResult};
use bubble_core::{ConnId, RequestId, ThreadId};
use common::{Harness, ADMIN};
use model::{Model, ThreadModel};
use proptest::prelude::*;
use scenario::*;
use serde_json::{json, Value};

/// What the client should see on one connection for one thread, in order,
/// apart from `thread.event` frames.
#[derive(Debug, Clone, PartialEq)]
enum Marker {
    Opened(usize),
    Error(&'static str),
    Closed,
}

#[derive(Debug, Clone)]
struct Episode {
    from_seq: u64,
    through_lo: u64,
    through_hi: u64,
    /// The op index of the client's unsubscribe.
    unsubscribed_at: Option<usize>,
    revoked: bool,
}

#[derive(Debug, Default)]
struct Track {
    markers: Vec<Marker>,
    episodes: Vec<Episode>,
    active: Option<usize>,
}

/// An HTTP answer the model expects.
#[derive(Debug)]
enum Answer {
    Ok,
    Status(u16),
    Event { status: u16, seq: u64 },
    Error(u16, &'static str),
}

struct Run {
    h: Harness,
    model: Model,
    /// The open connection of each slot of [`CONNS`].
    conns: Vec<ConnId>,
    /// The connection instance each slot holds now; a reconnect starts a
    /// new instance.
    current: Vec<usize>,
    /// Every connection instance: its slot and whether it was closed.
    instances: Vec<(usize, bool)>,
    tracks: HashMap<(usize, usize), Track>,
    /// Frames per connection instance with the op index they arrived at.
    seen: Vec<Vec<(usize, Value)>>,
    answers: Vec<(RequestId, Answer, String)>,
}

impl Run {
    fn new(s: &Scenario) -> Run {
        let mut config = common::config();
        config.limits.backlog_page = s.backlog_page;
        let mut h = Harness::with_config(config);
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
            other => panic!("the memory store reads threads: {other:?}"),
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
                    None => match self.model.append_keyed(thread, key) {
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
                        self.model.append_keyed(thread, key);
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
                for thread in 0..THREADS {
                    let track = self.track(conn, thread);
                    if let Some(active) = track.active.take() {
                        track.episodes[active].unsubscribed_at = Some(at);
                    }
                }
                self.h.disconnect(self.conns[conn]);
                self.instances[self.current[conn]].1 = true;
                self.current[conn] = self.instances.len();
                self.instances.push((conn, false));
                self.seen.push(Vec::new());
                self.conns[conn] = self.h.connect(&principal_name(CONNS[conn]));
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

fn run(s: &Scenario) -> Result<(), TestCaseError> {
    let mut run = Run::new(s);
    for (at, op) in s.ops.iter().enumerate() {
        run.step(at, op);
        run.collect(at);
    }
    run.finish(s.ops.len());
    run.check()
}

/// `PROPTEST_CASES` when set (for long local runs), else `default`.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Everything the clients saw: frames per connection (with the op they
/// arrived at) and every HTTP answer.
type Transcript = (Vec<Vec<(usize, Value)>>, Vec<Option<common::Resp>>);

fn transcript(s: &Scenario) -> Transcript {
    let mut run = Run::new(s);
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

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(128), ..ProptestConfig::default() })]

    #[test]
    fn threads_behave_like_the_model(s in scenario()) {
        run(&s)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(32), ..ProptestConfig::default() })]

    /// Same inputs, same outputs: the engine has no hidden clock or randomness.
    #[test]
    fn same_inputs_same_outputs(s in scenario()) {
        prop_assert_eq!(transcript(&s), transcript(&s));
    }
}

/// A fixed interleaving that exercises every op kind, so a plain failure
/// here is easier to read than a shrunk random case.
#[test]
fn fixed_interleaving() {
    use Op::*;
    let ops = vec![
        Create {
            thread: 0,
            parent: None,
        },
        Grant {
            thread: 0,
            principal: 0,
            role: Some(2),
        },
        HttpAppend {
            thread: 0,
            by: 0,
            key: Some(1),
        },
        Subscribe {
            conn: 0,
            thread: 0,
            from_seq: 1,
        },
        HttpAppend {
            thread: 0,
            by: 0,
            key: Some(1),
        },
        WsAppend {
            conn: 0,
            thread: 0,
            key: Some(1),
        },
        Reconnect { conn: 1 },
        Create {
            thread: 1,
            parent: Some(0),
        },
        Subscribe {
            conn: 3,
            thread: 1,
            from_seq: 5,
        },
        Persist { batches: 2 },
        Grant {
            thread: 0,
            principal: 1,
            role: Some(3),
        },
        Subscribe {
            conn: 1,
            thread: 1,
            from_seq: 1,
        },
        HttpAppend {
            thread: 1,
            by: 0,
            key: None,
        },
        Subscribe {
            conn: 0,
            thread: 0,
            from_seq: 2,
        },
        Drain { conn: 0 },
        Unsubscribe { conn: 0, thread: 0 },
        Grant {
            thread: 0,
            principal: 1,
            role: None,
        },
        HttpAppend {
            thread: 1,
            by: 4,
            key: None,
        },
        Subscribe {
            conn: 0,
            thread: 0,
            from_seq: 3,
        },
        WsAppend {
            conn: 1,
            thread: 1,
            key: None,
        },
    ];
    for (hold, shuffle_reads) in [(false, None), (true, None), (true, Some(3))] {
        let s = Scenario {
            hold_persistence: hold,
            hold_drains: hold,
            shuffle_reads,
            backlog_page: 1,
            ops: ops.clone(),
        };
        if let Err(e) = run(&s) {
            panic!("hold={hold}: {e}");
        }
    }
}
