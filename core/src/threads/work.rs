//! Operations that wait for reads: parking, answers and re-runs.
//!
//! An operation runs against the cache and the answers its earlier reads
//! got. When it lacks something it returns [`Step::Need`] before deciding
//! anything; it is then parked with its answers and run again from the
//! start when the read completes. Operations that wrote are remembered
//! until their batch is durable, so that a write another writer beat can be
//! decided again ([`Inflight`]).

use crate::auth::AuthError;
use crate::ctx::Ctx;
use crate::error::BubbleError;
use crate::http::{HttpRequest, HttpResponse, OwnedRequest};
use crate::ids::{ConnId, ReadId, RequestId, ThreadId};
use crate::io::Output;
use crate::maps::HashMap;
use crate::outbox::Tag;
use crate::store::{ReadQuery, ReadResult, StoreError, ThreadRecord, Version};
use crate::threads::cache::Slot;
use crate::threads::state::Caller;
use crate::threads::Threads;

/// What an operation's reads answered, by query.
pub(crate) type Answers = HashMap<ReadQuery, Result<ReadResult, StoreError>>;

/// Why an operation stopped without an answer of its own.
#[derive(Debug)]
pub(crate) enum Step {
    /// It failed with this error.
    Fail(BubbleError),
    /// It needs this read first; nothing was decided.
    Need(ReadQuery),
}

impl From<BubbleError> for Step {
    fn from(err: BubbleError) -> Step {
        Step::Fail(err)
    }
}

/// An operation, owned so that it can run again.
#[derive(Debug, Clone)]
pub(crate) enum Op {
    /// A `/v1/threads…` request.
    Http {
        req: RequestId,
        caller: Result<Caller, AuthError>,
        request: OwnedRequest,
    },
    /// A text frame of a `/v1/ws` connection.
    Frame { conn: ConnId, text: String },
}

impl Op {
    pub(crate) fn http(
        req: RequestId,
        caller: Result<Caller, AuthError>,
        request: &HttpRequest<'_>,
    ) -> Op {
        Op::Http {
            req,
            caller,
            request: OwnedRequest::from(request),
        }
    }
}

/// A parked operation.
#[derive(Debug)]
pub(crate) struct Work {
    op: Op,
    answers: Answers,
    /// The cache's use counter when it first parked: what it loaded since
    /// is kept for its re-run.
    pub(crate) since: u64,
}

impl Work {
    /// A parked operation with no answers yet.
    pub(crate) fn new(op: Op, since: u64) -> Work {
        Work {
            op,
            answers: Answers::default(),
            since,
        }
    }
}

/// Who waits for a read.
#[derive(Debug)]
pub(crate) enum Waiter {
    /// A thread load, for these parked operations (and the cache).
    Load {
        thread: ThreadId,
        works: Vec<u64>,
        /// The thread changed while the read was in flight: read it again.
        refresh: bool,
    },
    /// An operation's own read.
    Work { op: u64, query: ReadQuery },
    /// A subscribed thread's record, read to catch a change the broker
    /// did not announce.
    Recheck { thread: ThreadId },
    /// A backlog page of a subscription.
    Replay {
        conn: ConnId,
        thread: ThreadId,
        through: u64,
    },
}

/// An operation whose write is not durable yet.
#[derive(Debug)]
pub(crate) struct Inflight {
    pub(crate) batch: u64,
    pub(crate) thread: ThreadId,
    pub(crate) id: u64,
    pub(crate) op: Op,
}

impl Threads {
    /// Runs an HTTP operation; `Some` when it must wait for that read.
    pub(super) fn run_http(
        &mut self,
        cx: &mut Ctx<'_>,
        op: u64,
        req: RequestId,
        caller: Result<Caller, AuthError>,
        request: &HttpRequest<'_>,
    ) -> Option<ReadQuery> {
        self.wrote = None;
        self.relied_on = None;
        let result = match caller {
            Ok(caller) => self.route(cx, &caller, request),
            Err(err) => Err(Step::Fail(err.into())),
        };
        // An answer authorized by writes that may still be refused (a
        // creation another writer wins, a grant decided on a version that
        // moved) is decided again if they are, like the writes themselves.
        if self.wrote.is_none() {
            self.wrote = self.relied_on.take();
        }
        let response = match result {
            Ok(response) => response,
            Err(Step::Need(query)) => return Some(query),
            Err(Step::Fail(err)) => {
                cx.metrics.count_error(err.code());
                HttpResponse::error(&err)
            }
        };
        let tag = if self.wrote.is_some() {
            Tag::Op(op)
        } else {
            Tag::Plain
        };
        cx.out.push_tagged(Output::Respond { req, response }, tag);
        None
    }

    /// Parks `op` until `need` is answered.
    pub(super) fn park(&mut self, cx: &mut Ctx<'_>, id: u64, op: Op, need: ReadQuery) {
        let work = Work {
            op,
            answers: std::mem::take(&mut self.answers),
            since: self.cache.tick(),
        };
        self.works.insert(id, work);
        self.request(cx, id, need);
    }

    /// An operation finished: remember it while its write is in flight.
    pub(super) fn settle(&mut self, cx: &Ctx<'_>, id: u64, op: impl FnOnce() -> Op) {
        self.answers.clear();
        if let Some(thread) = self.wrote.take() {
            self.inflight.push_back(Inflight {
                batch: cx.out.current_batch(),
                thread,
                id,
                op: op(),
            });
        }
    }

    /// Asks for `need` on behalf of `id`. A thread that is not cached is
    /// loaded for the cache too (one load however many wait for it); a
    /// cached one's record is the operation's own read.
    fn request(&mut self, cx: &mut Ctx<'_>, id: u64, need: ReadQuery) {
        let load = match &need {
            ReadQuery::Thread { thread_id } if !self.cache.knows(thread_id) => Some(thread_id),
            _ => None,
        };
        if let Some(thread_id) = load {
            if let Some(Waiter::Load { works, .. }) = self
                .loading
                .get(thread_id)
                .and_then(|read| self.reads.get_mut(read))
            {
                works.push(id);
                return;
            }
            let thread = thread_id.clone();
            let waiter = Waiter::Load {
                thread: thread.clone(),
                works: vec![id],
                refresh: false,
            };
            let read = self.new_read(cx, need, waiter);
            self.loading.insert(thread, read);
        } else {
            let waiter = Waiter::Work {
                op: id,
                query: need.clone(),
            };
            self.new_read(cx, need, waiter);
        }
    }

    /// What an operation's read of `thread`'s record tells the cache: a
    /// thread no longer cached (its reload failed or it was evicted since
    /// the read was asked) is cached from it, as a load would, and its
    /// subscriptions resume; one cached as absent that exists was created
    /// since by another node (threads are never deleted); a version the
    /// cache does not know is another node's commit not announced yet.
    /// Nothing is decided on the older state from here on.
    fn learn(&mut self, cx: &mut Ctx<'_>, thread: &ThreadId, record: Option<&ThreadRecord>) {
        if !self.cache.knows(thread) {
            if !self.loading.contains_key(thread) {
                self.cache.put(thread.clone(), Slot::read(record));
                self.thread_loaded(cx, thread);
            }
            return;
        }
        let Some(record) = record else {
            return;
        };
        match self.cache.get(thread) {
            None => self.cache.put(thread.clone(), Slot::read(Some(record))),
            Some(state)
                if !state.knows_version(record.version)
                    && record.head_seq >= state.durable().head_seq =>
            {
                self.changed(cx, thread, record.head_seq, record.version);
            }
            Some(_) => {}
        }
    }

    /// Loads `thread` for the cache alone (no operation waits).
    pub(super) fn load_for_cache(&mut self, cx: &mut Ctx<'_>, thread: &ThreadId) {
        match self.loading.get(thread).and_then(|r| self.reads.get_mut(r)) {
            Some(Waiter::Load { refresh, .. }) => *refresh = true,
            _ => {
                let waiter = Waiter::Load {
                    thread: thread.clone(),
                    works: Vec::new(),
                    refresh: false,
                };
                let query = ReadQuery::Thread {
                    thread_id: thread.clone(),
                };
                let read = self.new_read(cx, query, waiter);
                self.loading.insert(thread.clone(), read);
            }
        }
    }

    /// Forgets what parked operations read of `thread`: it changed since,
    /// and a stale record must not be cached again when they run on.
    pub(super) fn forget_answers(&mut self, thread: &ThreadId) {
        let query = ReadQuery::Thread {
            thread_id: thread.clone(),
        };
        for work in self.works.values_mut() {
            work.answers.remove(&query);
        }
    }

    /// Runs a parked operation again.
    pub(super) fn resume(&mut self, cx: &mut Ctx<'_>, id: u64) {
        let Some(mut work) = self.works.remove(&id) else {
            return;
        };
        self.answers = std::mem::take(&mut work.answers);
        let need = match &work.op {
            Op::Http {
                req,
                caller,
                request,
            } => self.run_http(cx, id, *req, caller.clone(), &request.borrow()),
            Op::Frame { conn, text } => {
                if !self.sockets.conns.contains_key(conn) {
                    // The socket is gone: nothing was decided, nobody waits.
                    self.answers.clear();
                    return;
                }
                self.run_frame(cx, *conn, text)
            }
        };
        match need {
            Some(query) => {
                work.answers = std::mem::take(&mut self.answers);
                self.works.insert(id, work);
                self.request(cx, id, query);
            }
            None => {
                let conn = match &work.op {
                    Op::Frame { conn, .. } => Some(*conn),
                    Op::Http { .. } => None,
                };
                self.settle(cx, id, || work.op);
                if let Some(conn) = conn {
                    self.unpark_conn(cx, conn, id);
                }
            }
        }
    }

    /// A read completed.
    pub(crate) fn read_done(
        &mut self,
        cx: &mut Ctx<'_>,
        read: ReadId,
        result: Result<ReadResult, StoreError>,
    ) {
        let Some(waiter) = self.reads.remove(&read) else {
            return;
        };
        match waiter {
            Waiter::Load {
                thread,
                works,
                refresh,
            } => {
                self.loading.remove(&thread);
                if let Ok(ReadResult::Thread(record)) = &result {
                    if self.cache.knows(&thread) {
                        self.learn(cx, &thread, record.as_ref());
                    } else {
                        self.cache.put(thread.clone(), Slot::read(record.as_ref()));
                    }
                }
                let query = ReadQuery::Thread {
                    thread_id: thread.clone(),
                };
                for op in &works {
                    if let Some(work) = self.works.get_mut(op) {
                        work.answers.insert(query.clone(), result.clone());
                    }
                }
                self.thread_loaded(cx, &thread);
                for op in works {
                    self.resume(cx, op);
                }
                if refresh {
                    self.refresh(cx, &thread);
                }
            }
            Waiter::Work { op, query } => {
                if let (ReadQuery::Thread { thread_id }, Ok(ReadResult::Thread(record))) =
                    (&query, &result)
                {
                    self.learn(cx, thread_id, record.as_ref());
                }
                if let Some(work) = self.works.get_mut(&op) {
                    work.answers.insert(query, result);
                    self.resume(cx, op);
                }
            }
            Waiter::Recheck { thread } => {
                if let Ok(ReadResult::Thread(Some(record))) = result {
                    self.rechecked(cx, &thread, record.head_seq, record.version);
                }
            }
            Waiter::Replay {
                conn,
                thread,
                through,
            } => self.replayed(cx, conn, &thread, read, through, result),
        }
    }

    /// Makes `id` cached, from the cache or the answers; `Need` otherwise.
    pub(super) fn load(&mut self, id: &ThreadId) -> Result<(), Step> {
        if self.cache.touch(id).is_some() {
            return Ok(());
        }
        let query = ReadQuery::Thread {
            thread_id: id.clone(),
        };
        if self.loading.contains_key(id) {
            return Err(Step::Need(query));
        }
        match self.answers.get(&query) {
            Some(Ok(ReadResult::Thread(record))) => {
                self.cache.put(id.clone(), Slot::read(record.as_ref()));
                Ok(())
            }
            Some(Err(e)) => Err(Step::Fail(e.to_bubble_error())),
            Some(_) => Err(Step::Fail(BubbleError::Internal)),
            None => Err(Step::Need(query)),
        }
    }

    /// Whether `id`, cached as absent, was created since, which in a
    /// cluster another node may have done without this one having heard
    /// yet: the operation's own read of its record decides (and caches
    /// it). Outside a cluster the cache is the store's word.
    pub(super) fn exists_after_all(&mut self, id: &ThreadId) -> Result<bool, Step> {
        if !self.cluster {
            return Ok(false);
        }
        let Some(record) = self.durable_record(id)?.cloned() else {
            return Ok(false);
        };
        self.cache.put(id.clone(), Slot::read(Some(&record)));
        Ok(true)
    }

    /// The answer to `query`, or `Need` it.
    pub(super) fn answer(&self, query: ReadQuery) -> Result<&ReadResult, Step> {
        match self.answers.get(&query) {
            Some(Ok(result)) => Ok(result),
            Some(Err(e)) => Err(Step::Fail(e.to_bubble_error())),
            None => Err(Step::Need(query)),
        }
    }

    /// Whether `thread` is cached with nothing of ours in flight on it and
    /// no announced change waiting for that: only then does a read of its
    /// record replace what the cache holds at once. Otherwise the cache
    /// decides until the writes settle (a newer record would be
    /// [`Threads::changed`]'s to apply once they have, as an announced
    /// change is).
    pub(super) fn settled(&self, thread: &ThreadId) -> bool {
        self.cache
            .get(thread)
            .is_some_and(|s| !s.in_flight() && !s.stale)
            && !self.building.iter().any(|g| &g.thread_id == thread)
    }

    /// `thread`'s durable head and version as the store holds them now
    /// (`None`: it does not exist), read once per operation: what another
    /// node of a cluster committed and this one was not told of yet.
    pub(super) fn durable_now(&self, thread: &ThreadId) -> Result<Option<Version>, Step> {
        Ok(self.durable_record(thread)?.map(ThreadRecord::at))
    }

    /// `thread`'s record as the operation's own read of the store found
    /// it (`None`: it does not exist); `Need` that read otherwise.
    fn durable_record(&self, thread: &ThreadId) -> Result<Option<&ThreadRecord>, Step> {
        let query = ReadQuery::Thread {
            thread_id: thread.clone(),
        };
        match self.answer(query)? {
            ReadResult::Thread(record) => Ok(record.as_ref()),
            _ => Err(Step::Fail(BubbleError::Internal)),
        }
    }

    /// The oldest parked operation's start: cache entries used since are kept.
    pub(super) fn oldest_work(&self) -> u64 {
        self.works
            .values()
            .map(|w| w.since)
            .min()
            .unwrap_or(u64::MAX)
    }
}
