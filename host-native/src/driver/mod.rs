//! The engine task: one task owns the [`Engine`] and drives it.
//!
//! Everything that happens (a socket opened, a frame, an HTTP request, a
//! timer) arrives as a [`Command`] on one bounded inbox; batches made
//! durable and reads completed arrive on their own channels. Where the
//! engine shares its thread with the sockets, an HTTP request's own task
//! hands it the command directly instead ([`here`]). After each
//! input the task drains every output and dispatches it: frames to the
//! socket's bounded queue, responses to the waiting HTTP handler, batches to
//! the persistence worker, reads to the reader pool. It never blocks on a
//! peer or on the store.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bubble_core::cluster::{ClaimOutcome, ClusterMessage, NodeState};
use bubble_core::edge::{AcceptedHandshake, ChannelsUpgrade};
use bubble_core::http::{HttpRequest, HttpResponse, Method};
use bubble_core::store::{Backend, MemoryStore};
use bubble_core::{
    ClaimId, Config, ConnId, Engine, Input, Millis, MonotonicNow, Output, RequestId, WsFrame,
};
use bytes::Bytes;
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Utf8Bytes;

pub(crate) mod conn;
pub(crate) mod table;
mod uring;
mod writers;

use crate::config::WebhookSettings;
use crate::jwks::{JwksSource, KeyFetcher};
use crate::webhooks::Webhooks;

use crate::cluster::{Broker, ClusterSettings, Health};
use crate::persist::{Outcome, Persister, Stats};
use crate::reads::{ReadDone, ReaderPool};
use conn::{ConnHandle, Due, OutMsg, QueueError};
use table::{ConnIds, Table};
use writers::Writers;

/// Capacity of the engine's inbox; senders wait when it is full.
pub(crate) const INBOX_CAPACITY: usize = 4096;

/// Commands taken per wake-up before re-checking timers and persistence.
const COMMANDS_PER_TURN: usize = 256;

/// A client frame, owned.
#[derive(Debug)]
pub(crate) enum InFrame {
    /// A text frame.
    Text(Utf8Bytes),
    /// A binary frame.
    Binary(Bytes),
}

/// An HTTP request for an engine route, owned.
#[derive(Debug)]
pub(crate) struct OwnedRequest {
    pub(crate) method: Method,
    pub(crate) path: String,
    pub(crate) query: String,
    pub(crate) authorization: Option<String>,
    pub(crate) idempotency_key: Option<String>,
    pub(crate) body: Bytes,
}

/// Where the answer to an HTTP request goes.
pub(crate) type Reply = oneshot::Sender<HttpResponse>;

/// Something for the engine task to do.
#[derive(Debug)]
pub(crate) enum Command {
    /// A `/v1/ws` socket was upgraded.
    OpenThreads {
        conn: ConnId,
        token: Option<String>,
        handle: ConnHandle,
    },
    /// A `/socket` was upgraded after its handshake was accepted.
    OpenChannels {
        conn: ConnId,
        handshake: AcceptedHandshake,
        handle: ConnHandle,
    },
    /// A data frame arrived.
    Frame { conn: ConnId, frame: InFrame },
    /// A Pong arrived.
    Pong { conn: ConnId },
    /// The socket's writer wrote everything up to a `WantDrained`.
    Drained { conn: ConnId },
    /// The socket is gone.
    Closed { conn: ConnId },
    /// An HTTP request; the response goes to `reply`.
    Http { request: OwnedRequest, reply: Reply },
    /// Decide a `/socket` upgrade.
    Handshake {
        request: ChannelsUpgrade,
        reply: oneshot::Sender<Result<AcceptedHandshake, HttpResponse>>,
    },
    /// Another node's message, from the broker.
    Remote {
        node: String,
        message: ClusterMessage,
    },
    /// The other nodes' channel state, from the broker.
    ClusterState { nodes: Vec<NodeState> },
    /// A publication key's claim settled.
    Claimed {
        claim: ClaimId,
        outcome: ClaimOutcome,
    },
    /// Check what the broker may have lost: read subscribed threads again
    /// and reconcile presence.
    ClusterCheck,
    /// The key set the engine asked for.
    KeysLoaded { keys: bubble_core::auth::KeySet },
    /// The key set the engine asked for could not be had.
    KeysFailed,
    /// Render the metrics.
    Metrics { reply: oneshot::Sender<String> },
    /// Answer when the engine task is responsive.
    Ready { reply: oneshot::Sender<()> },
    /// Close every socket the way its protocol asks clients to come back
    /// (the engine decides: 1001, or Pusher's 4200) and refuse new ones.
    Shutdown,
    /// Stop the task.
    Stop,
}

/// The running engine task and persistence worker.
pub(crate) struct Running {
    /// The engine's inbox.
    pub(crate) inbox: mpsc::Sender<Command>,
    /// The engine task; it ends after [`Command::Stop`].
    pub(crate) engine: EngineJoin,
    /// The persistence worker; it ends once the engine thread ended and
    /// every batch handed to it is committed.
    pub(crate) worker: Option<std::thread::JoinHandle<()>>,
}

/// The wall clock as the engine's `Millis`.
fn wall_clock() -> Millis {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or(Duration::ZERO);
    Millis(u64::try_from(since.as_millis()).unwrap_or(u64::MAX))
}

/// The engine task's state.
struct Driver {
    engine: Engine,
    /// Open sockets; looked up for every frame, so indexed by their ids.
    conns: Table,
    /// Requests waiting for their answer, by the ids this task gave them.
    pending: HashMap<RequestId, Reply, foldhash::fast::RandomState>,
    next_req: u64,
    persister: Persister,
    stats: Arc<Stats>,
    shutting_down: bool,
    clock: MonotonicNow,
    /// Sockets closed while dispatching, to report as `Closed`.
    closing: Vec<ConnId>,
    /// Outcomes of batches applied inline, to report in order.
    settled: Vec<Outcome>,
    /// Where reads go.
    reads: Reads,
    /// Reads answered inline, to report as `ReadDone`.
    answered: Vec<ReadDone>,
    /// Sockets with frames queued since they were last written: at the
    /// end of the turn, or at `write_at`.
    due: Vec<ConnId>,
    /// Where a fan-out's frame is encoded before it is shared (kept for reuse).
    encoded: Vec<u8>,
    /// The link to the other nodes, in cluster mode.
    broker: Option<Broker>,
    /// Pusher webhook delivery.
    webhooks: Webhooks,
    /// JWKS fetches.
    keys: KeyFetcher,
    /// Claims no broker could take, to report as unavailable.
    unclaimed: Vec<ClaimId>,
    /// The threads that write the due sockets; `None`: the engine's
    /// thread writes them itself.
    writers: Option<Writers>,
    /// The deadline the engine task's timer is set for.
    armed: Option<Millis>,
    /// How long queued frames wait before their sockets are written.
    write_delay: Duration,
    /// With a write delay, when the due sockets are written.
    write_at: Option<Instant>,
}

/// Where the engine's reads are answered.
enum Reads {
    /// On the engine's thread, as they are asked (the memory store).
    Inline(MemoryStore),
    /// By the reader threads.
    Pool(ReaderPool),
}

/// Where the engine runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Home {
    /// On its own thread (the sockets use the other cores).
    Thread,
    /// As a task of the current thread's `LocalSet`: with one core, the
    /// engine and the sockets share a thread and hand work over without
    /// thread switches.
    Local,
}

/// The engine task's end, awaited at shutdown.
pub(crate) enum EngineJoin {
    /// The engine thread.
    Thread(std::thread::JoinHandle<()>),
    /// The local task.
    Local(tokio::task::JoinHandle<()>),
}

impl EngineJoin {
    /// Waits for the engine task to end.
    pub(crate) async fn join(self) {
        match self {
            EngineJoin::Thread(thread) => {
                let _ = tokio::task::spawn_blocking(move || thread.join()).await;
            }
            EngineJoin::Local(task) => {
                let _ = task.await;
            }
        }
    }
}

/// What the engine reaches beyond its store and sockets.
pub(crate) struct Services<'a> {
    /// The other nodes, in cluster mode, and the broker's health.
    pub(crate) cluster: Option<(&'a ClusterSettings, Arc<Health>)>,
    /// Where the JWKS driver's keys come from.
    pub(crate) jwks: Option<JwksSource>,
    /// How Pusher webhooks are delivered.
    pub(crate) webhooks: &'a WebhookSettings,
}

/// How the sockets a turn queued frames to are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Writing {
    /// Writer threads; 0: the engine's own thread writes.
    pub(crate) io_threads: usize,
    /// With no writer threads, submit a turn's sends as one `io_uring`
    /// batch when the kernel offers it.
    pub(crate) io_uring: bool,
    /// How long the frames queued to sockets wait before they are written
    /// (zero: at the end of the turn that queued them). Every socket
    /// queued to meanwhile is written at once when it passes, one send
    /// each, whatever it got.
    pub(crate) delay: Duration,
}

/// Starts the engine at `home` and, unless the store is answered inline
/// (memory), the persistence worker and the reader threads.
pub(crate) fn spawn(
    home: Home,
    ids: Arc<ConnIds>,
    writing: Writing,
    config: Config,
    store: crate::store::EngineStore,
    stats: Arc<Stats>,
    services: Services<'_>,
) -> std::io::Result<Running> {
    let Services {
        cluster,
        jwks,
        webhooks,
    } = services;
    let seed = getrandom::u64().map_err(std::io::Error::other)?;
    let (inbox_tx, inbox) = mpsc::channel(INBOX_CAPACITY);
    let broker = match cluster {
        Some((settings, health)) => {
            Some(Broker::start(settings, inbox_tx.clone(), health).map_err(std::io::Error::other)?)
        }
        None => None,
    };
    let (done_tx, done_rx) = mpsc::unbounded_channel();
    let (read_tx, read_rx) = mpsc::unbounded_channel();
    let (persister, worker, reads) = match store.inline_reads {
        Some(memory) => (Persister::Inline(store.writer), None, Reads::Inline(memory)),
        None => {
            let (persister, thread) = Persister::worker(store.writer, done_tx, stats.clone())?;
            let pool = ReaderPool::start(store.readers, read_tx)?;
            (persister, Some(thread), Reads::Pool(pool))
        }
    };
    let channels = Channels {
        inbox,
        done: done_rx,
        reads: read_rx,
    };
    let webhooks = Webhooks::new(tokio::runtime::Handle::current(), webhooks)
        .map_err(std::io::Error::other)?;
    let keys = KeyFetcher::new(jwks, tokio::runtime::Handle::current(), inbox_tx.clone());
    let build = move || {
        let engine = Engine::new(config, seed);
        let writers = match writing.io_threads {
            0 => None,
            n => Some(Writers::start(n)?),
        };
        // The engine's own thread writes the sockets: through a ring if
        // the kernel offers one (and it is not turned off).
        let ring = match (&writers, writing.io_uring) {
            (None, true) => match uring::Ring::new() {
                Ok(ring) => {
                    tracing::info!("the engine writes sockets through io_uring");
                    Some(ring)
                }
                Err(error) => {
                    tracing::info!(%error, "io_uring unavailable: the engine writes sockets with send");
                    None
                }
            },
            _ => None,
        };
        let outside = Outside {
            broker,
            webhooks,
            keys,
        };
        let driver = Driver::new(
            engine,
            Table::new(ids, ring),
            persister,
            reads,
            stats,
            outside,
            writers,
            writing.delay,
        );
        Ok::<_, std::io::Error>(driver)
    };
    let engine = match home {
        Home::Local => EngineJoin::Local(tokio::task::spawn_local(guarded(run_here(
            build()?,
            channels,
        )))),
        Home::Thread => {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_time()
                .build()?;
            let (started_tx, started_rx) = std::sync::mpsc::channel();
            let thread = std::thread::Builder::new()
                .name("bubble-engine".into())
                .spawn(move || match build() {
                    Ok(driver) => {
                        let _ = started_tx.send(Ok(()));
                        runtime.block_on(guarded(Driver::run(
                            &RefCell::new(driver),
                            channels,
                            None,
                        )));
                    }
                    Err(e) => {
                        let _ = started_tx.send(Err(e));
                    }
                })?;
            started_rx
                .recv()
                .map_err(|_| std::io::Error::other("the engine thread died at start-up"))??;
            EngineJoin::Thread(thread)
        }
    };
    Ok(Running {
        inbox: inbox_tx,
        engine,
        worker,
    })
}

/// The engine that runs on this thread beside the sockets, for [`here`].
struct LocalEngine {
    driver: Rc<RefCell<Driver>>,
    /// Wakes the engine task to write the sockets a request fed here
    /// queued frames to.
    written: Rc<Notify>,
}

thread_local! {
    /// Set while the engine runs on this thread (see [`Home::Local`]).
    static LOCAL: RefCell<Option<LocalEngine>> = const { RefCell::new(None) };
}

/// Runs the engine task on this thread and lets the tasks beside it hand
/// it work directly ([`here`]) while it runs.
async fn run_here(driver: Driver, channels: Channels) {
    let driver = Rc::new(RefCell::new(driver));
    let written = Rc::new(Notify::new());
    LOCAL.with(|slot| {
        *slot.borrow_mut() = Some(LocalEngine {
            driver: driver.clone(),
            written: written.clone(),
        });
    });
    Driver::run(&driver, channels, Some(&written)).await;
    LOCAL.with(|slot| *slot.borrow_mut() = None);
}

/// Carries out an HTTP request at once when the engine runs on this thread
/// and is waiting (between two of its turns); gives the request and its
/// reply back, for the inbox, when it cannot. A request handled so costs no
/// hand-over to the engine task and back: with a memory store its answer is
/// ready when this returns. The frames it queued are written by the engine
/// task, woken for that, once the requests that arrived with this one were
/// fed too: under load, each socket's send then carries several
/// publications; it is woken as well when the engine's next deadline is no
/// longer the one its timer is set for. Kept out of line, so that profiles
/// (`scripts/bench-callgrind.sh`) tell the engine's work from the request's.
#[inline(never)]
pub(crate) fn here(request: OwnedRequest, reply: Reply) -> Option<(OwnedRequest, Reply)> {
    LOCAL.with(|slot| {
        let slot = slot.borrow();
        let Some(local) = slot.as_ref() else {
            return Some((request, reply));
        };
        let Ok(mut driver) = local.driver.try_borrow_mut() else {
            return Some((request, reply));
        };
        driver.http(request, reply);
        if (!driver.due.is_empty() && driver.write_at.is_none())
            || driver.engine.poll_timeout() != driver.armed
        {
            local.written.notify_one();
        }
        None
    })
}

/// Waits for `written`, or forever when there is none (the engine has its
/// own thread and nothing is fed to it directly).
async fn notified(written: Option<&Notify>) {
    match written {
        Some(written) => written.notified().await,
        None => std::future::pending().await,
    }
}

/// Runs the engine task; a panic in it ends the process (status 1) rather
/// than leave a server that accepts requests nobody will answer. Nothing
/// unacknowledged was acknowledged, and the next start reloads the store.
async fn guarded(task: impl std::future::Future<Output = ()>) {
    use futures_util::FutureExt as _;
    if std::panic::AssertUnwindSafe(task)
        .catch_unwind()
        .await
        .is_err()
    {
        tracing::error!("the engine task panicked: exiting");
        std::process::exit(1);
    }
}

/// What the engine task listens to.
struct Channels {
    inbox: mpsc::Receiver<Command>,
    done: mpsc::UnboundedReceiver<Outcome>,
    reads: mpsc::UnboundedReceiver<ReadDone>,
}

/// What the engine task reaches outside the process, besides the store.
struct Outside {
    broker: Option<Broker>,
    webhooks: Webhooks,
    keys: KeyFetcher,
}

impl Driver {
    #[allow(clippy::too_many_arguments)]
    fn new(
        engine: Engine,
        conns: Table,
        persister: Persister,
        reads: Reads,
        stats: Arc<Stats>,
        outside: Outside,
        writers: Option<Writers>,
        write_delay: Duration,
    ) -> Driver {
        let Outside {
            broker,
            webhooks,
            keys,
        } = outside;
        Driver {
            engine,
            conns,
            pending: HashMap::default(),
            next_req: 0,
            persister,
            stats,
            shutting_down: false,
            clock: MonotonicNow::new(),
            closing: Vec::new(),
            settled: Vec::new(),
            reads,
            answered: Vec::new(),
            due: Vec::new(),
            encoded: Vec::new(),
            broker,
            webhooks,
            keys,
            unclaimed: Vec::new(),
            writers,
            armed: None,
            write_delay,
            write_at: None,
        }
    }

    fn now(&mut self) -> Millis {
        self.clock.now(wall_clock())
    }

    /// Runs the engine task until [`Command::Stop`] or until every sender
    /// of its inbox is gone. The driver is borrowed only between awaits,
    /// so that a request handled on this thread (see [`here`]) finds it
    /// free whenever this task waits; `written`, when requests are fed so,
    /// wakes the task to write the sockets they queued frames to.
    async fn run(this: &RefCell<Driver>, mut channels: Channels, written: Option<&Notify>) {
        let mut commands = Vec::with_capacity(COMMANDS_PER_TURN);
        let mut outcomes = Vec::new();
        let mut completions = Vec::new();
        // A memory store settles batches and reads inline: its channels are
        // closed from the start and must not be polled.
        let (mut done_open, mut reads_open) = (true, true);
        // One timer for the engine's next deadline, moved only when the
        // deadline moves: a timer set anew every turn wakes the runtime's
        // driver (a write to its eventfd and one more `epoll_wait`) each time.
        let timer = tokio::time::sleep_until(Instant::now());
        tokio::pin!(timer);
        // With a write delay: when the sockets queued to are written
        // (moved only when that moves, like `timer`).
        let write_timer = tokio::time::sleep_until(Instant::now());
        tokio::pin!(write_timer);
        loop {
            let (due, armed, write_at) = {
                let driver = this.borrow();
                (driver.engine.poll_timeout(), driver.armed, driver.write_at)
            };
            if let Some(at) = write_at.filter(|at| *at != write_timer.deadline()) {
                write_timer.as_mut().reset(at);
            }
            if due != armed {
                if let Some(at) = due {
                    let wait = at.0.saturating_sub(wall_clock().0);
                    timer
                        .as_mut()
                        .reset(Instant::now() + Duration::from_millis(wait));
                }
                this.borrow_mut().armed = due;
            }
            let go_on = tokio::select! {
                biased;
                // First, so that a busy inbox cannot hold the writes back.
                () = &mut write_timer, if write_at.is_some() => {
                    this.borrow_mut().flush_sockets();
                    continue;
                }
                n = channels.done.recv_many(&mut outcomes, COMMANDS_PER_TURN), if done_open => {
                    done_open = n > 0;
                    this.borrow_mut().settle(std::mem::take(&mut outcomes));
                    true
                }
                n = channels.reads.recv_many(&mut completions, COMMANDS_PER_TURN), if reads_open => {
                    reads_open = n > 0;
                    let mut driver = this.borrow_mut();
                    for (read, result) in completions.drain(..) {
                        driver.input(Input::ReadDone { read, result });
                    }
                    true
                }
                n = channels.inbox.recv_many(&mut commands, COMMANDS_PER_TURN) => {
                    if n == 0 {
                        break;
                    }
                    this.borrow_mut().commands(&mut commands)
                }
                () = &mut timer, if due.is_some() => {
                    let mut driver = this.borrow_mut();
                    driver.armed = None;
                    driver.input(Input::Tick);
                    true
                }
                // Requests fed on this thread queued frames (or moved the
                // deadline): the tasks woken with theirs have run (this task
                // was queued behind them), so the sockets are written at once
                // (with a write delay: when it passes).
                () = notified(written) => {
                    this.borrow_mut().write_or_defer();
                    continue;
                }
            };
            let go_on = if go_on && this.borrow().writes_now() {
                // Before writing the turn's sockets, the rest of the runtime
                // runs once: the turn's HTTP answers go out (a publisher can
                // send its next request while the fan-out is written) and
                // whatever arrived meanwhile joins this turn, so that under
                // load each socket's send carries more frames.
                tokio::task::yield_now().await;
                this.borrow_mut().take_ready(&mut channels, &mut commands)
            } else {
                go_on
            };
            if !go_on {
                this.borrow_mut().flush_sockets();
                break;
            }
            this.borrow_mut().write_or_defer();
        }
        this.borrow_mut().finish();
    }

    /// Handles, without waiting, what the channels already hold (at most a
    /// turn's worth of commands); false means stop.
    fn take_ready(&mut self, channels: &mut Channels, commands: &mut Vec<Command>) -> bool {
        let mut outcomes = Vec::new();
        while let Ok(outcome) = channels.done.try_recv() {
            outcomes.push(outcome);
        }
        if !outcomes.is_empty() {
            self.settle(outcomes);
        }
        while let Ok((read, result)) = channels.reads.try_recv() {
            self.input(Input::ReadDone { read, result });
        }
        while commands.len() < COMMANDS_PER_TURN {
            let Ok(command) = channels.inbox.try_recv() else {
                break;
            };
            commands.push(command);
        }
        self.commands(commands)
    }

    /// Handles `commands` in order, emptying it; false means stop (the
    /// commands after the stop are dropped with the task).
    fn commands(&mut self, commands: &mut Vec<Command>) -> bool {
        commands.drain(..).all(|command| self.command(command))
    }

    /// Reports batch outcomes in order, runs of durable batches as one.
    fn settle(&mut self, outcomes: Vec<Outcome>) {
        let mut durable = None;
        for outcome in outcomes {
            match outcome {
                Outcome::Persisted(batch) => durable = Some(batch),
                Outcome::Failed(batch, conflicts) => {
                    if let Some(batch) = durable.take() {
                        self.input(Input::Persisted { batch });
                    }
                    self.input(Input::PersistFailed { batch, conflicts });
                }
            }
        }
        if let Some(batch) = durable {
            self.input(Input::Persisted { batch });
        }
    }

    fn finish(&mut self) {
        for conn in self.conns.ids() {
            if let Some(handle) = self.conns.remove(conn) {
                handle.close(1001);
            }
        }
        tracing::debug!("engine task stopped");
    }

    /// Feeds an HTTP request to the engine; its answer goes to `reply`.
    fn http(&mut self, request: OwnedRequest, reply: Reply) {
        self.next_req += 1;
        let req = RequestId(self.next_req);
        self.pending.insert(req, reply);
        let request = HttpRequest {
            method: request.method,
            path: &request.path,
            query: &request.query,
            authorization: request.authorization.as_deref(),
            idempotency_key: request.idempotency_key.as_deref(),
            body: &request.body,
        };
        self.input(Input::Http { req, request });
    }

    /// Handles one command; false means stop.
    fn command(&mut self, command: Command) -> bool {
        match command {
            Command::OpenThreads {
                conn,
                token,
                handle,
            } => {
                if self.admit(conn, handle) {
                    self.input(Input::OpenThreads {
                        conn,
                        token: token.as_deref(),
                    });
                }
            }
            Command::OpenChannels {
                conn,
                handshake,
                handle,
            } => {
                if self.admit(conn, handle) {
                    self.input(Input::OpenChannels {
                        conn,
                        handshake: &handshake,
                    });
                }
            }
            Command::Frame { conn, frame } if self.conns.contains(conn) => {
                let frame = match &frame {
                    InFrame::Text(text) => WsFrame::Text(text.as_str()),
                    InFrame::Binary(bytes) => WsFrame::Binary(bytes),
                };
                self.input(Input::Frame { conn, frame });
            }
            Command::Pong { conn } if self.conns.contains(conn) => {
                self.input(Input::Pong { conn });
            }
            Command::Drained { conn } if self.conns.contains(conn) => {
                self.input(Input::Drained { conn });
            }
            Command::Closed { conn } => {
                if self.conns.remove(conn).is_some() {
                    self.input(Input::Closed { conn });
                }
            }
            // Frames of sockets the engine already closed are dropped.
            Command::Frame { .. } | Command::Pong { .. } | Command::Drained { .. } => {}
            Command::Http { request, reply } => self.http(request, reply),
            Command::Handshake { request, reply } => {
                let _ = reply.send(self.engine.channel_handshake(&request));
            }
            Command::Remote { node, message } => self.input(Input::Remote {
                node: &node,
                message,
            }),
            Command::ClusterState { nodes } => self.input(Input::ClusterState { nodes }),
            Command::Claimed { claim, outcome } => self.input(Input::Claimed { claim, outcome }),
            Command::ClusterCheck => {
                if self.broker.is_some() {
                    let now = self.now();
                    let state = self.engine.local_state(now);
                    if let Some(broker) = &self.broker {
                        broker.reconcile(state);
                    }
                }
                self.input(Input::Recheck);
            }
            Command::KeysLoaded { keys } => self.input(Input::KeysLoaded { keys }),
            Command::KeysFailed => self.input(Input::KeysFailed),
            Command::Metrics { reply } => {
                let mut text = self.engine.metrics().render_prometheus();
                self.stats
                    .render(&mut text, self.conns.len(), self.pending.len());
                self.webhooks.render(&mut text);
                let _ = reply.send(text);
            }
            Command::Ready { reply } => {
                let _ = reply.send(());
            }
            Command::Shutdown => {
                self.shutting_down = true;
                self.input(Input::Shutdown);
                // Whatever the engine did not close (it closes every socket).
                for conn in self.conns.ids() {
                    if let Some(handle) = self.conns.remove(conn) {
                        handle.close(1001);
                        self.input(Input::Closed { conn });
                    }
                }
            }
            Command::Stop => return false,
        }
        true
    }

    /// Registers a new socket, or closes it at once while shutting down.
    fn admit(&mut self, conn: ConnId, handle: ConnHandle) -> bool {
        if self.shutting_down {
            handle.close(1001);
            self.conns.forget(conn);
            return false;
        }
        self.conns.insert(conn, handle);
        true
    }

    /// Feeds one input, then dispatches every output it released.
    fn input(&mut self, input: Input<'_>) {
        self.feed(input);
        self.dispatch_all();
    }

    fn dispatch_all(&mut self) {
        loop {
            while let Some(out) = self.engine.poll_output() {
                self.dispatch(out);
            }
            if !self.settled.is_empty() {
                let outcomes = std::mem::take(&mut self.settled);
                for outcome in outcomes {
                    let input = match outcome {
                        Outcome::Persisted(batch) => Input::Persisted { batch },
                        Outcome::Failed(batch, conflicts) => {
                            Input::PersistFailed { batch, conflicts }
                        }
                    };
                    self.feed(input);
                }
                continue;
            }
            if !self.unclaimed.is_empty() {
                for claim in std::mem::take(&mut self.unclaimed) {
                    let outcome = ClaimOutcome::Unavailable;
                    self.feed(Input::Claimed { claim, outcome });
                }
                continue;
            }
            if !self.answered.is_empty() {
                for (read, result) in std::mem::take(&mut self.answered) {
                    self.feed(Input::ReadDone { read, result });
                }
                continue;
            }
            let Some(conn) = self.closing.pop() else {
                break;
            };
            self.feed(Input::Closed { conn });
        }
    }

    /// Feeds one input without dispatching its outputs.
    fn feed(&mut self, input: Input<'_>) {
        let now = self.now();
        if let Err(misuse) = self.engine.handle(now, input) {
            tracing::error!(%misuse, "engine refused an input");
        }
    }

    fn dispatch(&mut self, out: Output) {
        match out {
            Output::Send { conn, frame } => self.queue(conn, OutMsg::Frame(&frame)),
            Output::SendAll { conns, frame } => self.queue_all(&conns, &frame),
            Output::Ping { conn } => self.queue(conn, OutMsg::Ping),
            Output::WantDrained { conn } => self.queue(conn, OutMsg::WantDrained),
            Output::Close { conn, reason } => {
                if let Some(handle) = self.conns.remove(conn) {
                    // No code: drop the connection without a close frame.
                    handle.close(reason.code().unwrap_or(1006));
                    self.closing.push(conn);
                }
            }
            Output::Respond { req, response } => {
                if let Some(reply) = self.pending.remove(&req) {
                    // The client may have gone; nothing to do then.
                    let _ = reply.send(response);
                }
            }
            Output::Persist { batch, writes } => {
                if let Some(outcome) = self.persister.persist(batch, writes) {
                    self.settled.push(outcome);
                }
            }
            Output::Broadcast { message } => {
                if let Some(broker) = &self.broker {
                    broker.announce(message);
                }
            }
            Output::Claim {
                claim,
                app_id,
                key,
                value,
                ttl_ms,
            } => match &self.broker {
                Some(broker) => broker.claim(claim, app_id, key, value, ttl_ms),
                None => self.unclaimed.push(claim),
            },
            Output::Webhook {
                url,
                key,
                signature,
                body,
            } => self.webhooks.send(url, key, signature, body),
            Output::FetchKeys => self.keys.fetch(),
            Output::Read { read, query } => match &self.reads {
                Reads::Inline(store) => self.answered.push((read, store.read(&query))),
                Reads::Pool(pool) => pool.submit(read, query),
            },
        }
    }

    /// Whether the sockets queued to will be written at the end of this
    /// turn: some were, and no write delay holds them.
    fn writes_now(&self) -> bool {
        !self.due.is_empty() && self.write_delay.is_zero()
    }

    /// Writes the sockets queued to, or, with a write delay, sets when
    /// they will be written if that is not set yet.
    fn write_or_defer(&mut self) {
        if self.write_delay.is_zero() {
            self.flush_sockets();
        } else if self.write_at.is_none() && !self.due.is_empty() {
            self.write_at = Some(Instant::now() + self.write_delay);
        }
    }

    /// Writes every socket queued to since the last write, or hands them
    /// to the writer threads: one `send` each (one submission for all of
    /// them with a ring), however many frames were queued for it.
    fn flush_sockets(&mut self) {
        self.write_at = None;
        match &mut self.writers {
            Some(writers) => {
                for conn in self.due.drain(..) {
                    if let Some(handle) = self.conns.get(conn) {
                        writers.stage(conn, handle);
                    }
                }
                writers.submit();
            }
            None => {
                self.conns.flush(&self.due);
                self.due.clear();
            }
        }
    }

    /// Queues one frame to each of `conns`, its WebSocket framing encoded
    /// once and shared by every recipient (see [`conn`]).
    fn queue_all(&mut self, conns: &[ConnId], frame: &str) {
        self.encoded.clear();
        crate::ws::frame::encode_text(&mut self.encoded, frame.as_bytes());
        let encoded: Arc<[u8]> = Arc::from(self.encoded.as_slice());
        if self.encoded.capacity() > crate::ws::frame::KEEP_BUFFER {
            self.encoded = Vec::new();
        }
        for (i, &conn) in conns.iter().enumerate() {
            self.conns.prefetch_ahead(conns, i);
            self.queue(conn, OutMsg::Shared(&encoded));
        }
    }

    fn queue(&mut self, conn: ConnId, msg: OutMsg<'_>) {
        let Some(handle) = self.conns.get(conn) else {
            return;
        };
        match handle.push(msg) {
            Ok(Due::Flush) => self.due.push(conn),
            Ok(Due::Nothing) => {}
            Err(QueueError::Full(slow)) => {
                // A slow consumer: close it rather than let its queue grow.
                let code = slow.close_code();
                tracing::info!(conn = conn.0, code, "slow consumer: closing");
                handle.kill(code);
                self.stats.slow_consumer();
                self.conns.remove(conn);
                self.closing.push(conn);
            }
            // The socket's task ended; its `Closed` command is on the way.
            Err(QueueError::Gone) => {}
        }
    }
}
