//! The `/v1/ws` connection state machine (bubble-websocket-protocol.txt,
//! SPEC §5).
//!
//! A subscription is registered with `thread.subscription_opened` carrying
//! the head at that moment, then replays history as [`Sub::CatchingUp`]:
//! at most `limits.backlog_page` events per step, then an
//! [`Output::WantDrained`] and the next step on [`Input::Drained`]. Appends
//! are fanned out only to [`Sub::Live`] subscriptions; replay reads events
//! appended meanwhile itself, and a subscription that reaches the head
//! becomes live within the same step. The engine handles one input at a
//! time, so nothing is appended between the last replayed event and the
//! switch: no gap and no duplicate.
//!
//! [`Input::Drained`]: crate::Input::Drained

use crate::auth::AuthError;
use crate::engine::{Ctx, Output, WsFrame};
use crate::error::BubbleError;
use crate::ids::{ConnId, ThreadId};
use crate::model::StoredEvent;
use crate::policy::Capability;
use crate::store::EventStore;
use crate::threads::state::Caller;
use crate::threads::Threads;

pub(crate) mod codec;
pub(crate) mod conn;

use codec::{ClientFrame, FrameError};
use conn::{Conn, Sub};

/// Close code for a frame over `limits.max_ws_frame_bytes`.
const CLOSE_TOO_BIG: u16 = 1009;
/// Close code after a refused bearer.
const CLOSE_POLICY: u16 = 1008;

/// A socket whose bearer was refused: one unscoped `unauthorized` error,
/// then close 1008.
pub(super) fn refuse(cx: &mut Ctx<'_>, conn: ConnId, err: AuthError) {
    send_error(cx, conn, None, &BubbleError::from(err));
    cx.out.push(Output::Close {
        conn,
        code: CLOSE_POLICY,
    });
}

fn send_error(cx: &mut Ctx<'_>, conn: ConnId, scope: Option<&str>, err: &BubbleError) {
    cx.metrics.count_error(err.code());
    cx.out.push(Output::Send {
        conn,
        frame: codec::error(scope, err),
    });
}

fn lost_subscriptions(cx: &mut Ctx<'_>, n: usize) {
    let n = u64::try_from(n).unwrap_or(u64::MAX);
    cx.metrics.thread_subscriptions = cx.metrics.thread_subscriptions.saturating_sub(n);
}

/// A scoped error, then `thread.subscription_closed` with its code.
fn end_subscription(cx: &mut Ctx<'_>, conn: ConnId, thread: &ThreadId, err: &BubbleError) {
    send_error(cx, conn, Some(thread.as_str()), err);
    cx.out.push(Output::Send {
        conn,
        frame: codec::closed(thread, err.code()),
    });
}

impl Threads {
    pub(super) fn ws_open(&mut self, cx: &mut Ctx<'_>, conn: ConnId, caller: Caller) {
        self.sockets.conns.insert(conn, Conn::new(caller));
        cx.metrics.thread_connections += 1;
    }

    pub(super) fn ws_closed(&mut self, cx: &mut Ctx<'_>, conn: ConnId) {
        let dropped = self.sockets.drop_subs(conn);
        if self.sockets.conns.remove(&conn).is_some() {
            lost_subscriptions(cx, dropped);
            cx.metrics.thread_connections = cx.metrics.thread_connections.saturating_sub(1);
        }
    }

    pub(super) fn ws_drained(&mut self, cx: &mut Ctx<'_>, store: &dyn EventStore, conn: ConnId) {
        if let Some(c) = self.sockets.conns.get_mut(&conn) {
            c.awaiting_drain = false;
            self.replay(cx, store, conn);
        }
    }

    pub(super) fn ws_frame(
        &mut self,
        cx: &mut Ctx<'_>,
        store: &dyn EventStore,
        conn: ConnId,
        frame: WsFrame<'_>,
    ) {
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
            let dropped = self.sockets.drop_subs(conn);
            lost_subscriptions(cx, dropped);
            cx.out.push(Output::Close {
                conn,
                code: CLOSE_TOO_BIG,
            });
            return;
        }
        if !c.admit(cx.now, cx.limits) {
            let err = BubbleError::RateLimited(format!(
                "Too many frames: at most {} per {} ms; the frame was dropped.",
                cx.limits.frame_rate, cx.limits.frame_rate_window_ms
            ));
            return send_error(cx, conn, None, &err);
        }
        let caller = c.caller.clone();
        let WsFrame::Text(text) = frame else {
            let err =
                BubbleError::InvalidRequest("Binary frames are not part of the protocol.".into());
            return send_error(cx, conn, None, &err);
        };
        match codec::parse(text) {
            Err(FrameError { scope, error }) => send_error(cx, conn, scope.as_deref(), &error),
            Ok(ClientFrame::Subscribe { thread, from_seq }) => {
                self.subscribe(cx, store, conn, &caller, thread, from_seq);
            }
            Ok(ClientFrame::Unsubscribe { thread }) => {
                if self.sockets.unsubscribe(conn, &thread) {
                    lost_subscriptions(cx, 1);
                }
            }
            Ok(ClientFrame::Append { thread, event }) => {
                if let Err(err) = self.append(cx, store, &caller, &thread, event, None) {
                    send_error(cx, conn, Some(thread.as_str()), &err);
                }
            }
        }
    }

    fn subscribe(
        &mut self,
        cx: &mut Ctx<'_>,
        store: &dyn EventStore,
        conn: ConnId,
        caller: &Caller,
        thread: ThreadId,
        from_seq: u64,
    ) {
        let Some(c) = self.sockets.conns.get(&conn) else {
            return;
        };
        if c.subs.contains_key(&thread) {
            let err = BubbleError::AlreadySubscribed(thread.clone());
            return send_error(cx, conn, Some(thread.as_str()), &err);
        }
        if self
            .require(caller, &thread, Capability::EventsSubscribe)
            .is_err()
        {
            // Denial maps to not_found, as for GET /v1/threads/:threadId.
            let err = BubbleError::ThreadNotFound(thread.clone());
            return end_subscription(cx, conn, &thread, &err);
        }
        if c.subs.len() >= cx.limits.max_subscriptions {
            let err = BubbleError::RateLimited(format!(
                "Connection already holds the maximum of {} subscriptions.",
                cx.limits.max_subscriptions
            ));
            return end_subscription(cx, conn, &thread, &err);
        }
        let awaiting_drain = c.awaiting_drain;
        let head = self.table.get(&thread).map_or(0, |t| t.head_seq);
        cx.out.push(Output::Send {
            conn,
            frame: codec::opened(&thread, head),
        });
        cx.metrics.thread_subscriptions += 1;
        if from_seq > head {
            self.sockets.subscribe(conn, &thread, Sub::Live);
        } else {
            self.sockets
                .subscribe(conn, &thread, Sub::CatchingUp { next_seq: from_seq });
            if !awaiting_drain {
                self.replay(cx, store, conn);
            }
        }
    }

    /// One replay step of every catching-up subscription of `conn`, at most
    /// `limits.backlog_page` events in all.
    fn replay(&mut self, cx: &mut Ctx<'_>, store: &dyn EventStore, conn: ConnId) {
        let Some(c) = self.sockets.conns.get(&conn) else {
            return;
        };
        let catching: Vec<(ThreadId, u64)> = c
            .subs
            .iter()
            .filter_map(|(t, s)| match s {
                Sub::CatchingUp { next_seq } => Some((t.clone(), *next_seq)),
                Sub::Live => None,
            })
            .collect();
        let mut budget = cx.limits.backlog_page.max(1);
        let mut unfinished = false;
        for (thread, mut next) in catching {
            if budget == 0 {
                unfinished = true;
                break;
            }
            let head = self.table.get(&thread).map_or(0, |t| t.head_seq);
            let events = match self.table.read(store, &thread, next, head, budget) {
                Ok(events) if !events.is_empty() || next > head => events,
                _ => {
                    self.sockets.unsubscribe(conn, &thread);
                    lost_subscriptions(cx, 1);
                    end_subscription(cx, conn, &thread, &BubbleError::Internal);
                    continue;
                }
            };
            for event in &events {
                cx.out.push(Output::Send {
                    conn,
                    frame: codec::event(&thread, &event.json),
                });
                next = event.seq + 1;
            }
            budget -= events.len();
            let state = if next > head {
                Sub::Live
            } else {
                Sub::CatchingUp { next_seq: next }
            };
            unfinished |= state != Sub::Live;
            self.sockets.subscribe(conn, &thread, state);
        }
        if unfinished {
            if let Some(c) = self.sockets.conns.get_mut(&conn) {
                c.awaiting_drain = true;
                cx.out.push(Output::WantDrained { conn });
            }
        }
    }

    /// Sends `event` to every live subscription of `thread`, serialized once.
    pub(super) fn fan_out(&mut self, cx: &mut Ctx<'_>, thread: &ThreadId, event: &StoredEvent) {
        let Some(subscribers) = self.sockets.subscribers.get(thread) else {
            return;
        };
        let mut frame = None;
        for conn in subscribers {
            let live = self
                .sockets
                .conns
                .get(conn)
                .and_then(|c| c.subs.get(thread));
            if live == Some(&Sub::Live) {
                let frame = frame.get_or_insert_with(|| codec::event(thread, &event.json));
                cx.out.push(Output::Send {
                    conn: *conn,
                    frame: frame.clone(),
                });
            }
        }
    }

    /// After a grant change on `root`: every subscription on `root` or below
    /// whose caller no longer holds `events.subscribe` ends with a scoped
    /// `not_found` error and `thread.subscription_closed`.
    pub(super) fn recheck_subscriptions(&mut self, cx: &mut Ctx<'_>, root: &ThreadId) {
        for thread in self.table.subtree(root) {
            let Some(subscribers) = self.sockets.subscribers.get(&thread) else {
                continue;
            };
            let lost: Vec<ConnId> = subscribers
                .iter()
                .copied()
                .filter(|conn| {
                    self.sockets.conns.get(conn).is_some_and(|c| {
                        !self
                            .held(&c.caller, &thread)
                            .contains(Capability::EventsSubscribe)
                    })
                })
                .collect();
            for conn in lost {
                self.sockets.unsubscribe(conn, &thread);
                lost_subscriptions(cx, 1);
                end_subscription(
                    cx,
                    conn,
                    &thread,
                    &BubbleError::ThreadNotFound(thread.clone()),
                );
            }
        }
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
