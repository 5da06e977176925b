//! Backlog replay and live fan-out of subscriptions.
//!
//! A catching-up subscription reads durable history a page at a time
//! (`limits.backlog_page` events per read, then an `Output::WantDrained`
//! and the next read on `Input::Drained`). Once it has sent everything
//! durable, it sends the pending events from memory and becomes live in the
//! same input, so no append falls between the two. When another writer
//! changes a thread, or a write of ours is refused, the thread's
//! subscriptions are rewound to what they were sent that is durable and
//! replay from there.

use std::sync::Arc;

use crate::ctx::Ctx;
use crate::error::BubbleError;
use crate::ids::{ConnId, ReadId, ThreadId};
use crate::io::Output;
use crate::model::StoredEvent;
use crate::outbox::{drop_recipients, Tag};
use crate::policy::Capability;
use crate::store::{ReadQuery, ReadResult, StoreError};
use crate::threads::work::Waiter;
use crate::threads::ws::{codec, discard_held_events, end_subscription, lost_subscriptions};
use crate::threads::Threads;

impl Threads {
    pub(in crate::threads) fn ws_drained(&mut self, cx: &mut Ctx<'_>, conn: ConnId) {
        if let Some(c) = self.sockets.conns.get_mut(&conn) {
            c.awaiting_drain = false;
            self.replay(cx, conn);
        }
    }

    /// Moves every catching-up subscription of `conn` that has no read in
    /// flight one step on: a read of durable history, or the pending events
    /// and the switch to live.
    pub(super) fn replay(&mut self, cx: &mut Ctx<'_>, conn: ConnId) {
        if self
            .sockets
            .conns
            .get(&conn)
            .is_none_or(|c| c.awaiting_drain)
        {
            return;
        }
        let waiting: Vec<ThreadId> = self
            .sockets
            .subs_of_conn(conn)
            .into_iter()
            .flatten()
            .filter(|(_, s)| !s.live && s.read.is_none())
            .map(|(t, _)| t.clone())
            .collect();
        for thread in waiting {
            self.step(cx, conn, &thread);
        }
    }

    fn step(&mut self, cx: &mut Ctx<'_>, conn: ConnId, thread: &ThreadId) {
        // A thread being reloaded resumes its subscriptions once loaded, and
        // so does one that waits for a reload, or whose ancestor does.
        let Some(state) = self.cache.get(thread) else {
            return;
        };
        if state.stale
            || self
                .cache
                .ancestors(thread)
                .any(|a| self.cache.get(a).is_some_and(|s| s.stale))
        {
            return;
        }
        let durable = state.durable().head_seq;
        let Some(sub) = self.sockets.sub_mut(conn, thread) else {
            return;
        };
        if sub.next > durable {
            let pending: Vec<StoredEvent> = state.pending_from(sub.next).cloned().collect();
            for event in pending {
                send_event(cx, conn, thread, &event);
                sub.next = event.seq + 1;
            }
            sub.live = true;
            return;
        }
        let query = ReadQuery::Events {
            thread_id: thread.clone(),
            from_seq: sub.next,
            through_seq: durable,
            limit: cx.limits.backlog_page.max(1),
        };
        let waiter = Waiter::Replay {
            conn,
            thread: thread.clone(),
            through: durable,
        };
        let read = self.new_read(cx, query, waiter);
        if let Some(sub) = self.sockets.sub_mut(conn, thread) {
            sub.read = Some(read);
        }
    }

    /// A backlog page arrived.
    pub(in crate::threads) fn replayed(
        &mut self,
        cx: &mut Ctx<'_>,
        conn: ConnId,
        thread: &ThreadId,
        read: ReadId,
        through: u64,
        result: Result<ReadResult, StoreError>,
    ) {
        let Some(sub) = self.sockets.sub_mut(conn, thread) else {
            return;
        };
        if sub.read != Some(read) {
            // The subscription ended or was rewound since.
            return;
        }
        sub.read = None;
        let expected_first = sub.next;
        let events = match result {
            Ok(ReadResult::Events(events))
                if events.first().map(|e| e.seq) == Some(expected_first)
                    && events.windows(2).all(|w| w[1].seq == w[0].seq + 1)
                    && events.last().is_some_and(|e| e.seq <= through) =>
            {
                events
            }
            failed => {
                let err = match failed {
                    Err(e) => e.to_bubble_error(),
                    Ok(_) => BubbleError::Internal,
                };
                self.drop_subscription(cx, conn, thread);
                lost_subscriptions(cx, 1);
                end_subscription(cx, conn, thread, &err);
                return;
            }
        };
        for event in &events {
            send_event(cx, conn, thread, event);
        }
        let next = events.last().map_or(expected_first, |e| e.seq + 1);
        if let Some(sub) = self.sockets.sub_mut(conn, thread) {
            sub.next = next;
        }
        let behind = self
            .cache
            .get(thread)
            .is_some_and(|s| next <= s.durable().head_seq);
        if behind {
            if let Some(c) = self.sockets.conns.get_mut(&conn) {
                if !c.awaiting_drain {
                    c.awaiting_drain = true;
                    cx.out.push(Output::WantDrained { conn });
                }
            }
        } else {
            self.step(cx, conn, thread);
        }
    }

    /// Sends `event` to every live subscription of `thread` that expects it:
    /// one output, serialized once, listing its recipients.
    pub(in crate::threads) fn fan_out(
        &mut self,
        cx: &mut Ctx<'_>,
        thread: &ThreadId,
        event: &StoredEvent,
    ) {
        let Some(subs) = self.sockets.subs_of_thread_mut(thread) else {
            return;
        };
        let mut conns = Vec::with_capacity(subs.len());
        for (conn, sub) in subs {
            if sub.live && sub.next == event.seq {
                sub.next = event.seq + 1;
                conns.push(*conn);
            }
        }
        if conns.is_empty() {
            return;
        }
        cx.out.push_tagged(
            Output::SendAll {
                conns,
                frame: codec::event(thread, &event.json),
            },
            Tag::Event {
                thread: Arc::new(thread.clone()),
                seq: event.seq,
            },
        );
    }

    /// `thread`'s cached state is dropped: its subscriptions were sent at
    /// most `durable` of what will stand (the rest was held and is dropped
    /// or replayed), so they catch up from there once it is reloaded
    /// (`None`: it was dropped before, they stay where they are). The
    /// events still held for them behind a durability fence are withdrawn
    /// too and sent again after the reload, on the state it reads: a grant
    /// revoked meanwhile ends the subscription before they go out. Those
    /// held for a subscription that has ended are withdrawn for good, on
    /// `thread` and on the threads below it that nobody here follows any
    /// more (their readers' access rested on its grants too).
    pub(in crate::threads) fn rewind_subscriptions(
        &mut self,
        cx: &mut Ctx<'_>,
        thread: &ThreadId,
        durable: Option<u64>,
    ) {
        let mut withdrawn: Vec<(ConnId, u64)> = Vec::new();
        let unfollowed_below = |t: &ThreadId| {
            !self.sockets.followed(t) && self.cache.ancestors(t).any(|a| a == thread)
        };
        cx.out.discard(|tag, out| match tag {
            Tag::Event { thread: t, seq } if **t == *thread => drop_recipients(out, |conn| {
                withdrawn.push((conn, *seq));
                true
            }),
            Tag::Event { thread: t, .. } => unfollowed_below(t),
            _ => false,
        });
        // Those withdrawn from a subscription ended since are not sent again.
        let Some(subs) = self.sockets.subs_of_thread_mut(thread) else {
            return;
        };
        for (conn, sub) in subs.iter_mut() {
            if let Some(durable) = durable {
                sub.next = sub.next.min(durable + 1);
            }
            let first_held = withdrawn
                .iter()
                .filter(|(c, _)| c == conn)
                .map(|(_, s)| *s)
                .min();
            if let Some(seq) = first_held {
                sub.next = sub.next.min(seq);
            }
            sub.next = sub.floor.max(sub.next);
            sub.live = false;
            sub.read = None;
        }
    }

    /// `thread` changed elsewhere and cannot be reloaded yet (writes of
    /// ours are in flight on it): what the store holds now may end
    /// subscriptions on it or below it, so they wait for the reload. The
    /// events held for them behind a durability fence are withdrawn (and
    /// those held on `root` for subscriptions that ended), and they catch
    /// up from the first of them once the reload has decided on the state
    /// it reads.
    pub(in crate::threads) fn hold_subscriptions(&mut self, cx: &mut Ctx<'_>, root: &ThreadId) {
        self.rewind_subscriptions(cx, root, None);
        for thread in self.followed_under(root).iter().filter(|t| *t != root) {
            self.rewind_subscriptions(cx, thread, None);
        }
    }

    /// `thread` was (re)loaded: check the access of its subscriptions and
    /// of those below it, and resume their replay.
    pub(in crate::threads) fn thread_loaded(&mut self, cx: &mut Ctx<'_>, thread: &ThreadId) {
        self.recheck_subscriptions(cx, thread, Decided::Elsewhere);
        let mut conns: Vec<ConnId> = self
            .followed_under(thread)
            .iter()
            .flat_map(|t| self.sockets.subscribers(t))
            .collect();
        conns.sort_unstable();
        conns.dedup();
        for conn in conns {
            self.replay(cx, conn);
        }
    }

    /// The threads followed here that are `root` or below it: the root
    /// first, then the rest by id (the same outputs for the same inputs,
    /// whatever the hash map's order).
    fn followed_under(&self, root: &ThreadId) -> Vec<ThreadId> {
        let mut threads: Vec<ThreadId> = self
            .sockets
            .followed_threads()
            .filter(|t| self.sockets.at_or_below(t, root))
            .cloned()
            .collect();
        threads.sort_by(|a, b| (a != root, a).cmp(&(b != root, b)));
        threads
    }

    /// After a grant change on `root` (or its reload): every subscription on
    /// `root` or below whose caller no longer holds `events.subscribe` ends
    /// with a scoped `not_found` error and `thread.subscription_closed`.
    /// A change decided `Here` lets the events decided before it go out
    /// once durable (the caller could read them); one decided `Elsewhere`
    /// and learned from the store also drops the events still held for
    /// those subscriptions (nothing says the caller could read them).
    pub(in crate::threads) fn recheck_subscriptions(
        &mut self,
        cx: &mut Ctx<'_>,
        root: &ThreadId,
        decided: Decided,
    ) {
        for thread in self.followed_under(root) {
            for conn in self.sockets.subscribers(&thread) {
                let Some(caller) = self.sockets.conns.get(&conn).and_then(|c| c.caller.clone())
                else {
                    continue;
                };
                // A chain not fully cached is checked again once it loads.
                let Ok(held) = self.cache.capabilities(&caller, &thread) else {
                    continue;
                };
                if held.is_some_and(|h| h.contains(Capability::EventsSubscribe)) {
                    continue;
                }
                if decided == Decided::Elsewhere {
                    discard_held_events(cx, conn, &thread);
                }
                self.drop_subscription(cx, conn, &thread);
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

/// Where a grant change that a subscription is checked against was decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(in crate::threads) enum Decided {
    /// By an operation of this engine, after the events it decided before.
    Here,
    /// By another writer: this engine read it from the store.
    Elsewhere,
}

/// Sends one event frame, tagged so that it is dropped if its write is
/// refused or its subscription is decided again.
fn send_event(cx: &mut Ctx<'_>, conn: ConnId, thread: &ThreadId, event: &StoredEvent) {
    let out = Output::Send {
        conn,
        frame: codec::event(thread, &event.json),
    };
    let tag = Tag::Event {
        thread: Arc::new(thread.clone()),
        seq: event.seq,
    };
    cx.out.push_tagged(out, tag);
}
