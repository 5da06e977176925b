//! The engine: inputs in, outputs out, time as an argument. Dispatches to the
//! threads and channels state machines; decides nothing itself.

use std::collections::HashMap;
use std::sync::Arc;

use crate::auth::Authenticator;
use crate::channels::Channels;
use crate::config::{Config, Limits};
use crate::edge::{AcceptedHandshake, Api, ChannelsUpgrade};
use crate::heartbeat::{Beat, Heartbeats};
use crate::http::{HttpRequest, HttpResponse};
use crate::idgen::IdGen;
use crate::ids::{BatchId, ConnId, Millis, RequestId};
use crate::metrics::Metrics;
use crate::outbox::Outbox;
use crate::store::{EventStore, Snapshot, Write};
use crate::threads::Threads;

/// A serialized frame, built once and shared by every recipient.
pub type SharedFrame = Arc<str>;

/// A WebSocket data frame from a client.
#[derive(Debug, Clone, Copy)]
pub enum WsFrame<'a> {
    /// A text frame.
    Text(&'a str),
    /// A binary frame (not part of either protocol).
    Binary(&'a [u8]),
}

/// Which acknowledgement a pubb socket asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelProtocol {
    /// `protocol=2`: `pubb:subscription_succeeded`.
    V2,
    /// No `protocol=2`: the legacy `pubb_internal:subscription_succeeded`.
    Legacy,
}

/// Something that happened, reported by the host.
#[derive(Debug, Clone, Copy)]
pub enum Input<'a> {
    /// A `/v1/ws` socket was upgraded; `token` is the bearer from the
    /// `Authorization` header or `?access_token=` (None when absent).
    OpenThreads {
        /// The host's handle for the socket.
        conn: ConnId,
        /// The bearer token, if any.
        token: Option<&'a str>,
    },
    /// A `/socket` was upgraded after [`Engine::channel_handshake`] accepted it.
    OpenChannels {
        /// The host's handle for the socket.
        conn: ConnId,
        /// The handshake the engine accepted (app and acknowledgement mode).
        handshake: &'a AcceptedHandshake,
    },
    /// A data frame arrived.
    Frame {
        /// The socket.
        conn: ConnId,
        /// The frame.
        frame: WsFrame<'a>,
    },
    /// A WebSocket Pong arrived.
    Pong {
        /// The socket.
        conn: ConnId,
    },
    /// Everything sent to `conn` so far has been written; backlog may go on
    /// (the answer to [`Output::WantDrained`]).
    Drained {
        /// The socket.
        conn: ConnId,
    },
    /// The socket is gone (closed by either side or by the host).
    Closed {
        /// The socket.
        conn: ConnId,
    },
    /// An HTTP request the edge routed to the engine ([`crate::edge::Endpoint::Engine`]).
    Http {
        /// The host's handle, echoed in [`Output::Respond`].
        req: RequestId,
        /// The request.
        request: HttpRequest<'a>,
    },
    /// Every batch up to and including `batch` is durable.
    Persisted {
        /// The batch.
        batch: BatchId,
    },
    /// A deadline from [`Engine::poll_timeout`] passed (early ticks are harmless).
    Tick,
}

/// Something the host must do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// Send a text frame.
    Send {
        /// The socket.
        conn: ConnId,
        /// The frame.
        frame: SharedFrame,
    },
    /// Send a WebSocket Ping.
    Ping {
        /// The socket.
        conn: ConnId,
    },
    /// Close the socket with `code` (1006: drop it without a close frame).
    /// The host reports [`Input::Closed`] afterwards.
    Close {
        /// The socket.
        conn: ConnId,
        /// The WebSocket close code.
        code: u16,
    },
    /// Answer an HTTP request.
    Respond {
        /// The request.
        req: RequestId,
        /// The response.
        response: HttpResponse,
    },
    /// Make `writes` durable (atomically), then report [`Input::Persisted`].
    /// Batches must be reported in order.
    Persist {
        /// The batch.
        batch: BatchId,
        /// The writes.
        writes: Vec<Write>,
    },
    /// Report [`Input::Drained`] for `conn` once what was sent to it so far
    /// has been written (flow control for backlog replay).
    WantDrained {
        /// The socket.
        conn: ConnId,
    },
}

/// The host broke the driving contract (never a peer's fault).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Misuse {
    /// An input named a connection that is not open.
    #[error("unknown connection {0:?}")]
    UnknownConn(ConnId),
    /// An open input reused a connection id that is still open.
    #[error("connection {0:?} is already open")]
    ConnInUse(ConnId),
    /// `Persisted` named a batch that was never issued.
    #[error("batch {0:?} was never issued")]
    UnknownBatch(BatchId),
    /// The start-up snapshot is inconsistent.
    #[error("invalid snapshot: {0}")]
    InvalidSnapshot(String),
}

/// Shared services handed to the state machines for one input.
pub(crate) struct Ctx<'a> {
    pub(crate) now: Millis,
    pub(crate) out: &'a mut Outbox,
    pub(crate) ids: &'a mut IdGen,
    pub(crate) metrics: &'a mut Metrics,
    pub(crate) limits: &'a Limits,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ConnKind {
    Threads,
    Channels,
}

/// The Bubble engine. See the crate docs for how to drive it.
pub struct Engine {
    config: Config,
    auth: Authenticator,
    store: Box<dyn EventStore>,
    threads: Threads,
    channels: Channels,
    conns: HashMap<ConnId, ConnKind>,
    heartbeats: Heartbeats,
    out: Outbox,
    ids: IdGen,
    metrics: Metrics,
}

impl Engine {
    /// An engine over `snapshot` (from [`crate::store::Backend::load`]),
    /// reading history through `store`, generating ids from `seed`.
    pub fn new(
        config: Config,
        seed: u64,
        snapshot: Snapshot,
        store: Box<dyn EventStore>,
    ) -> Result<Engine, Misuse> {
        Ok(Engine {
            auth: Authenticator::new(&config.auth),
            threads: Threads::new(snapshot, &config)?,
            channels: Channels::new(&config),
            heartbeats: Heartbeats::new(config.heartbeat),
            conns: HashMap::new(),
            out: Outbox::default(),
            ids: IdGen::new(seed),
            metrics: Metrics::default(),
            store,
            config,
        })
    }

    /// Processes one input. Afterwards drain [`Engine::poll_output`] to
    /// `None` and re-arm one timer from [`Engine::poll_timeout`].
    pub fn handle(&mut self, now: Millis, input: Input<'_>) -> Result<(), Misuse> {
        let result = self.dispatch(now, input);
        self.out.seal();
        result
    }

    fn dispatch(&mut self, now: Millis, input: Input<'_>) -> Result<(), Misuse> {
        let mut cx = Ctx {
            now,
            out: &mut self.out,
            ids: &mut self.ids,
            metrics: &mut self.metrics,
            limits: &self.config.limits,
        };
        match input {
            Input::OpenThreads { conn, token } => {
                Self::register(&mut self.conns, conn, ConnKind::Threads)?;
                self.heartbeats.open(now, conn);
                let principal = token
                    .ok_or(crate::auth::AuthError::Missing)
                    .and_then(|t| self.auth.authenticate(t, now));
                self.threads.open(&mut cx, conn, principal);
            }
            Input::OpenChannels { conn, handshake } => {
                Self::register(&mut self.conns, conn, ConnKind::Channels)?;
                self.heartbeats.open(now, conn);
                self.channels.open(&mut cx, conn, handshake);
            }
            Input::Frame { conn, frame } => {
                cx.metrics.frames_in += 1;
                match Self::kind_of(&self.conns, conn)? {
                    ConnKind::Threads => self.threads.frame(&mut cx, &*self.store, conn, frame),
                    ConnKind::Channels => self.channels.frame(&mut cx, conn, frame),
                }
            }
            Input::Pong { conn } => {
                Self::kind_of(&self.conns, conn)?;
                self.heartbeats.pong(now, conn);
            }
            Input::Drained { conn } => {
                if Self::kind_of(&self.conns, conn)? == ConnKind::Threads {
                    self.threads.drained(&mut cx, &*self.store, conn);
                }
            }
            Input::Closed { conn } => {
                let kind = self.conns.remove(&conn).ok_or(Misuse::UnknownConn(conn))?;
                self.heartbeats.close(conn);
                match kind {
                    ConnKind::Threads => self.threads.closed(&mut cx, conn),
                    ConnKind::Channels => self.channels.closed(&mut cx, conn),
                }
            }
            Input::Http { req, request } => {
                if crate::edge::engine_api(request.path) == Api::Channels {
                    self.channels.http(&mut cx, req, &request);
                } else {
                    let principal = crate::edge::bearer(request.authorization)
                        .and_then(|t| self.auth.authenticate(t, now));
                    self.threads
                        .http(&mut cx, &*self.store, req, principal, &request);
                }
            }
            Input::Persisted { batch } => {
                if !self.out.persisted(batch) {
                    return Err(Misuse::UnknownBatch(batch));
                }
                self.threads.persisted(batch);
            }
            Input::Tick => {
                let mut beats = Vec::new();
                self.heartbeats.poll(now, &mut beats);
                for beat in beats {
                    let (conn, out) = match beat {
                        Beat::Ping(conn) => (conn, Output::Ping { conn }),
                        Beat::Expired(conn) => (conn, Output::Close { conn, code: 1006 }),
                    };
                    match self.conns.get(&conn) {
                        Some(ConnKind::Channels) => cx.out.push_unfenced(out),
                        _ => cx.out.push(out),
                    }
                }
                self.channels.tick(&mut cx);
            }
        }
        Ok(())
    }

    fn register(
        conns: &mut HashMap<ConnId, ConnKind>,
        conn: ConnId,
        kind: ConnKind,
    ) -> Result<(), Misuse> {
        if conns.insert(conn, kind).is_some() {
            return Err(Misuse::ConnInUse(conn));
        }
        Ok(())
    }

    fn kind_of(conns: &HashMap<ConnId, ConnKind>, conn: ConnId) -> Result<ConnKind, Misuse> {
        conns.get(&conn).copied().ok_or(Misuse::UnknownConn(conn))
    }

    /// The next output, or `None` when there is nothing (yet) to do.
    #[must_use]
    pub fn poll_output(&mut self) -> Option<Output> {
        let out = self.out.pop();
        if let Some(Output::Send { .. }) = out {
            self.metrics.frames_out += 1;
        }
        out
    }

    /// When to deliver the next [`Input::Tick`].
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Millis> {
        [self.heartbeats.next_due(), self.channels.next_deadline()]
            .into_iter()
            .flatten()
            .min()
    }

    /// Decides a `/socket` upgrade before it happens (SPEC §6): the
    /// accepted handshake that [`Input::OpenChannels`] needs, or the
    /// plain-text HTTP error to answer instead of upgrading.
    pub fn channel_handshake(
        &self,
        upgrade: &ChannelsUpgrade,
    ) -> Result<AcceptedHandshake, HttpResponse> {
        self.channels.handshake(upgrade)
    }

    /// The engine's metrics.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The configured limits (the host sizes frames and queues from them).
    pub fn limits(&self) -> &Limits {
        &self.config.limits
    }
}
