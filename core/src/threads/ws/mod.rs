//! The `/v1/ws` connection state machine (bubble-websocket-protocol.txt,
//! SPEC §5).
//!
//! Frames are decided in the order they arrive: a frame that must wait for
//! a read (a subscribe to a thread not cached, an append with an
//! idempotency key) parks, and the frames behind it queue until it is
//! decided. Size and rate limits apply on arrival.
//!
//! A subscription is registered with `thread.subscription_opened` carrying
//! the head at that moment, then replays history (see [`replay`]): pages of
//! durable events read from the store, then the pending events from memory,
//! and it becomes live within the same input that sends the last of them.
//! The engine handles one input at a time, so nothing is appended between
//! the last replayed event and the switch: no gap and no duplicate.

use std::sync::Arc;

use crate::ctx::Ctx;
use crate::error::BubbleError;
use crate::ids::{ConnId, ThreadId};
use crate::io::{CloseReason, Output, WsFrame};
use crate::outbox::{drop_recipients, Tag};
use crate::policy::{Capability, CapabilitySet};
use crate::store::{ReadQuery, Version};
use crate::threads::state::{Caller, ThreadState};
use crate::threads::work::{Op, Step};
use crate::threads::Threads;

pub(crate) mod codec;
pub(crate) mod conn;
mod replay;

pub(in crate::threads) use replay::Decided;

use codec::{ClientFrame, FrameError};
use conn::{Conn, Provisional, Queued, Sub};

fn send_error(cx: &mut Ctx<'_>, conn: ConnId, scope: Option<&str>, err: &BubbleError) {
    cx.metrics.count_error(err.code());
    cx.out.push(Output::Send {
        conn,
        frame: codec::error(scope, err),
    });
}

pub(in crate::threads) fn lost_subscriptions(cx: &mut Ctx<'_>, n: usize) {
    let n = u64::try_from(n).unwrap_or(u64::MAX);
    cx.metrics.thread_subscriptions = cx.metrics.thread_subscriptions.saturating_sub(n);
}

/// Drops the events of `thread` held for `conn` behind a durability fence:
/// they were never sent.
pub(in crate::threads) fn discard_held_events(cx: &mut Ctx<'_>, conn: ConnId, thread: &ThreadId) {
    cx.out.discard(|tag, out| match tag {
        Tag::Event { thread: t, .. } => **t == *thread && drop_recipients(out, |c| c == conn),
        Tag::Subscription { .. } | Tag::Plain | Tag::Op(_) => false,
    });
}

/// A scoped error, then `thread.subscription_closed` with its code.
fn end_subscription(cx: &mut Ctx<'_>, conn: ConnId, thread: &ThreadId, err: &BubbleError) {
    send_error(cx, conn, Some(thread.as_str()), err);
    cx.out.push(Output::Send {
        conn,
        frame: codec::closed(thread, err.code()),
    });
}

fn rate_limited(cx: &Ctx<'_>) -> BubbleError {
    BubbleError::RateLimited(format!(
        "Too many frames: at most {} per {} ms; the frame was dropped.",
        cx.limits.frame_rate, cx.limits.frame_rate_window_ms
    ))
}

fn binary() -> BubbleError {
    BubbleError::InvalidRequest("Binary frames are not part of the protocol.".into())
}

impl Threads {
    /// Opens `conn` for `caller`, running the frames that queued while its
    /// bearer was being decided.
    pub(super) fn ws_open(&mut self, cx: &mut Ctx<'_>, conn: ConnId, caller: Caller) {
        cx.metrics.thread_connections += 1;
        match self.sockets.conns.get_mut(&conn) {
            Some(c) => {
                c.authenticated(caller);
                self.run_queued(cx, conn);
            }
            None => {
                self.sockets.conns.insert(conn, Conn::new(caller));
            }
        }
    }

    /// Registers `conn` before its bearer is decided.
    pub(super) fn ws_open_pending(&mut self, _cx: &mut Ctx<'_>, conn: ConnId) {
        self.sockets.conns.insert(conn, Conn::pending());
    }

    /// A socket refused (bearer, connection limit): `err` unscoped, then
    /// close with `reason`; what it queued while pending is dropped.
    pub(super) fn ws_refuse(
        &mut self,
        cx: &mut Ctx<'_>,
        conn: ConnId,
        err: &BubbleError,
        reason: CloseReason,
    ) {
        self.sockets.conns.remove(&conn);
        send_error(cx, conn, None, err);
        cx.out.push(Output::Close { conn, reason });
    }

    /// A resumed socket's subscriptions: each one is a `thread.subscribe`
    /// from its position, decided in order like client frames (a subscribe
    /// that waits for a read holds the rest back), minus the
    /// `thread.subscription_opened` the client already has. Nothing is
    /// resumed on a socket whose bearer was refused.
    pub(super) fn ws_resume(&mut self, cx: &mut Ctx<'_>, conn: ConnId, subs: &[(ThreadId, u64)]) {
        let Some(c) = self.sockets.conns.get_mut(&conn) else {
            return;
        };
        for (thread, next) in subs {
            // A thread named twice is resumed once.
            if c.resuming.insert(thread.clone()) {
                let text = codec::subscribe(thread, (*next).max(1));
                c.queue.push_back(Queued::Text(text));
            }
        }
        if c.parked.is_none() {
            self.run_queued(cx, conn);
        }
    }

    pub(super) fn ws_closed(&mut self, cx: &mut Ctx<'_>, conn: ConnId) {
        let dropped = self.sockets.drop_subs(conn);
        if let Some(c) = self.sockets.conns.remove(&conn) {
            if let Some(op) = c.parked {
                self.works.remove(&op);
            }
            lost_subscriptions(cx, dropped);
            if c.caller.is_some() {
                cx.metrics.thread_connections = cx.metrics.thread_connections.saturating_sub(1);
            }
        }
    }

    pub(super) fn ws_frame(&mut self, cx: &mut Ctx<'_>, conn: ConnId, frame: WsFrame<'_>) {
        // Refused sockets are not registered: their frames are ignored.
        let Some(c) = self.sockets.conns.get_mut(&conn) else {
            return;
        };
        if c.closing {
            return;
        }
        let len = match frame {
            WsFrame::Text(text) => text.len(),
            WsFrame::Binary(bytes) => bytes.len(),
        };
        if len > cx.limits.max_ws_frame_bytes {
            c.closing = true;
            c.queue.clear();
            let dropped = self.sockets.drop_subs(conn);
            lost_subscriptions(cx, dropped);
            cx.out.push(Output::Close {
                conn,
                reason: CloseReason::TooBig,
            });
            return;
        }
        let queued = match frame {
            _ if !c.admit(cx.now, cx.limits) => Queued::RateLimited,
            WsFrame::Binary(_) => Queued::Binary,
            WsFrame::Text(text) if c.parked.is_some() => Queued::Text(text.to_owned()),
            WsFrame::Text(text) => return self.start_frame(cx, conn, text),
        };
        if c.parked.is_some() {
            c.queue.push_back(queued);
        } else {
            self.simple_frame(cx, conn, &queued);
        }
    }

    /// A frame decided without the store: a binary or rate-limited one.
    fn simple_frame(&mut self, cx: &mut Ctx<'_>, conn: ConnId, frame: &Queued) {
        match frame {
            Queued::Text(text) => self.start_frame(cx, conn, text),
            Queued::Binary => send_error(cx, conn, None, &binary()),
            Queued::RateLimited => send_error(cx, conn, None, &rate_limited(cx)),
        }
    }

    /// Runs a text frame; parks it (and queues what follows) when it must
    /// wait for a read.
    fn start_frame(&mut self, cx: &mut Ctx<'_>, conn: ConnId, text: &str) {
        let op = self.new_op();
        match self.run_frame(cx, conn, text) {
            Some(need) => {
                if let Some(c) = self.sockets.conns.get_mut(&conn) {
                    c.parked = Some(op);
                }
                let owned = Op::Frame {
                    conn,
                    text: text.to_owned(),
                };
                self.park(cx, op, owned, need);
            }
            None => self.settle(cx, op, || Op::Frame {
                conn,
                text: text.to_owned(),
            }),
        }
    }

    /// The parked frame `op` of `conn` was decided: run the frames queued
    /// behind it until one parks.
    pub(super) fn unpark_conn(&mut self, cx: &mut Ctx<'_>, conn: ConnId, op: u64) {
        match self.sockets.conns.get_mut(&conn) {
            Some(c) if c.parked == Some(op) => c.parked = None,
            _ => return,
        }
        self.run_queued(cx, conn);
    }

    /// Runs the frames queued on `conn` in order until one parks.
    fn run_queued(&mut self, cx: &mut Ctx<'_>, conn: ConnId) {
        loop {
            let Some(c) = self.sockets.conns.get_mut(&conn) else {
                return;
            };
            if c.parked.is_some() {
                return;
            }
            let Some(next) = c.queue.pop_front() else {
                return;
            };
            self.simple_frame(cx, conn, &next);
        }
    }

    /// Decides one text frame; `Some` when it needs that read first.
    pub(super) fn run_frame(
        &mut self,
        cx: &mut Ctx<'_>,
        conn: ConnId,
        text: &str,
    ) -> Option<ReadQuery> {
        self.wrote = None;
        self.relied_on = None;
        let caller = self.sockets.conns.get(&conn)?.caller.clone()?;
        let (scope, result) = match codec::parse(text) {
            Err(FrameError { scope, error }) => (scope, Err(Step::Fail(error))),
            Ok(ClientFrame::Subscribe { thread, from_seq }) => {
                return self.subscribe(cx, conn, &caller, thread, from_seq);
            }
            Ok(ClientFrame::Unsubscribe { thread }) => {
                if self.drop_subscription(cx, conn, &thread) {
                    lost_subscriptions(cx, 1);
                }
                return None;
            }
            Ok(ClientFrame::Append { thread, event }) => {
                let result = self.append(cx, &caller, &thread, event, None).map(drop);
                (Some(thread.as_str().to_owned()), result)
            }
        };
        match result {
            Ok(()) => None,
            Err(Step::Need(query)) => Some(query),
            Err(Step::Fail(err)) => {
                send_error(cx, conn, scope.as_deref(), &err);
                None
            }
        }
    }

    fn subscribe(
        &mut self,
        cx: &mut Ctx<'_>,
        conn: ConnId,
        caller: &Caller,
        thread: ThreadId,
        from_seq: u64,
    ) -> Option<ReadQuery> {
        let c = self.sockets.conns.get(&conn)?;
        if c.subs.contains(&thread) {
            let err = BubbleError::AlreadySubscribed(thread.clone());
            send_error(cx, conn, Some(thread.as_str()), &err);
            return None;
        }
        let subscribable = |held: CapabilitySet| held.contains(Capability::EventsSubscribe);
        let held = match self.held_for(caller, &thread, subscribable) {
            Err(Step::Need(query)) => return Some(query),
            held => held,
        };
        let elsewhere = match held {
            Ok(_) if self.cluster => match self.durable_past_cache(&thread, from_seq) {
                Err(Step::Need(query)) => return Some(query),
                elsewhere => elsewhere,
            },
            _ => Ok(None),
        };
        // Decided from here on: a resumed subscription is resumed or ended now.
        let resumed = self
            .sockets
            .conns
            .get_mut(&conn)
            .is_some_and(|c| c.resuming.remove(&thread));
        let (held, elsewhere) = match (held, elsewhere) {
            (Ok(held), Ok(elsewhere)) => (held, elsewhere),
            (Err(Step::Need(_)), _) | (_, Err(Step::Need(_))) => return None,
            (Err(Step::Fail(err)), _) | (_, Err(Step::Fail(err))) => {
                end_subscription(cx, conn, &thread, &err);
                return None;
            }
        };
        if !held.contains(Capability::EventsSubscribe) {
            // Denial maps to not_found, as for GET /v1/threads/:threadId.
            let err = BubbleError::ThreadNotFound(thread.clone());
            end_subscription(cx, conn, &thread, &err);
            return None;
        }
        let c = self.sockets.conns.get(&conn)?;
        if c.subs.len() >= cx.limits.max_subscriptions {
            let err = BubbleError::RateLimited(format!(
                "Connection already holds the maximum of {} subscriptions.",
                cx.limits.max_subscriptions
            ));
            end_subscription(cx, conn, &thread, &err);
            return None;
        }
        let provisional = self.relied_on.take().map(|_| Provisional {
            fence: cx.out.current_batch(),
            from_seq,
        });
        let cached = self.cache.get(&thread).map_or(0, ThreadState::known_head);
        let head = elsewhere.map_or(cached, |durable| durable.head_seq.max(cached));
        if !resumed {
            let frame = codec::opened(&thread, head);
            let tag = Tag::Subscription {
                conn,
                thread: Arc::new(thread.clone()),
            };
            cx.out.push_tagged(Output::Send { conn, frame }, tag);
        }
        cx.metrics.thread_subscriptions += 1;
        let floor = from_seq.min(head + 1);
        let sub = Sub {
            next: floor,
            floor,
            live: floor > head,
            read: None,
            provisional,
        };
        let cache = &self.cache;
        self.sockets.subscribe(conn, &thread, sub, || {
            cache.ancestors(&thread).cloned().collect()
        });
        if !sub.live {
            self.replay(cx, conn);
        }
        None
    }

    /// In a cluster, a `fromSeq` past this node's head may name events
    /// another node made durable that this one has not heard of yet, not
    /// the seed's sentinel "beyond the head": the durable record decides.
    /// `None`: the cache decides (also while writes of ours are in flight
    /// on the thread: they settle first, see [`Threads::settled`]).
    fn durable_past_cache(
        &self,
        thread: &ThreadId,
        from_seq: u64,
    ) -> Result<Option<Version>, Step> {
        let head = self.cache.get(thread).map_or(0, ThreadState::known_head);
        if from_seq <= head.saturating_add(1) || !self.settled(thread) {
            return Ok(None);
        }
        self.durable_now(thread)
    }
}

impl Threads {
    /// Removes `conn`'s subscription to `thread`; false when there was none.
    /// One still provisional has sent nothing yet (its outputs wait behind
    /// the fence): the events it would have sent are dropped with it, so a
    /// subscription that ends before the grant that opened it stands
    /// delivers nothing (its opening and its end still go out).
    pub(in crate::threads) fn drop_subscription(
        &mut self,
        cx: &mut Ctx<'_>,
        conn: ConnId,
        thread: &ThreadId,
    ) -> bool {
        let unseen = self
            .sockets
            .sub(conn, thread)
            .and_then(|s| s.provisional)
            .is_some_and(|p| p.fence > cx.out.durable());
        if unseen {
            discard_held_events(cx, conn, thread);
        }
        self.sockets.unsubscribe(conn, thread)
    }

    /// Ends, unseen, the subscriptions to `doomed` threads that were
    /// authorized by writes of `batch` or later, which were just refused
    /// (a grant or a creation another writer beat): each comes back as
    /// `(conn, thread, fromSeq)`, to be decided again.
    pub(in crate::threads) fn provisional_subscriptions(
        &mut self,
        cx: &mut Ctx<'_>,
        batch: crate::ids::BatchId,
        doomed: &[&ThreadId],
    ) -> Vec<(ConnId, ThreadId, u64)> {
        let mut redo = Vec::new();
        for thread in doomed {
            for conn in self.sockets.subscribers(thread) {
                let from_seq = self
                    .sockets
                    .sub(conn, thread)
                    .and_then(|s| s.provisional)
                    .filter(|p| p.fence >= batch.0)
                    .map(|p| p.from_seq);
                if let Some(from_seq) = from_seq {
                    self.sockets.unsubscribe(conn, thread);
                    lost_subscriptions(cx, 1);
                    redo.push((conn, (*thread).clone(), from_seq));
                }
            }
        }
        redo
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    #[test]
    fn end_subscription_is_error_then_closed() {
        let mut out = crate::outbox::Outbox::default();
        let mut ids = crate::idgen::IdGen::new(1);
        let mut metrics = crate::metrics::Metrics::default();
        let limits = crate::config::Limits::default();
        let mut cx = Ctx {
            now: crate::Millis(0),
            out: &mut out,
            ids: &mut ids,
            metrics: &mut metrics,
            limits: &limits,
            cluster: false,
        };
        let thread = ThreadId::parse("thread-1").unwrap();
        end_subscription(
            &mut cx,
            ConnId(1),
            &thread,
            &BubbleError::ThreadNotFound(thread.clone()),
        );
        let frames: Vec<String> = std::iter::from_fn(|| out.pop())
            .filter_map(|o| match o {
                Output::Send { frame, .. } => Some(frame.to_string()),
                _ => None,
            })
            .collect();
        assert_eq!(frames.len(), 2);
        assert!(frames[0]
            .contains("\"type\":\"error\",\"threadId\":\"thread-1\",\"code\":\"not_found\""));
        assert_eq!(
            frames[1],
            r#"{"type":"thread.subscription_closed","threadId":"thread-1","reason":"not_found"}"#
        );
        assert_eq!(metrics.errors.get(ErrorCode::NotFound.as_str()), Some(&1));
    }
}
