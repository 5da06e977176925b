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

mod common;

use std::collections::{BTreeMap, BTreeSet, HashMap};

use bubble_core::http::Method;
use bubble_core::store::Backend;
use bubble_core::{ConnId, RequestId};
use common::{Harness, ADMIN};
use proptest::prelude::*;
use serde_json::{json, Value};

const THREADS: usize = 3;
/// Principals p0..p3; index 4 is the admin.
const PRINCIPALS: usize = 5;
const ADMIN_INDEX: usize = 4;
/// The principal of each connection (p0 holds two).
const CONNS: [usize; 4] = [0, 1, 2, 0];
const ROLES: [&str; 4] = ["owner", "thread_manager", "member", "reader"];

fn thread_name(t: usize) -> String {
    format!("t{t}")
}

fn principal_name(p: usize) -> String {
    if p == ADMIN_INDEX {
        ADMIN.to_owned()
    } else {
        format!("p{p}")
    }
}

#[derive(Debug, Clone)]
enum Op {
    Create {
        thread: usize,
        parent: Option<usize>,
    },
    HttpAppend {
        thread: usize,
        by: usize,
        key: Option<u8>,
    },
    WsAppend {
        conn: usize,
        thread: usize,
        key: Option<u8>,
    },
    Reconnect {
        conn: usize,
    },
    Subscribe {
        conn: usize,
        thread: usize,
        from_seq: u64,
    },
    Unsubscribe {
        conn: usize,
        thread: usize,
    },
    Grant {
        thread: usize,
        principal: usize,
        role: Option<usize>,
    },
    Persist {
        batches: usize,
    },
    Drain {
        conn: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => (0..THREADS, proptest::option::of(0..THREADS))
            .prop_map(|(thread, parent)| Op::Create { thread, parent: parent.filter(|p| *p != thread) }),
        8 => (0..THREADS, 0..PRINCIPALS, proptest::option::weighted(0.4, 0..3u8))
            .prop_map(|(thread, by, key)| Op::HttpAppend { thread, by, key }),
        4 => (0..CONNS.len(), 0..THREADS, proptest::option::weighted(0.4, 0..3u8))
            .prop_map(|(conn, thread, key)| Op::WsAppend { conn, thread, key }),
        1 => (0..CONNS.len()).prop_map(|conn| Op::Reconnect { conn }),
        4 => (0..CONNS.len(), 0..THREADS, 1..10u64)
            .prop_map(|(conn, thread, from_seq)| Op::Subscribe { conn, thread, from_seq }),
        2 => (0..CONNS.len(), 0..THREADS).prop_map(|(conn, thread)| Op::Unsubscribe { conn, thread }),
        2 => (0..THREADS, 0..ADMIN_INDEX, proptest::option::weighted(0.6, 0..ROLES.len()))
            .prop_map(|(thread, principal, role)| Op::Grant { thread, principal, role }),
        2 => (0..4usize).prop_map(|batches| Op::Persist { batches }),
        2 => (0..CONNS.len()).prop_map(|conn| Op::Drain { conn }),
    ]
}

#[derive(Debug, Clone)]
struct Scenario {
    hold_persistence: bool,
    hold_drains: bool,
    backlog_page: usize,
    ops: Vec<Op>,
}

/// Threads `t0`, `t1` (a child of `t0`) and `t2` exist from the start, and
/// each principal starts with a random role (or none) on each, so most
/// random ops act on readable threads.
fn prelude(initial: &[Option<usize>]) -> Vec<Op> {
    let mut ops = vec![
        Op::Create {
            thread: 0,
            parent: None,
        },
        Op::Create {
            thread: 1,
            parent: Some(0),
        },
        Op::Create {
            thread: 2,
            parent: None,
        },
    ];
    for (i, role) in initial.iter().enumerate() {
        if role.is_some() {
            ops.push(Op::Grant {
                thread: i % THREADS,
                principal: i / THREADS,
                role: *role,
            });
        }
    }
    ops
}

fn scenario() -> impl Strategy<Value = Scenario> {
    let initial = proptest::collection::vec(
        proptest::option::weighted(0.6, 0..ROLES.len()),
        THREADS * ADMIN_INDEX,
    );
    (
        any::<bool>(),
        any::<bool>(),
        1..4usize,
        initial,
        proptest::collection::vec(op(), 1..80),
    )
        .prop_map(
            |(hold_persistence, hold_drains, backlog_page, initial, ops)| Scenario {
                hold_persistence,
                hold_drains,
                backlog_page,
                ops: prelude(&initial).into_iter().chain(ops).collect(),
            },
        )
}

// --- the reference model ------------------------------------------------------------

#[derive(Debug, Default)]
struct ThreadModel {
    parent: Option<usize>,
    head: u64,
    keys: HashMap<u8, u64>,
    /// For each seq (index seq - 1): the principals who could read at append.
    readers: Vec<BTreeSet<usize>>,
}

#[derive(Debug, Default)]
struct Model {
    threads: BTreeMap<usize, ThreadModel>,
    grants: BTreeMap<(usize, usize), usize>,
}

impl Model {
    fn readable(&self, principal: usize, thread: usize) -> bool {
        if principal == ADMIN_INDEX {
            return self.threads.contains_key(&thread);
        }
        let mut at = Some(thread);
        while let Some(t) = at {
            let Some(model) = self.threads.get(&t) else {
                return false;
            };
            if self.grants.contains_key(&(t, principal)) {
                return true;
            }
            at = model.parent;
        }
        false
    }

    /// `None` when allowed; otherwise the error code.
    fn append_denied(&self, principal: usize, thread: usize) -> Option<&'static str> {
        if !self.readable(principal, thread) {
            return Some("not_found");
        }
        let appends = principal == ADMIN_INDEX
            || self
                .grants
                .get(&(thread, principal))
                .is_some_and(|role| ROLES[*role] != "reader");
        (!appends).then_some("forbidden")
    }

    /// Appends one event unless `key` repeats; returns the seq and whether
    /// it was a repeat.
    fn append_keyed(&mut self, thread: usize, key: Option<u8>) -> (u64, bool) {
        let known = key.and_then(|k| self.threads[&thread].keys.get(&k).copied());
        if let Some(seq) = known {
            return (seq, true);
        }
        let seq = self.append(thread);
        if let Some(k) = key {
            self.threads
                .get_mut(&thread)
                .expect("thread")
                .keys
                .insert(k, seq);
        }
        (seq, false)
    }

    /// Appends one event; returns its seq.
    fn append(&mut self, thread: usize) -> u64 {
        let readers: BTreeSet<usize> = (0..PRINCIPALS)
            .filter(|p| self.readable(*p, thread))
            .collect();
        let model = self
            .threads
            .get_mut(&thread)
            .expect("appending to an existing thread");
        model.head += 1;
        model.readers.push(readers);
        model.head
    }
}

/// What the client should see on one connection for one thread, in order,
/// apart from `thread.event` frames.
#[derive(Debug, Clone, PartialEq)]
enum Marker {
    Opened(usize),
    Error(Option<&'static str>),
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
        let snapshot = self.h.store.load().expect("memory store loads");
        snapshot
            .threads
            .iter()
            .find(|r| r.thread_id.as_str() == thread_name(thread))
            .map_or(0, |r| r.head_seq)
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
                    Some(code) => self
                        .track(conn, thread)
                        .markers
                        .push(Marker::Error(Some(code))),
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
                    track.markers.push(Marker::Error(Some("conflict")));
                } else if !readable {
                    track.markers.push(Marker::Error(Some("not_found")));
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

    /// Subscriptions whose principal can no longer read end with an error
    /// and `subscription_closed`.
    fn close_unreadable(&mut self) {
        for (conn, principal) in CONNS.iter().enumerate() {
            for thread in 0..THREADS {
                let readable = self.model.readable(*principal, thread);
                let track = self.track(conn, thread);
                if let (Some(active), false) = (track.active, readable) {
                    track.active = None;
                    track.episodes[active].revoked = true;
                    track.markers.push(Marker::Error(None));
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

    fn check(&mut self) -> Result<(), TestCaseError> {
        for (req, answer, what) in std::mem::take(&mut self.answers) {
            let resp = self.h.response(req);
            let resp = resp.ok_or_else(|| TestCaseError::fail(format!("{what}: no answer")))?;
            let ok = match answer {
                Answer::Ok => (200..300).contains(&resp.status),
                Answer::Status(status) => resp.status == status,
                Answer::Event { status, seq } => {
                    resp.status == status
                        && resp.body["event"]["seq"] == seq
                        && (status == 201 || resp.body["duplicate"] == true)
                }
                Answer::Error(status, code) => resp.status == status && resp.code() == code,
            };
            prop_assert!(
                ok,
                "{}: expected {:?}, got {} {}",
                what,
                answer,
                resp.status,
                resp.body
            );
        }
        for thread in 0..THREADS {
            let Some(model) = self.model.threads.get(&thread) else {
                continue;
            };
            let history = self.h.history(&thread_name(thread));
            let seqs: Vec<u64> = history
                .iter()
                .map(|e| e["seq"].as_u64().unwrap_or(0))
                .collect();
            prop_assert_eq!(
                seqs,
                (1..=model.head).collect::<Vec<_>>(),
                "history of t{}",
                thread
            );
            prop_assert_eq!(
                self.h.thread(&thread_name(thread))["headSeq"].as_u64(),
                Some(model.head)
            );
        }
        for instance in 0..self.instances.len() {
            for thread in 0..THREADS {
                self.check_track(instance, thread)?;
            }
        }
        Ok(())
    }

    /// Replays what connection `instance` saw for `thread` against the
    /// expected markers and episodes. A closed instance may miss what was
    /// still held back when it closed.
    fn check_track(&self, instance: usize, thread: usize) -> Result<(), TestCaseError> {
        let name = thread_name(thread);
        let empty = Track::default();
        let track = self.tracks.get(&(instance, thread)).unwrap_or(&empty);
        let (conn, was_closed) = self.instances[instance];
        let principal = CONNS[conn];
        let model = self.model.threads.get(&thread);
        let mut markers = track.markers.iter();
        let mut current: Option<usize> = None;
        let mut last_ended: Option<usize> = None;
        let mut delivered: Vec<Vec<u64>> = vec![Vec::new(); track.episodes.len()];
        let mut through: Vec<u64> = vec![0; track.episodes.len()];
        let ctx = |what: &str| {
            format!(
                "conn {conn}#{instance} ({}) on {name}: {what}",
                principal_name(principal)
            )
        };
        for (at, frame) in self.seen[instance]
            .iter()
            .filter(|(_, f)| f["threadId"] == name.as_str())
        {
            let kind = frame["type"].as_str().unwrap_or("");
            if kind == "thread.event" {
                let seq = frame["event"]["seq"].as_u64().unwrap_or(0);
                let Some(ep) = current.or(last_ended) else {
                    return Err(TestCaseError::fail(ctx(&format!(
                        "event {seq} outside any subscription"
                    ))));
                };
                let episode = &track.episodes[ep];
                if current.is_none() {
                    // After the client's unsubscribe, events in flight are ignored.
                    prop_assert!(
                        episode.unsubscribed_at.is_some(),
                        "{}",
                        ctx(&format!("event {seq} after subscription_closed"))
                    );
                    continue;
                }
                if episode.unsubscribed_at.is_some_and(|u| *at >= u) {
                    continue;
                }
                if seq > through[ep] {
                    let readers = &model.expect("thread exists").readers;
                    let could = readers
                        .get(seq as usize - 1)
                        .is_some_and(|r| r.contains(&principal));
                    prop_assert!(
                        could,
                        "{}",
                        ctx(&format!(
                            "live event {seq} delivered to a principal who could not read it"
                        ))
                    );
                }
                delivered[ep].push(seq);
                continue;
            }
            let want = markers.next();
            match (kind, want) {
                ("thread.subscription_opened", Some(Marker::Opened(ep))) => {
                    let got = frame["throughSeq"].as_u64().unwrap_or(u64::MAX);
                    let e = &track.episodes[*ep];
                    prop_assert!(
                        (e.through_lo..=e.through_hi).contains(&got),
                        "{}",
                        ctx(&format!(
                            "throughSeq {got}, head at registration {}..={}",
                            e.through_lo, e.through_hi
                        ))
                    );
                    through[*ep] = got;
                    current = Some(*ep);
                    last_ended = None;
                }
                ("error", Some(Marker::Error(code))) => {
                    if let Some(code) = code {
                        prop_assert_eq!(
                            frame["code"].as_str(),
                            Some(*code),
                            "{}",
                            ctx("error code")
                        );
                    }
                }
                ("thread.subscription_closed", Some(Marker::Closed)) => {
                    prop_assert_eq!(
                        frame["reason"].as_str(),
                        Some("not_found"),
                        "{}",
                        ctx("close reason")
                    );
                    last_ended = current.take();
                }
                (_, want) => {
                    return Err(TestCaseError::fail(ctx(&format!(
                        "got {frame}, expected {want:?}"
                    ))));
                }
            }
        }
        let rest: Vec<&Marker> = markers.collect();
        prop_assert!(
            rest.is_empty() || was_closed,
            "{}",
            ctx(&format!("never saw {rest:?}"))
        );
        let head = model.map_or(0, |m| m.head);
        for (ep, episode) in track.episodes.iter().enumerate() {
            let start = episode.from_seq.min(through[ep] + 1);
            let got = &delivered[ep];
            let prefix: Vec<u64> = (start..start + got.len() as u64).collect();
            prop_assert_eq!(
                got,
                &prefix,
                "{}",
                ctx(&format!(
                    "episode {ep} (fromSeq {}) not contiguous",
                    episode.from_seq
                ))
            );
            if episode.unsubscribed_at.is_none() && !episode.revoked {
                let all: Vec<u64> = (start..=head).collect();
                prop_assert_eq!(
                    got,
                    &all,
                    "{}",
                    ctx(&format!(
                        "episode {ep} (fromSeq {}) incomplete",
                        episode.from_seq
                    ))
                );
            }
        }
        Ok(())
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
    for hold in [false, true] {
        let s = Scenario {
            hold_persistence: hold,
            hold_drains: hold,
            backlog_page: 1,
            ops: ops.clone(),
        };
        if let Err(e) = run(&s) {
            panic!("hold={hold}: {e}");
        }
    }
}
