//! The client's rules, once: a sans-IO state machine for a `/v1/ws`
//! client, driven like the engine (`handle(now, input)`, [`Client::poll_output`],
//! [`Client::poll_timeout`]). It does no I/O, reads no clock and draws no
//! randomness of its own: time comes with every input and jitter and
//! idempotency keys come from the seed it is built with.
//!
//! What it guarantees, given a server whose threads are durable and
//! gapless:
//!
//! - **Positions.** It keeps, per subscribed thread, the next seq it wants
//!   (last delivered + 1). On every (re)connection it subscribes with that
//!   `fromSeq`, so nothing is missed and nothing is replayed twice.
//! - **Exactly once, in order.** Events are delivered only when their seq
//!   is the next one; older ones (an overlap) are dropped. Events of a
//!   thread are ignored between a `thread.subscribe` and its
//!   `thread.subscription_opened` (in-flight frames of an earlier
//!   subscription), and a gap resubscribes from the next seq.
//! - **`throughSeq`.** [`ClientOutput::CaughtUp`] says when the backlog up
//!   to the subscription's `throughSeq` has been delivered.
//! - **Reconnects.** A lost connection is retried after a capped
//!   exponential backoff with jitter; a successful connection resets it.
//!   With [`ClientConfig::refresh_token`] the client asks the host for a
//!   token ([`ClientOutput::NeedToken`]) before every reconnection.
//! - **Appends.** Appends go over HTTP (`POST /v1/threads/:id/events`,
//!   whose answer is the stored event) with an `Idempotency-Key` made once
//!   per append. They wait while the client is offline, go out one at a
//!   time per thread in the order made, and are retried with the same key
//!   on failure, so each lands exactly once.
//! - **Scoped errors.** Errors about a thread surface with its id
//!   ([`ClientOutput::ThreadError`], [`ClientOutput::SubscriptionClosed`],
//!   [`ClientOutput::AppendRejected`]); other threads are not affected.

mod appends;
mod backoff;
mod frames;
mod io;

use std::collections::{BTreeMap, VecDeque};

use serde_json::{Map, Value};

use crate::ids::{Millis, ThreadId};

use appends::{Appends, PendingAppend, Stage};
pub use backoff::SplitMix64;
use frames::ServerFrame;
pub use io::{
    AppendId, ClientConfig, ClientInput, ClientMisuse, ClientOutput, ConnectionState, RemoteError,
};

/// Where a subscription stands on the current connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Not subscribed on a connection (offline).
    Idle,
    /// `thread.subscribe` sent; `subscription_opened` awaited.
    Pending,
    /// Open: backlog through `through_seq`, then live.
    Open { through_seq: u64, caught_up: bool },
    /// Closed by the server with `internal`; subscribe again at `at`.
    RetryAt(Millis),
}

#[derive(Debug, Clone)]
struct Subscription {
    next_seq: u64,
    /// `next_seq` is still the application's `fromSeq`: no subscription
    /// has opened yet to confirm or move it.
    from_application: bool,
    phase: Phase,
    failures: u32,
}

/// The connection's lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Link {
    Connecting,
    AwaitingToken,
    Open,
    Waiting(Millis),
    Closed,
}

/// The client state machine.
#[derive(Debug)]
pub struct Client {
    config: ClientConfig,
    token: Option<String>,
    rng: SplitMix64,
    nonce: u64,
    appends_made: u64,
    link: Link,
    reconnects: u32,
    token_requested: bool,
    threads: BTreeMap<ThreadId, Subscription>,
    appends: Appends,
    out: VecDeque<ClientOutput>,
    now: Millis,
}

impl Client {
    /// A client that starts connecting at once (its first outputs are
    /// `State(Connecting)` and `Connect`). `seed` drives the jitter and the
    /// idempotency keys: give every client a different, random one.
    pub fn new(config: ClientConfig, seed: u64) -> Client {
        let mut rng = SplitMix64::new(seed);
        let nonce = rng.next_u64();
        let token = config.token.clone();
        let mut client = Client {
            config,
            token,
            rng,
            nonce,
            appends_made: 0,
            link: Link::Connecting,
            reconnects: 0,
            token_requested: false,
            threads: BTreeMap::new(),
            appends: Appends::default(),
            out: VecDeque::new(),
            now: Millis(0),
        };
        client.emit(ClientOutput::State(ConnectionState::Connecting));
        client.emit(ClientOutput::Connect {
            token: client.token.clone(),
        });
        client
    }

    /// The next seq wanted on `thread` (last delivered + 1), if subscribed.
    pub fn position(&self, thread: &ThreadId) -> Option<u64> {
        self.threads.get(thread).map(|s| s.next_seq)
    }

    /// The next thing to do, until `None`.
    pub fn poll_output(&mut self) -> Option<ClientOutput> {
        self.out.pop_front()
    }

    /// When to deliver [`ClientInput::Tick`] next, if ever.
    pub fn poll_timeout(&self) -> Option<Millis> {
        let reconnect = match self.link {
            Link::Waiting(at) => Some(at),
            _ => None,
        };
        if self.link != Link::Open {
            return reconnect;
        }
        let resubscribe = self
            .threads
            .values()
            .filter_map(|s| match s.phase {
                Phase::RetryAt(at) => Some(at),
                _ => None,
            })
            .min();
        [resubscribe, self.appends.next_retry()]
            .into_iter()
            .flatten()
            .min()
    }

    /// Reports one input at `now`.
    pub fn handle(&mut self, now: Millis, input: ClientInput<'_>) -> Result<(), ClientMisuse> {
        self.now = self.now.max(now);
        if self.link == Link::Closed {
            return match input {
                ClientInput::Subscribe { .. }
                | ClientInput::Append { .. }
                | ClientInput::Unsubscribe { .. } => Err(ClientMisuse::Closed),
                _ => Ok(()),
            };
        }
        match input {
            ClientInput::Subscribe { thread, from_seq } => self.subscribe(thread, from_seq)?,
            ClientInput::Unsubscribe { thread } => {
                if self.threads.remove(&thread).is_some() && self.link == Link::Open {
                    self.emit(ClientOutput::Send(frames::unsubscribe(&thread)));
                }
            }
            ClientInput::Append {
                append,
                thread,
                event,
            } => self.append(append, thread, event)?,
            ClientInput::Opened => self.opened(),
            ClientInput::Frame(text) => self.frame(text),
            ClientInput::Closed => self.lost(),
            ClientInput::Token(token) => self.token_arrived(token),
            ClientInput::AppendDone {
                append,
                status,
                body,
            } => self.append_done(append, status, body),
            ClientInput::AppendFailed { append } => self.append_failed(append),
            ClientInput::Close => self.close(),
            ClientInput::Tick => self.tick(),
        }
        Ok(())
    }

    fn emit(&mut self, output: ClientOutput) {
        self.out.push_back(output);
    }

    fn delay(&mut self, attempt: u32) -> u64 {
        backoff::delay(
            &mut self.rng,
            self.config.backoff_base_ms,
            self.config.backoff_cap_ms,
            attempt,
        )
    }

    fn subscribe(&mut self, thread: ThreadId, from_seq: u64) -> Result<(), ClientMisuse> {
        if from_seq == 0 {
            return Err(ClientMisuse::FromSeqZero);
        }
        if self.threads.contains_key(&thread) {
            return Err(ClientMisuse::AlreadySubscribed(thread));
        }
        let mut sub = Subscription {
            next_seq: from_seq,
            from_application: true,
            phase: Phase::Idle,
            failures: 0,
        };
        if self.link == Link::Open {
            sub.phase = Phase::Pending;
            self.emit(ClientOutput::Send(frames::subscribe(&thread, from_seq)));
        }
        self.threads.insert(thread, sub);
        Ok(())
    }

    fn append(
        &mut self,
        append: AppendId,
        thread: ThreadId,
        event: Map<String, Value>,
    ) -> Result<(), ClientMisuse> {
        if self.appends.contains(append) {
            return Err(ClientMisuse::AppendInUse(append));
        }
        self.appends_made += 1;
        // The event's own key, when it has one: the server refuses a
        // header that differs from it.
        let key = match event.get("idempotencyKey") {
            Some(Value::String(key)) => key.clone(),
            _ => backoff::idempotency_key(self.nonce, self.appends_made),
        };
        self.appends.push(PendingAppend {
            append,
            thread,
            key,
            body: Value::Object(event).to_string(),
            stage: Stage::Queued,
            failures: 0,
            refreshed_token: false,
        });
        self.post_due(false);
        Ok(())
    }

    /// Posts the appends that are due, when online.
    fn post_due(&mut self, reconnected: bool) {
        if self.link != Link::Open {
            return;
        }
        for pending in self.appends.due(self.now, reconnected) {
            self.emit(ClientOutput::Post {
                append: pending.append,
                thread: pending.thread,
                idempotency_key: pending.key,
                body: pending.body,
                token: self.token.clone(),
            });
        }
    }

    fn opened(&mut self) {
        if self.link != Link::Connecting {
            return;
        }
        self.link = Link::Open;
        self.reconnects = 0;
        self.emit(ClientOutput::State(ConnectionState::Open));
        let mut sends = Vec::new();
        for (thread, sub) in &mut self.threads {
            sub.phase = Phase::Pending;
            sends.push(frames::subscribe(thread, sub.next_seq));
        }
        for frame in sends {
            self.emit(ClientOutput::Send(frame));
        }
        self.post_due(true);
    }

    fn lost(&mut self) {
        if !matches!(self.link, Link::Connecting | Link::Open) {
            return;
        }
        for sub in self.threads.values_mut() {
            sub.phase = Phase::Idle;
        }
        let delay = self.delay(self.reconnects);
        self.reconnects += 1;
        let at = self.now.plus(delay);
        self.link = Link::Waiting(at);
        self.emit(ClientOutput::State(ConnectionState::Reconnecting {
            attempt: self.reconnects,
            at,
        }));
    }

    fn tick(&mut self) {
        match self.link {
            Link::Waiting(at) if at <= self.now => self.reconnect(),
            Link::Open => {
                let now = self.now;
                let mut sends = Vec::new();
                for (thread, sub) in &mut self.threads {
                    if matches!(sub.phase, Phase::RetryAt(at) if at <= now) {
                        sub.phase = Phase::Pending;
                        sends.push(frames::subscribe(thread, sub.next_seq));
                    }
                }
                for frame in sends {
                    self.emit(ClientOutput::Send(frame));
                }
                self.post_due(false);
            }
            _ => {}
        }
    }

    fn reconnect(&mut self) {
        self.emit(ClientOutput::State(ConnectionState::Connecting));
        if self.config.refresh_token {
            self.link = Link::AwaitingToken;
            self.request_token();
        } else {
            self.link = Link::Connecting;
            self.emit(ClientOutput::Connect {
                token: self.token.clone(),
            });
        }
    }

    fn request_token(&mut self) {
        if !self.token_requested {
            self.token_requested = true;
            self.emit(ClientOutput::NeedToken);
        }
    }

    fn token_arrived(&mut self, token: Option<String>) {
        self.token_requested = false;
        self.token = token;
        self.appends.token_arrived();
        if self.link == Link::AwaitingToken {
            self.link = Link::Connecting;
            self.emit(ClientOutput::Connect {
                token: self.token.clone(),
            });
        }
        self.post_due(false);
    }

    fn frame(&mut self, text: &str) {
        if self.link != Link::Open {
            return;
        }
        match frames::parse(text) {
            Some(ServerFrame::Opened {
                thread,
                through_seq,
            }) => self.subscription_opened(thread, through_seq),
            Some(ServerFrame::Event { thread, seq, event }) => self.event(thread, seq, event),
            Some(ServerFrame::Closed { thread, reason }) => {
                self.subscription_closed(thread, reason)
            }
            Some(ServerFrame::Error {
                thread,
                code,
                message,
            }) => {
                let error = RemoteError { code, message };
                self.emit(match thread {
                    Some(thread) => ClientOutput::ThreadError { thread, error },
                    None => ClientOutput::ConnectionError { error },
                });
            }
            None => {}
        }
    }

    fn subscription_opened(&mut self, thread: ThreadId, through_seq: u64) {
        let Some(sub) = self.threads.get_mut(&thread) else {
            return;
        };
        if sub.phase != Phase::Pending {
            return;
        }
        sub.failures = 0;
        // The application's `fromSeq` past the head (the seed's "live
        // only" sentinel): the live events start right after the boundary.
        // A position of the client's own stays: a `throughSeq` below it
        // comes from a node that has not seen the latest commit yet, and
        // the events up to the position were delivered already.
        if std::mem::take(&mut sub.from_application) {
            sub.next_seq = sub.next_seq.min(through_seq.saturating_add(1));
        }
        let caught_up = sub.next_seq > through_seq;
        sub.phase = Phase::Open {
            through_seq,
            caught_up,
        };
        if caught_up {
            self.emit(ClientOutput::CaughtUp {
                thread,
                through_seq,
            });
        }
    }

    fn event(&mut self, thread: ThreadId, seq: u64, event: Value) {
        let Some(sub) = self.threads.get_mut(&thread) else {
            return;
        };
        let Phase::Open {
            through_seq,
            caught_up,
        } = sub.phase
        else {
            return;
        };
        if seq < sub.next_seq {
            return;
        }
        if seq > sub.next_seq {
            sub.phase = Phase::Pending;
            let from = sub.next_seq;
            self.emit(ClientOutput::Send(frames::unsubscribe(&thread)));
            self.emit(ClientOutput::Send(frames::subscribe(&thread, from)));
            return;
        }
        sub.next_seq = seq + 1;
        let now_caught_up = !caught_up && seq >= through_seq;
        if now_caught_up {
            sub.phase = Phase::Open {
                through_seq,
                caught_up: true,
            };
        }
        self.emit(ClientOutput::Event {
            thread: thread.clone(),
            seq,
            event,
        });
        if now_caught_up {
            self.emit(ClientOutput::CaughtUp {
                thread,
                through_seq,
            });
        }
    }

    fn subscription_closed(&mut self, thread: ThreadId, reason: String) {
        let Some(sub) = self.threads.get(&thread) else {
            return;
        };
        if !matches!(sub.phase, Phase::Pending | Phase::Open { .. }) {
            return;
        }
        let resubscribing = reason == "internal";
        if resubscribing {
            let failures = sub.failures;
            let at = self.now.plus(self.delay(failures));
            if let Some(sub) = self.threads.get_mut(&thread) {
                sub.failures += 1;
                sub.phase = Phase::RetryAt(at);
            }
        } else {
            self.threads.remove(&thread);
        }
        self.emit(ClientOutput::SubscriptionClosed {
            thread,
            reason,
            resubscribing,
        });
    }

    fn append_done(&mut self, append: AppendId, status: u16, body: &str) {
        let Some(pending) = self.appends.get_mut(append) else {
            return;
        };
        if pending.stage != Stage::InFlight {
            return;
        }
        let parsed: Option<Value> = serde_json::from_str(body).ok();
        if (200..300).contains(&status) {
            if let Some(event) = parsed
                .as_ref()
                .and_then(|b| b.get("event"))
                .filter(|e| e.is_object())
                .cloned()
            {
                let thread = pending.thread.clone();
                self.appends.remove(append);
                self.emit(ClientOutput::Appended {
                    append,
                    thread,
                    event,
                });
                self.post_due(false);
                return;
            }
        }
        if status == 401 && self.config.refresh_token && !pending.refreshed_token {
            pending.refreshed_token = true;
            pending.stage = Stage::AwaitingToken;
            self.request_token();
            return;
        }
        if (400..500).contains(&status) && status != 408 && status != 429 {
            let error = parsed.as_ref().map(|b| &b["error"]);
            let text = |key: &str| error.and_then(|e| e[key].as_str()).map(str::to_owned);
            // An answer without the server's error came from something in
            // between (a proxy's page, say).
            let error = match text("code") {
                Some(code) => RemoteError {
                    code,
                    message: text("message").unwrap_or_default(),
                },
                None => RemoteError {
                    code: "unavailable".to_owned(),
                    message: format!("HTTP {status} without a JSON body"),
                },
            };
            let thread = pending.thread.clone();
            self.appends.remove(append);
            self.emit(ClientOutput::AppendRejected {
                append,
                thread,
                error,
            });
            self.post_due(false);
            return;
        }
        self.append_failed(append);
    }

    fn append_failed(&mut self, append: AppendId) {
        let Some(failures) = self
            .appends
            .get_mut(append)
            .filter(|p| p.stage == Stage::InFlight)
            .map(|p| p.failures)
        else {
            return;
        };
        let at = self.now.plus(self.delay(failures));
        if let Some(pending) = self.appends.get_mut(append) {
            pending.failures += 1;
            pending.stage = Stage::RetryAt(at);
        }
    }

    fn close(&mut self) {
        if matches!(self.link, Link::Connecting | Link::Open) {
            self.emit(ClientOutput::Disconnect);
        }
        self.link = Link::Closed;
        self.threads.clear();
        for pending in self.appends.drain() {
            self.emit(ClientOutput::AppendRejected {
                append: pending.append,
                thread: pending.thread,
                error: RemoteError {
                    code: "client_closed".into(),
                    message: "The client was closed before the append landed.".into(),
                },
            });
        }
        self.emit(ClientOutput::State(ConnectionState::Closed));
    }
}

#[cfg(test)]
mod tests;
