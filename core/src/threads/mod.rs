//! Threads: durable append-only event streams, their HTTP routes and the
//! `/v1/ws` connection state machine.
//!
//! The engine keeps thread state in a bounded [`cache::Cache`] and reads
//! what it lacks through [`Output::Read`](crate::Output::Read). An operation
//! (an HTTP request, a `/v1/ws` frame) runs against the cache; when it needs
//! something that is not there, it stops before deciding anything
//! ([`work::Step::Need`]), the read is issued, and the operation is parked
//! and run again from the start once the read completes. Reads complete in
//! any order: a `/v1/ws` connection's frames are queued behind its parked
//! frame, so they are decided in the order they arrived.
//!
//! Writes are decided over the cache and sealed, per input, into one batch
//! whose thread groups expect the version they were decided on
//! ([`commit`]). Events appended but not yet durable are kept as pending;
//! every output that depends on a write is pushed after it, so the outbox
//! fence releases it only once it is durable, and a refused write's outputs
//! are dropped and its operation decided again.

use std::collections::{BTreeMap, VecDeque};

use crate::auth::AuthError;
use crate::config::Config;
use crate::ctx::Ctx;
use crate::http::HttpRequest;
use crate::ids::{ConnId, PrincipalId, ReadId, RequestId, ThreadId};
use crate::io::WsFrame;
use crate::maps::{HashMap, HashSet};
use crate::store::{ReadQuery, ThreadWrites};

mod cache;
mod commit;
mod folds;
mod http;
mod incoming;
mod messages;
mod ops;
mod query;
mod rules;
mod state;
mod work;
mod ws;

use cache::Cache;
use state::Caller;
use work::{Inflight, Waiter, Work};
use ws::conn::Sockets;

/// The thread cache, the operations waiting for reads, the writes being
/// decided and in flight, and the `/v1/ws` connections.
#[derive(Debug)]
pub(crate) struct Threads {
    admins: HashSet<PrincipalId>,
    /// One node of a cluster: other nodes write to the same store, so a
    /// thread cached as absent may exist by now.
    cluster: bool,
    cache: Cache,
    /// The message folds of threads read through `/messages`.
    folds: folds::Folds,
    sockets: Sockets,
    /// Who waits for each read in flight.
    reads: HashMap<ReadId, Waiter>,
    next_read: u64,
    /// Thread loads in flight.
    loading: HashMap<ThreadId, ReadId>,
    /// Operations waiting for a read.
    works: HashMap<u64, Work>,
    next_op: u64,
    /// The answers of the operation being run.
    answers: work::Answers,
    /// The thread the operation being run wrote to.
    wrote: Option<ThreadId>,
    /// A thread with writes not yet durable that the operation being run
    /// was authorized against: its answer stands only if they commit.
    relied_on: Option<ThreadId>,
    /// The current input's writes, by thread.
    building: Vec<ThreadWrites>,
    /// Operations whose writes are not durable yet, in decision order.
    inflight: VecDeque<Inflight>,
    /// The threads written by each batch not yet durable.
    batches: BTreeMap<u64, Vec<ThreadId>>,
}

impl Threads {
    pub(crate) fn new(config: &Config) -> Threads {
        Threads {
            admins: config.admins.iter().cloned().collect(),
            cluster: config.cluster,
            cache: Cache::default(),
            folds: folds::Folds::default(),
            sockets: Sockets::default(),
            reads: HashMap::default(),
            next_read: 0,
            loading: HashMap::default(),
            works: HashMap::default(),
            next_op: 0,
            answers: work::Answers::default(),
            wrote: None,
            relied_on: None,
            building: Vec::new(),
            inflight: VecDeque::new(),
            batches: BTreeMap::new(),
        }
    }

    fn caller(&self, principal: PrincipalId) -> Caller {
        Caller {
            admin: self.admins.contains(&principal),
            principal,
        }
    }

    /// A `/v1/ws` socket opened (or, after [`Threads::open_pending`], was
    /// authenticated); a refused principal gets one unscoped
    /// `unauthorized` error, then close 1008.
    pub(crate) fn open(
        &mut self,
        cx: &mut Ctx<'_>,
        conn: ConnId,
        principal: Result<PrincipalId, AuthError>,
    ) {
        match principal {
            Ok(principal) => {
                let caller = self.caller(principal);
                self.ws_open(cx, conn, caller);
            }
            Err(err) => self.ws_refuse(
                cx,
                conn,
                &crate::error::BubbleError::from(err),
                crate::io::CloseReason::Policy,
            ),
        }
    }

    /// A `/v1/ws` socket open before its bearer is decided: its frames
    /// queue until [`Threads::open`] decides it.
    pub(crate) fn open_pending(&mut self, cx: &mut Ctx<'_>, conn: ConnId) {
        self.ws_open_pending(cx, conn);
    }

    /// A `/v1/ws` socket over a connection limit: an unscoped `err`, then
    /// close 1013 (try again later).
    pub(crate) fn refuse_busy(
        &mut self,
        cx: &mut Ctx<'_>,
        conn: ConnId,
        err: &crate::error::BubbleError,
    ) {
        self.ws_refuse(cx, conn, err, crate::io::CloseReason::TryAgainLater);
    }

    /// Subscribes a resumed `/v1/ws` socket again (see `Input::ResumeThreads`).
    pub(crate) fn resume_socket(
        &mut self,
        cx: &mut Ctx<'_>,
        conn: ConnId,
        subs: &[(ThreadId, u64)],
    ) {
        self.ws_resume(cx, conn, subs);
    }

    /// Where the subscriptions of `conn` stand: per thread, the next seq.
    pub(crate) fn subscriptions(&self, conn: ConnId) -> Option<Vec<(ThreadId, u64)>> {
        let subs = self.sockets.subs_of_conn(conn)?;
        Some(subs.map(|(t, s)| (t.clone(), s.next)).collect())
    }

    /// Threads with live subscriptions, in id order.
    pub(crate) fn subscribed_threads(&self) -> Vec<ThreadId> {
        let mut threads: Vec<ThreadId> = self.sockets.followed_threads().cloned().collect();
        threads.sort();
        threads
    }

    /// A client frame on a `/v1/ws` socket.
    pub(crate) fn frame(&mut self, cx: &mut Ctx<'_>, conn: ConnId, frame: WsFrame<'_>) {
        self.ws_frame(cx, conn, frame);
    }

    /// The socket's queue drained: continue backlog replay.
    pub(crate) fn drained(&mut self, cx: &mut Ctx<'_>, conn: ConnId) {
        self.ws_drained(cx, conn);
    }

    /// The socket closed: drop its subscriptions and queued frames.
    pub(crate) fn closed(&mut self, cx: &mut Ctx<'_>, conn: ConnId) {
        self.ws_closed(cx, conn);
    }

    /// A `/v1/threads…` request.
    pub(crate) fn http(
        &mut self,
        cx: &mut Ctx<'_>,
        req: RequestId,
        principal: Result<PrincipalId, AuthError>,
        request: &HttpRequest<'_>,
    ) {
        let op = self.new_op();
        let caller = principal.map(|p| self.caller(p));
        if let Some(need) = self.run_http(cx, op, req, caller.clone(), request) {
            let owned = work::Op::http(req, caller, request);
            self.park(cx, op, owned, need);
        } else {
            self.settle(cx, op, || work::Op::http(req, caller, request));
        }
    }

    /// Ends an input: seals its writes into a batch and bounds the cache.
    pub(crate) fn end_input(&mut self, cx: &mut Ctx<'_>) {
        self.seal(cx);
        self.trim(cx);
    }

    fn new_op(&mut self) -> u64 {
        self.next_op += 1;
        self.next_op
    }

    fn new_read(&mut self, cx: &mut Ctx<'_>, query: ReadQuery, waiter: Waiter) -> ReadId {
        self.next_read += 1;
        let read = ReadId(self.next_read);
        cx.metrics.store_reads += 1;
        cx.out.push_unfenced(crate::Output::Read { read, query });
        self.reads.insert(read, waiter);
        read
    }
}

#[cfg(test)]
mod tests;
