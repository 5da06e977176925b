//! Per-connection state of `/v1/ws`: the caller, its subscriptions, flow
//! control of backlog replay, frames waiting behind a parked one, and the
//! frame-rate window.

use std::collections::{BTreeSet, VecDeque};

use indexmap::IndexMap;

use crate::config::Limits;
use crate::ids::{ConnId, Millis, ReadId, ThreadId};
use crate::maps::HashMap;
use crate::threads::state::Caller;

/// Where a subscription stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Sub {
    /// The next seq this subscription sends.
    pub(crate) next: u64,
    /// The lowest seq it may ever send (its `fromSeq`, or `throughSeq + 1`
    /// when it asked for live events only).
    pub(crate) floor: u64,
    /// Caught up: every append is fanned out to it. Otherwise it replays
    /// history and appends are not fanned out to it: replay reads them once
    /// it gets there.
    pub(crate) live: bool,
    /// The backlog read in flight, if any.
    pub(crate) read: Option<ReadId>,
    /// Set when the subscription was authorized by writes not yet durable.
    pub(crate) provisional: Option<Provisional>,
}

/// A subscription decided on writes that may still be refused: if a batch
/// up to `fence` is refused for its thread, everything it would have sent
/// is dropped and the subscribe is decided again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Provisional {
    /// The fence of the subscription's first outputs.
    pub(crate) fence: u64,
    /// The `fromSeq` it was asked with.
    pub(crate) from_seq: u64,
}

/// A frame that arrived while an earlier one waited for a read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Queued {
    /// A text frame.
    Text(String),
    /// A binary frame.
    Binary,
    /// A frame dropped by the frame-rate limit.
    RateLimited,
}

/// The `parked` mark of a connection whose bearer is not decided yet: no
/// operation has this id (they start at 1), so its frames queue.
const AUTHENTICATING: u64 = 0;

/// One `/v1/ws` connection.
#[derive(Debug)]
pub(crate) struct Conn {
    /// Who it is; `None` while its bearer waits for the key set.
    pub(crate) caller: Option<Caller>,
    /// The threads it follows (their subscriptions are in [`Sockets`]).
    pub(crate) subs: BTreeSet<ThreadId>,
    /// An `Output::WantDrained` is outstanding.
    pub(crate) awaiting_drain: bool,
    /// A close was requested; further frames are ignored.
    pub(crate) closing: bool,
    /// The operation of the frame waiting for a read, if any.
    pub(crate) parked: Option<u64>,
    /// Frames that arrived behind it, in order.
    pub(crate) queue: VecDeque<Queued>,
    /// Threads being subscribed again after a resume: their
    /// `thread.subscription_opened` was sent by an engine before this one.
    pub(crate) resuming: BTreeSet<ThreadId>,
    window_start: Millis,
    window_frames: u32,
}

impl Conn {
    pub(crate) fn new(caller: Caller) -> Conn {
        let mut conn = Conn::pending();
        conn.authenticated(caller);
        conn
    }

    /// A connection whose bearer is not decided yet.
    pub(crate) fn pending() -> Conn {
        Conn {
            caller: None,
            subs: BTreeSet::new(),
            awaiting_drain: false,
            closing: false,
            parked: Some(AUTHENTICATING),
            queue: VecDeque::new(),
            resuming: BTreeSet::new(),
            window_start: Millis(0),
            window_frames: 0,
        }
    }

    /// Its bearer was accepted: its queued frames may run.
    pub(crate) fn authenticated(&mut self, caller: Caller) {
        self.caller = Some(caller);
        if self.parked == Some(AUTHENTICATING) {
            self.parked = None;
        }
    }

    /// Counts one client frame; false when it exceeds the frame rate of its
    /// fixed window.
    pub(crate) fn admit(&mut self, now: Millis, limits: &Limits) -> bool {
        if self.window_frames == 0 || now >= self.window_start.plus(limits.frame_rate_window_ms) {
            self.window_start = now;
            self.window_frames = 0;
        }
        self.window_frames = self.window_frames.saturating_add(1);
        self.window_frames <= limits.frame_rate
    }
}

/// The subscriptions to one thread, by connection: kept in one dense
/// array, so a fan-out walks contiguous memory, with a hashed index for
/// lookups. Their order is that of subscription, with the last one moved
/// into the place of one that ends: the same for the same inputs.
pub(crate) type ThreadSubs = IndexMap<ConnId, Sub, foldhash::fast::FixedState>;

/// Every `/v1/ws` connection and, per thread, its subscriptions.
///
/// A subscription's state is kept under its thread, by connection, so a
/// fan-out walks one array; each connection lists the threads it follows.
/// The two agree: `conn` lists `thread` exactly when `thread`'s map holds
/// `conn`. Each followed thread also keeps the threads above it, and each
/// of those how many followed threads it has below it, so whether a
/// change to a thread reaches any subscription here is answered without
/// walking every followed thread.
#[derive(Debug, Default)]
pub(crate) struct Sockets {
    /// Looked up for every client frame, so hashed with a fast fixed
    /// hasher: connection ids are the host's, never a client's.
    pub(crate) conns: HashMap<ConnId, Conn, foldhash::fast::FixedState>,
    subscribers: HashMap<ThreadId, ThreadSubs>,
    /// Per followed thread, the threads above it, its parent first: read
    /// off the cache when it was first followed (a subscription starts on
    /// a fully cached chain, and a thread's parent never changes).
    lineage: HashMap<ThreadId, Vec<ThreadId>>,
    /// Per thread, how many followed threads are below it.
    followed_below: HashMap<ThreadId, usize>,
}

impl Sockets {
    /// Registers a subscription; `lineage` gives the threads above
    /// `thread`, its parent first, if nobody here followed it yet.
    pub(crate) fn subscribe(
        &mut self,
        conn: ConnId,
        thread: &ThreadId,
        sub: Sub,
        lineage: impl FnOnce() -> Vec<ThreadId>,
    ) {
        let Some(c) = self.conns.get_mut(&conn) else {
            return;
        };
        c.subs.insert(thread.clone());
        let subs = self.subscribers.entry(thread.clone()).or_default();
        if subs.is_empty() {
            let above = lineage();
            for ancestor in &above {
                *self.followed_below.entry(ancestor.clone()).or_default() += 1;
            }
            self.lineage.insert(thread.clone(), above);
        }
        subs.insert(conn, sub);
    }

    /// The subscription of `conn` to `thread`.
    pub(crate) fn sub(&self, conn: ConnId, thread: &ThreadId) -> Option<&Sub> {
        self.subscribers.get(thread)?.get(&conn)
    }

    /// The subscription of `conn` to `thread`, to update.
    pub(crate) fn sub_mut(&mut self, conn: ConnId, thread: &ThreadId) -> Option<&mut Sub> {
        self.subscribers.get_mut(thread)?.get_mut(&conn)
    }

    /// The subscriptions to `thread`, by connection, to update.
    pub(crate) fn subs_of_thread_mut(&mut self, thread: &ThreadId) -> Option<&mut ThreadSubs> {
        self.subscribers.get_mut(thread)
    }

    /// The connections subscribed to `thread`, in id order.
    pub(crate) fn subscribers(&self, thread: &ThreadId) -> Vec<ConnId> {
        let mut conns: Vec<ConnId> = self
            .subscribers
            .get(thread)
            .map(|s| s.keys().copied().collect())
            .unwrap_or_default();
        conns.sort_unstable();
        conns
    }

    /// Whether any connection here follows `thread`.
    pub(crate) fn followed(&self, thread: &ThreadId) -> bool {
        self.subscribers.contains_key(thread)
    }

    /// Every thread some connection here follows.
    pub(crate) fn followed_threads(&self) -> impl Iterator<Item = &ThreadId> {
        self.subscribers.keys()
    }

    /// Every followed thread and every thread above one: what the
    /// subscriptions here need cached.
    pub(crate) fn followed_and_above(&self) -> impl Iterator<Item = &ThreadId> {
        self.subscribers.keys().chain(self.followed_below.keys())
    }

    /// Whether a connection here follows `root` or a thread below it.
    pub(crate) fn followed_at_or_below(&self, root: &ThreadId) -> bool {
        self.followed(root) || self.followed_below.contains_key(root)
    }

    /// Whether the followed `thread` is `root` or below it.
    pub(crate) fn at_or_below(&self, thread: &ThreadId, root: &ThreadId) -> bool {
        thread == root || self.lineage.get(thread).is_some_and(|l| l.contains(root))
    }

    /// The subscriptions of `conn`, in thread order (`None`: no such
    /// connection).
    pub(crate) fn subs_of_conn(
        &self,
        conn: ConnId,
    ) -> Option<impl Iterator<Item = (&ThreadId, &Sub)>> {
        let c = self.conns.get(&conn)?;
        Some(
            c.subs
                .iter()
                .filter_map(move |t| Some((t, self.sub(conn, t)?))),
        )
    }

    /// Drops a subscription; true when there was one.
    pub(crate) fn unsubscribe(&mut self, conn: ConnId, thread: &ThreadId) -> bool {
        let removed = self
            .conns
            .get_mut(&conn)
            .is_some_and(|c| c.subs.remove(thread));
        if let Some(subs) = self.subscribers.get_mut(thread) {
            subs.swap_remove(&conn);
            if subs.is_empty() {
                self.subscribers.remove(thread);
                self.unfollow(thread);
            }
        }
        removed
    }

    /// Nobody here follows `thread` any more: its ancestors count one
    /// followed thread fewer below them.
    fn unfollow(&mut self, thread: &ThreadId) {
        for ancestor in self.lineage.remove(thread).unwrap_or_default() {
            if let Some(count) = self.followed_below.get_mut(&ancestor) {
                *count -= 1;
                if *count == 0 {
                    self.followed_below.remove(&ancestor);
                }
            }
        }
    }

    /// Drops every subscription of `conn`; returns how many there were.
    pub(crate) fn drop_subs(&mut self, conn: ConnId) -> usize {
        let threads: Vec<ThreadId> = self
            .conns
            .get(&conn)
            .map(|c| c.subs.iter().cloned().collect())
            .unwrap_or_default();
        for thread in &threads {
            self.unsubscribe(conn, thread);
        }
        threads.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::PrincipalId;
    use std::collections::HashSet;

    #[test]
    fn frame_rate_is_a_fixed_window() {
        let limits = Limits {
            frame_rate: 2,
            frame_rate_window_ms: 100,
            ..Limits::default()
        };
        let mut c = Conn::new(Caller {
            principal: PrincipalId::new("a"),
            admin: false,
        });
        assert!(c.admit(Millis(10), &limits));
        assert!(c.admit(Millis(20), &limits));
        assert!(!c.admit(Millis(109), &limits));
        assert!(c.admit(Millis(110), &limits));
    }

    fn thread(id: &str) -> ThreadId {
        ThreadId::parse(id).expect("a valid thread id")
    }

    fn live_sub() -> Sub {
        Sub {
            next: 1,
            floor: 1,
            live: true,
            read: None,
            provisional: None,
        }
    }

    #[test]
    fn a_thread_counts_as_followed_below_while_a_thread_under_it_is_followed() {
        let mut sockets = Sockets::default();
        for id in [1, 2] {
            let caller = Caller {
                principal: PrincipalId::new("a"),
                admin: false,
            };
            sockets.conns.insert(ConnId(id), Conn::new(caller));
        }
        let (root, mid, leaf) = (thread("root"), thread("mid"), thread("leaf"));
        let lineage = || vec![thread("mid"), thread("root")];
        sockets.subscribe(ConnId(1), &leaf, live_sub(), lineage);
        sockets.subscribe(ConnId(2), &leaf, live_sub(), || unreachable!("followed"));
        sockets.subscribe(ConnId(2), &mid, live_sub(), || vec![thread("root")]);
        assert!(sockets.followed_at_or_below(&root));
        assert!(sockets.at_or_below(&leaf, &root));
        assert!(!sockets.at_or_below(&mid, &leaf));
        assert!(!sockets.followed_at_or_below(&thread("other")));
        let pinned: HashSet<&ThreadId> = sockets.followed_and_above().collect();
        assert_eq!(pinned, [&root, &mid, &leaf].into_iter().collect());

        sockets.unsubscribe(ConnId(1), &leaf);
        assert!(sockets.followed_at_or_below(&root) && sockets.at_or_below(&leaf, &mid));
        assert_eq!(sockets.drop_subs(ConnId(2)), 2);
        assert!(!sockets.followed_at_or_below(&root));
        assert!(!sockets.followed_at_or_below(&mid));
        assert!(sockets.followed_below.is_empty() && sockets.lineage.is_empty());
        assert_eq!(sockets.followed_and_above().count(), 0);
    }
}
