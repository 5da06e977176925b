//! The sans-IO client (`bubble_core::client`) against the real engine,
//! in-process over one memory store: random appends, frames delivered late
//! and in bursts, connections dropped with frames still in flight, failed
//! connection attempts, HTTP answers lost after the append was made or
//! requests lost before, token refreshes, store reads failing for a while
//! (backlog replays end with `subscription_closed{internal}` and the
//! client subscribes again; appends answered `500` are retried), and
//! engine restarts over the same store. Once the network heals, every subscriber has seen each event
//! of its threads exactly once, in order, equal to the stored events, and
//! every append landed exactly once and was acknowledged once with the
//! stored event.
//!
//! Seeded runs are also written down as transcripts of one client's inputs
//! and outputs (`clients/transcripts/resume-*.json`), which the JavaScript
//! client replays (`tests/js/client.test.mjs`);
//! [`the_recorded_transcripts_are_fresh`] checks they are what the core
//! gives today (`BLESS=1` rewrites them).

mod common;
mod transcripts;

use std::collections::{BTreeMap, VecDeque};

use bubble_core::client::{AppendId, Client, ClientConfig, ClientInput, ClientOutput, SplitMix64};
use bubble_core::http::Method;
use bubble_core::store::ReadQuery;
use bubble_core::{ConnId, Input, Millis, ThreadId};
use common::*;
use proptest::prelude::*;
use serde_json::{json, Value};
use transcripts::Recorder;

const THREADS: &[&str] = &["thread-a", "thread-b"];
const USERS: &[&str] = &["alice", "bob", "carol"];

fn id(thread: &str) -> ThreadId {
    ThreadId::parse(thread).expect("thread id")
}

/// A pending `Post` the host has not performed yet.
#[derive(Debug)]
struct Post {
    append: AppendId,
    thread: ThreadId,
    key: String,
    body: String,
}

/// One client and the host around it: its socket to the engine, the
/// server frames on their way to it, its HTTP requests, what it delivered.
struct Peer {
    user: &'static str,
    client: Client,
    conn: Option<ConnId>,
    connect_wanted: bool,
    inbox: VecDeque<String>,
    posts: VecDeque<Post>,
    token_wanted: bool,
    delivered: BTreeMap<ThreadId, Vec<Value>>,
    acknowledged: BTreeMap<AppendId, Vec<Value>>,
    made: Vec<(AppendId, ThreadId, String)>,
    /// What the client gave and the host has not performed yet.
    outputs: VecDeque<ClientOutput>,
    recorder: Option<Recorder>,
}

impl Peer {
    fn new(user: &'static str, seed: u64, refresh_token: bool, record: bool) -> Peer {
        let config = ClientConfig {
            token: Some(token(user)),
            refresh_token,
            ..ClientConfig::default()
        };
        let mut client = Client::new(config.clone(), seed);
        let outputs = transcripts::drain(&mut client);
        Peer {
            user,
            recorder: record.then(|| Recorder::new(&config, seed, &outputs)),
            outputs: outputs.into(),
            client,
            conn: None,
            connect_wanted: false,
            inbox: VecDeque::new(),
            posts: VecDeque::new(),
            token_wanted: false,
            delivered: BTreeMap::new(),
            acknowledged: BTreeMap::new(),
            made: Vec::new(),
        }
    }

    fn input(&mut self, now: Millis, input: ClientInput<'_>) {
        self.client
            .handle(now, input.clone())
            .expect("the host drives the client correctly");
        let outputs = transcripts::drain(&mut self.client);
        if let Some(recorder) = &mut self.recorder {
            recorder.step(now, &input, &outputs);
        }
        self.outputs.extend(outputs);
    }
}

/// The world: the engine (restartable over its store) and the peers.
struct World {
    h: Harness,
    peers: Vec<Peer>,
    next_append: u64,
    failing_reads: bool,
}

fn event_and_key_reads(query: &ReadQuery) -> bool {
    matches!(
        query,
        ReadQuery::Events { .. } | ReadQuery::Idempotent { .. }
    )
}

impl World {
    fn new(seed: u64, record: bool) -> World {
        let mut h = Harness::new();
        for thread in THREADS {
            h.create_thread(ADMIN, thread);
            for user in USERS {
                h.grant(thread, user, "member");
            }
        }
        let mut peers: Vec<Peer> = USERS
            .iter()
            .enumerate()
            .map(|(i, user)| Peer::new(user, seed ^ (i as u64 + 1), i == 1, record))
            .collect();
        let now = h.now();
        for peer in &mut peers {
            for thread in THREADS {
                peer.input(
                    now,
                    ClientInput::Subscribe {
                        thread: id(thread),
                        from_seq: 1,
                    },
                );
            }
        }
        let mut world = World {
            h,
            peers,
            next_append: 1,
            failing_reads: false,
        };
        world.sync();
        world
    }

    /// Performs what the clients asked for that needs no decision, and
    /// moves the engine's frames into the peers' inboxes.
    fn sync(&mut self) {
        for _ in 0..1000 {
            let mut progressed = false;
            for p in 0..self.peers.len() {
                progressed |= self.sync_peer(p);
            }
            if !progressed {
                return;
            }
        }
        panic!("the client and the engine never settle");
    }

    fn sync_peer(&mut self, p: usize) -> bool {
        let now = self.h.now();
        let mut progressed = false;
        let peer = &mut self.peers[p];
        if let Some(conn) = peer.conn {
            for conn in self.h.pings() {
                if self.h.is_open(conn) {
                    self.h.pong(conn);
                }
            }
            for frame in self.h.frames(conn) {
                peer.inbox.push_back(frame.to_string());
            }
            if !self.h.is_open(conn) {
                peer.conn = None;
                peer.inbox.clear();
                peer.input(now, ClientInput::Closed);
                progressed = true;
            }
        }
        while let Some(out) = peer.outputs.pop_front() {
            progressed = true;
            match out {
                ClientOutput::Connect { token: t } => {
                    assert_eq!(t, Some(token(peer.user)));
                    peer.connect_wanted = true;
                }
                ClientOutput::NeedToken => peer.token_wanted = true,
                ClientOutput::Send(frame) => {
                    if let Some(conn) = peer.conn {
                        self.h.send_text(conn, &frame);
                    }
                }
                ClientOutput::Post {
                    append,
                    thread,
                    idempotency_key,
                    body,
                    token: t,
                } => {
                    assert_eq!(t, Some(token(peer.user)));
                    peer.posts.push_back(Post {
                        append,
                        thread,
                        key: idempotency_key,
                        body,
                    });
                }
                ClientOutput::Event { thread, seq, event } => {
                    let seen = peer.delivered.entry(thread).or_default();
                    assert_eq!(seq, seen.len() as u64 + 1, "delivered out of order");
                    assert_eq!(event["seq"], json!(seq));
                    seen.push(event);
                }
                ClientOutput::Appended { append, event, .. } => {
                    peer.acknowledged.entry(append).or_default().push(event);
                }
                ClientOutput::AppendRejected { error, .. } => {
                    panic!("an append was rejected: {error:?}")
                }
                ClientOutput::ThreadError { thread, error } => {
                    assert_eq!(error.code, "internal", "error on {thread}: {error:?}");
                }
                ClientOutput::SubscriptionClosed {
                    thread,
                    reason,
                    resubscribing,
                } => {
                    assert!(resubscribing, "subscription to {thread} ended: {reason}");
                    assert_eq!(reason, "internal");
                }
                ClientOutput::ConnectionError { error } => panic!("connection error: {error:?}"),
                ClientOutput::State(_)
                | ClientOutput::CaughtUp { .. }
                | ClientOutput::Disconnect => {}
            }
        }
        progressed
    }

    fn append(&mut self, p: usize, t: usize) {
        let append = AppendId(self.next_append);
        self.next_append += 1;
        let marker = format!("{}-{}", self.peers[p].user, append.0);
        let mut event = message_part(&format!("run-{marker}"), &marker);
        event["principalId"] = json!(self.peers[p].user);
        let Value::Object(event) = event else {
            unreachable!()
        };
        let now = self.h.now();
        let peer = &mut self.peers[p];
        peer.made.push((append, id(THREADS[t]), marker));
        peer.input(
            now,
            ClientInput::Append {
                append,
                thread: id(THREADS[t]),
                event,
            },
        );
    }

    fn open(&mut self, p: usize, fail: bool) {
        let now = self.h.now();
        let peer = &mut self.peers[p];
        if !std::mem::take(&mut peer.connect_wanted) {
            return;
        }
        if fail {
            peer.input(now, ClientInput::Closed);
            return;
        }
        let conn = self.h.connect(peer.user);
        peer.conn = Some(conn);
        peer.input(now, ClientInput::Opened);
    }

    fn deliver(&mut self, p: usize, n: usize) {
        let now = self.h.now();
        let peer = &mut self.peers[p];
        for _ in 0..n {
            let Some(frame) = peer.inbox.pop_front() else {
                break;
            };
            peer.input(now, ClientInput::Frame(&frame));
        }
    }

    fn drop_connection(&mut self, p: usize) {
        let now = self.h.now();
        let peer = &mut self.peers[p];
        if let Some(conn) = peer.conn.take() {
            self.h.disconnect(conn);
            peer.inbox.clear();
            peer.input(now, ClientInput::Closed);
        }
    }

    /// Performs the peer's oldest request: `lost_before` never reaches the
    /// engine; `lost_after` is handled but its answer never arrives.
    fn http(&mut self, p: usize, lost_before: bool, lost_after: bool) {
        let Some(post) = self.peers[p].posts.pop_front() else {
            return;
        };
        let now = self.h.now();
        if lost_before {
            self.peers[p].input(
                now,
                ClientInput::AppendFailed {
                    append: post.append,
                },
            );
            return;
        }
        let body: Value = serde_json::from_str(&post.body).expect("the client posts JSON");
        let target = format!("/v1/threads/{}/events", post.thread);
        let user = self.peers[p].user;
        let req = self.h.send_request(
            Method::Post,
            Some(user),
            &target,
            Some(&body),
            Some(&post.key),
        );
        let resp = self.h.response(req).expect("the engine answered");
        let peer = &mut self.peers[p];
        if lost_after {
            peer.input(
                now,
                ClientInput::AppendFailed {
                    append: post.append,
                },
            );
        } else {
            let text = resp.body.to_string();
            peer.input(
                now,
                ClientInput::AppendDone {
                    append: post.append,
                    status: resp.status,
                    body: &text,
                },
            );
        }
    }

    fn answer_token(&mut self, p: usize) {
        let now = self.h.now();
        let peer = &mut self.peers[p];
        if std::mem::take(&mut peer.token_wanted) {
            let t = token(peer.user);
            peer.input(now, ClientInput::Token(Some(t)));
        }
    }

    fn restart(&mut self) {
        let now = self.h.now();
        for peer in &mut self.peers {
            if peer.conn.take().is_some() {
                peer.inbox.clear();
                peer.input(now, ClientInput::Closed);
            }
        }
        let store = std::mem::take(&mut self.h.store);
        self.h = Harness::over(config(), store, now);
        self.fail_reads(self.failing_reads);
    }

    fn fail_reads(&mut self, on: bool) {
        self.failing_reads = on;
        self.h
            .fail_reads(on.then_some(event_and_key_reads as fn(&ReadQuery) -> bool));
    }

    fn advance(&mut self, ms: u64) {
        self.h.advance(ms);
        let now = self.h.now();
        while self.h.engine.poll_timeout().is_some_and(|at| at <= now) {
            self.h.input(Input::Tick);
        }
        for peer in &mut self.peers {
            if peer.client.poll_timeout().is_some_and(|at| at <= now) {
                peer.input(now, ClientInput::Tick);
            }
        }
    }

    /// Heals the network and runs until every client is idle.
    fn settle(&mut self) {
        self.fail_reads(false);
        for _ in 0..500 {
            self.sync();
            let busy = self.peers.iter().any(|p| {
                p.connect_wanted
                    || p.token_wanted
                    || !p.posts.is_empty()
                    || !p.inbox.is_empty()
                    || p.conn.is_none()
                    || p.made.len() != p.acknowledged.len()
            });
            if !busy {
                return;
            }
            for p in 0..self.peers.len() {
                self.answer_token(p);
                self.open(p, false);
                self.sync();
                while !self.peers[p].posts.is_empty() {
                    self.http(p, false, false);
                    self.sync();
                }
                let n = self.peers[p].inbox.len();
                self.deliver(p, n);
            }
            self.sync();
            let next = self
                .peers
                .iter()
                .filter_map(|p| p.client.poll_timeout())
                .min();
            if let Some(at) = next {
                let now = self.h.now();
                self.advance(at.0.saturating_sub(now.0));
            }
        }
        panic!("the clients never settled");
    }

    fn check(&mut self) {
        let mut stored = BTreeMap::new();
        for thread in THREADS {
            stored.insert(id(thread), self.h.history(thread));
        }
        for peer in &self.peers {
            for (thread, events) in &stored {
                let seen = peer.delivered.get(thread).cloned().unwrap_or_default();
                assert_eq!(
                    &seen, events,
                    "{} on {thread}: every event once, in order",
                    peer.user
                );
                assert_eq!(peer.client.position(thread), Some(events.len() as u64 + 1));
            }
            for (append, thread, marker) in &peer.made {
                let acks = &peer.acknowledged[append];
                assert_eq!(acks.len(), 1, "{marker} acknowledged once");
                let landed: Vec<&Value> = stored[thread]
                    .iter()
                    .filter(|e| e["part"]["delta"] == json!(marker))
                    .collect();
                assert_eq!(
                    landed,
                    vec![&acks[0]],
                    "{marker} landed once, as acknowledged"
                );
            }
        }
    }
}

#[derive(Debug, Clone)]
enum Step {
    Append {
        peer: usize,
        thread: usize,
    },
    Open {
        peer: usize,
        fail: bool,
    },
    Deliver {
        peer: usize,
        frames: usize,
    },
    Drop {
        peer: usize,
    },
    Http {
        peer: usize,
        lost_before: bool,
        lost_after: bool,
    },
    Token {
        peer: usize,
    },
    Restart,
    FailReads {
        on: bool,
    },
    Advance {
        ms: u64,
    },
}

fn step() -> impl Strategy<Value = Step> {
    let peer = 0..USERS.len();
    prop_oneof![
        4 => (peer.clone(), 0..THREADS.len()).prop_map(|(peer, thread)| Step::Append { peer, thread }),
        3 => (peer.clone(), prop::bool::weighted(0.2)).prop_map(|(peer, fail)| Step::Open { peer, fail }),
        4 => (peer.clone(), 1..6usize).prop_map(|(peer, frames)| Step::Deliver { peer, frames }),
        1 => peer.clone().prop_map(|peer| Step::Drop { peer }),
        3 => (peer.clone(), prop::bool::weighted(0.15), prop::bool::weighted(0.2))
            .prop_map(|(peer, lost_before, lost_after)| Step::Http { peer, lost_before, lost_after }),
        1 => peer.prop_map(|peer| Step::Token { peer }),
        1 => Just(Step::Restart),
        1 => prop::bool::weighted(0.4).prop_map(|on| Step::FailReads { on }),
        2 => (1..40_000u64).prop_map(|ms| Step::Advance { ms }),
    ]
}

fn run(seed: u64, steps: &[Step], record: bool) -> World {
    let mut world = World::new(seed, record);
    for step in steps {
        match *step {
            Step::Append { peer, thread } => world.append(peer, thread),
            Step::Open { peer, fail } => world.open(peer, fail),
            Step::Deliver { peer, frames } => world.deliver(peer, frames),
            Step::Drop { peer } => world.drop_connection(peer),
            Step::Http {
                peer,
                lost_before,
                lost_after,
            } => world.http(peer, lost_before, lost_after),
            Step::Token { peer } => world.answer_token(peer),
            Step::Restart => world.restart(),
            Step::FailReads { on } => world.fail_reads(on),
            Step::Advance { ms } => world.advance(ms),
        }
        world.sync();
    }
    world.settle();
    world.check();
    world
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn every_event_once_in_order_and_every_append_once(
        seed in any::<u64>(),
        steps in prop::collection::vec(step(), 1..120),
    ) {
        run(seed, &steps, false);
    }
}

/// A fixed scenario that exercises each fault at least once.
#[test]
fn a_scripted_run_through_every_fault() {
    use Step::*;
    let steps = [
        Open {
            peer: 0,
            fail: false,
        },
        Open {
            peer: 1,
            fail: true,
        },
        Append { peer: 0, thread: 0 },
        Append { peer: 1, thread: 0 },
        Http {
            peer: 0,
            lost_before: false,
            lost_after: true,
        },
        Deliver { peer: 0, frames: 2 },
        Drop { peer: 0 },
        Advance { ms: 60_000 },
        Token { peer: 1 },
        Open {
            peer: 1,
            fail: false,
        },
        Open {
            peer: 0,
            fail: false,
        },
        Http {
            peer: 1,
            lost_before: true,
            lost_after: false,
        },
        Restart,
        FailReads { on: true },
        Drop { peer: 2 },
        Append { peer: 2, thread: 1 },
        Advance { ms: 60_000 },
        Open {
            peer: 2,
            fail: false,
        },
        Http {
            peer: 2,
            lost_before: false,
            lost_after: false,
        },
        FailReads { on: false },
        Advance { ms: 60_000 },
    ];
    run(11, &steps, false);
}

/// `n` steps drawn from `seed` with the weights of [`step`].
fn seeded_steps(seed: u64, n: usize) -> Vec<Step> {
    let mut r = SplitMix64::new(seed);
    let peers = USERS.len() as u64;
    (0..n)
        .map(|_| {
            let peer = usize::try_from(r.below(peers)).expect("a peer");
            match r.below(20) {
                0..=3 => Step::Append {
                    peer,
                    thread: usize::try_from(r.below(THREADS.len() as u64)).expect("a thread"),
                },
                4..=6 => Step::Open {
                    peer,
                    fail: r.below(100) < 20,
                },
                7..=10 => Step::Deliver {
                    peer,
                    frames: 1 + usize::try_from(r.below(5)).expect("frames"),
                },
                11 => Step::Drop { peer },
                12..=14 => Step::Http {
                    peer,
                    lost_before: r.below(100) < 15,
                    lost_after: r.below(100) < 20,
                },
                15 => Step::Token { peer },
                16 => Step::Restart,
                17 => Step::FailReads {
                    on: r.below(100) < 40,
                },
                _ => Step::Advance {
                    ms: 1 + r.below(40_000),
                },
            }
        })
        .collect()
}

/// The seeds of the recorded transcripts, and how many steps each run has.
const RECORDED: &[u64] = &[1, 2, 3, 4, 5, 6];
const RECORDED_STEPS: usize = 100;

/// The transcripts written from seeded runs are what the core gives today;
/// each is one client of its run (the refreshing one for every third seed).
#[test]
fn the_recorded_transcripts_are_fresh() {
    let folder = transcripts::folder();
    let bless = std::env::var_os("BLESS").is_some();
    let mut stale = Vec::new();
    for &seed in RECORDED {
        let world = run(seed, &seeded_steps(seed, RECORDED_STEPS), true);
        let peer = usize::try_from(seed).expect("a seed") % world.peers.len();
        let text = world.peers[peer]
            .recorder
            .as_ref()
            .expect("recorded")
            .text();
        let path = folder.join(format!("resume-{seed}.json"));
        if bless {
            std::fs::write(&path, text).expect("write the transcript");
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(text.as_str()) {
            stale.push(path.display().to_string());
        }
    }
    let names: Vec<String> = RECORDED
        .iter()
        .map(|s| format!("resume-{s}.json"))
        .collect();
    for entry in std::fs::read_dir(&folder).expect("the transcripts") {
        let name = entry
            .expect("an entry")
            .file_name()
            .to_string_lossy()
            .into_owned();
        if name.starts_with("resume-") && !names.contains(&name) {
            stale.push(format!("{name} (no seed records it)"));
        }
    }
    assert!(
        stale.is_empty(),
        "stale transcripts (BLESS=1 cargo test -p bubble-core --test client_resume rewrites them): {stale:?}"
    );
}
