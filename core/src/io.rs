//! The engine's vocabulary: what a host reports ([`Input`]) and what it must
//! do ([`Output`]). Every other module builds on these types; none of them
//! depends on the engine itself.

use std::sync::Arc;

use crate::auth::KeySet;
use crate::channels::PusherError;
use crate::cluster::{ClaimOutcome, ClusterMessage, NodeState};
use crate::http::{HttpRequest, HttpResponse};
use crate::ids::{BatchId, ClaimId, ConnId, ReadId, RequestId, ThreadId};
use crate::store::{Batch, ReadQuery, ReadResult, StoreError};

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

/// The wire protocol of a channel socket: pubb (with the acknowledgement
/// it asked for) or Pusher protocol 7. Both speak to the same channels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChannelProtocol {
    /// `/socket?protocol=2`: `pubb:subscription_succeeded`.
    V2,
    /// `/socket` without `protocol=2`: the legacy
    /// `pubb_internal:subscription_succeeded`.
    Legacy,
    /// `/app/:key`: Pusher protocol 7 (`pusher:…` events).
    Pusher,
}

/// A `/socket` handshake the engine accepted. Only
/// [`Engine::channel_handshake`](crate::Engine::channel_handshake) makes
/// one, and [`Input::OpenChannels`](crate::Input::OpenChannels) needs one:
/// a host cannot open a channel socket the engine did not accept. It is
/// neither `Clone` nor `Copy`; a host hands it to the open and drops it.
#[derive(Debug, PartialEq, Eq)]
pub struct AcceptedHandshake {
    app: usize,
    protocol: ChannelProtocol,
    refusal: Option<PusherError>,
}

impl AcceptedHandshake {
    pub(crate) fn new(app: usize, protocol: ChannelProtocol) -> AcceptedHandshake {
        AcceptedHandshake {
            app,
            protocol,
            refusal: None,
        }
    }

    /// A Pusher socket that is upgraded only to hear `pusher:error` and close
    /// with its code (Pusher refuses connections that way, not over HTTP).
    pub(crate) fn refused(refusal: PusherError) -> AcceptedHandshake {
        AcceptedHandshake {
            app: usize::MAX,
            protocol: ChannelProtocol::Pusher,
            refusal: Some(refusal),
        }
    }

    /// Why the socket is closed as soon as it opens, if it is.
    pub(crate) fn refusal(&self) -> Option<&PusherError> {
        self.refusal.as_ref()
    }

    /// The app's index in the engine's configuration.
    pub(crate) fn app(&self) -> usize {
        self.app
    }

    /// The acknowledgement mode the socket asked for.
    pub fn protocol(&self) -> ChannelProtocol {
        self.protocol
    }
}

/// Why the engine closes a socket; each maps to one WebSocket close code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// 1001: the server is going away.
    GoingAway,
    /// 1008: a policy was violated (bad token, unknown app, command rate).
    Policy,
    /// 1009: a client frame exceeded the size limit.
    TooBig,
    /// 1013: try again later (the app is full, or the consumer was too slow).
    TryAgainLater,
    /// No close frame: the peer stopped answering Pings, so the TCP
    /// connection is dropped (the peer sees 1006).
    Dropped,
    /// A Pusher protocol code (4000–4299) after the `pusher:error` that
    /// names it: 4000–4099 tell the client not to reconnect, 4100–4199 to
    /// back off, 4200–4299 to reconnect at once.
    Pusher(u16),
}

impl CloseReason {
    /// The WebSocket close code to send; `None` for [`CloseReason::Dropped`].
    pub fn code(self) -> Option<u16> {
        match self {
            CloseReason::GoingAway => Some(1001),
            CloseReason::Policy => Some(1008),
            CloseReason::TooBig => Some(1009),
            CloseReason::TryAgainLater => Some(1013),
            CloseReason::Dropped => None,
            CloseReason::Pusher(code) => Some(code),
        }
    }
}

/// Something that happened, reported by the host.
#[derive(Debug, Clone)]
pub enum Input<'a> {
    /// A `/v1/ws` socket was upgraded; `token` is the bearer from the
    /// `Authorization` header or `?access_token=` (None when absent).
    OpenThreads {
        /// The host's handle for the socket.
        conn: ConnId,
        /// The bearer token, if any.
        token: Option<&'a str>,
    },
    /// A `/v1/ws` socket that outlived the engine that served it (a
    /// Durable Object evicted while the runtime kept its sockets open),
    /// opened again on this engine: authenticated with `token` as at
    /// [`Input::OpenThreads`], then subscribed again to each thread from
    /// its position, exactly as a `thread.subscribe` with that `fromSeq`
    /// would, except that the client gets no second
    /// `thread.subscription_opened` (it has one). Positions are what
    /// [`crate::Engine::thread_subscriptions`] reported on the engine before.
    ResumeThreads {
        /// The host's handle for the socket (new to this engine).
        conn: ConnId,
        /// The bearer token the socket opened with, if any.
        token: Option<&'a str>,
        /// Per thread, the next seq to send (the last one delivered + 1).
        subscriptions: &'a [(ThreadId, u64)],
    },
    /// A `/socket` was upgraded after [`crate::Engine::channel_handshake`] accepted it.
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
    /// Every batch up to and including `batch` is durable, whole.
    Persisted {
        /// The batch.
        batch: BatchId,
    },
    /// Every batch before `batch` is durable (reported earlier), and so is
    /// `batch` except the writes of the threads in `conflicts`: another
    /// writer had changed them since the versions the batch expected, so
    /// nothing of theirs in this batch was applied.
    PersistFailed {
        /// The batch.
        batch: BatchId,
        /// The threads whose writes were refused.
        conflicts: Vec<ThreadId>,
    },
    /// A read asked for by [`Output::Read`] completed (in any order, at any
    /// time; completions nobody waits for any more are ignored).
    ReadDone {
        /// The read.
        read: ReadId,
        /// What the store answered; an error answers `internal` to the one
        /// request that waited for it.
        result: Result<ReadResult, StoreError>,
    },
    /// Another writer changed `thread`: its durable head is now `head_seq`
    /// and its version `version` (a cluster's broker reports this).
    Changed {
        /// The thread.
        thread: ThreadId,
        /// Its durable head after the change.
        head_seq: u64,
        /// Its version after the change.
        version: u64,
    },
    /// Another node of the cluster said something (see [`crate::cluster`]).
    /// Messages from one node arrive in the order it sent them; the host
    /// drops the engine's own.
    Remote {
        /// The sender's node id.
        node: &'a str,
        /// What it said.
        message: ClusterMessage,
    },
    /// The other nodes' channel state (presence members and subscriber
    /// counts), as the broker holds it now (the host leaves out this
    /// node). A node's rows replace what the engine knew of it unless the
    /// engine already applied a newer message of that node; members that
    /// appear or vanish are announced to local subscribers. The first one a
    /// clustered engine gets is its start: before it, the engine reports no
    /// webhook (it does not know what the cluster holds). Hosts send it
    /// after (re)connecting to the broker and periodically, which also
    /// repairs lost messages. A node missing from two in a row is gone.
    ClusterState {
        /// Every other node the broker knows.
        nodes: Vec<NodeState>,
    },
    /// The broker may have lost messages (it reconnected, or a periodic
    /// check is due): read every thread with live subscriptions again and
    /// catch up on whatever changed unannounced.
    Recheck,
    /// The outcome of an [`Output::Claim`].
    Claimed {
        /// The claim.
        claim: ClaimId,
        /// How it went.
        outcome: ClaimOutcome,
    },
    /// The key set the engine asked for with [`Output::FetchKeys`]
    /// (parsed with [`KeySet::parse`]); it replaces the one in use.
    KeysLoaded {
        /// The set.
        keys: KeySet,
    },
    /// The key set asked for with [`Output::FetchKeys`] could not be had
    /// (unreachable, not 2xx, not a JWKS document): the set in use stays.
    KeysFailed,
    /// A deadline from [`crate::Engine::poll_timeout`] passed (early ticks are harmless).
    Tick,
    /// The host is going away: every socket is closed the way its protocol
    /// says a client should come back (Pusher sockets hear `pusher:error`
    /// 4200 and close with 4200, the others close with 1001).
    Shutdown,
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
    /// Send one text frame to each of `conns`, in that order: a fan-out's
    /// frame, serialized once. The same as one [`Output::Send`] per
    /// connection, in the same place among the outputs.
    SendAll {
        /// The sockets, each named once.
        conns: Vec<ConnId>,
        /// The frame.
        frame: SharedFrame,
    },
    /// Send a WebSocket Ping.
    Ping {
        /// The socket.
        conn: ConnId,
    },
    /// Close the socket. The host reports [`Input::Closed`] afterwards.
    Close {
        /// The socket.
        conn: ConnId,
        /// Why, and so which close code.
        reason: CloseReason,
    },
    /// Answer an HTTP request.
    Respond {
        /// The request.
        req: RequestId,
        /// The response.
        response: HttpResponse,
    },
    /// Make `batch` durable, each thread's writes only if that thread is
    /// still at the version they expect, then report [`Input::Persisted`]
    /// or [`Input::PersistFailed`]. Batches must be reported in order.
    Persist {
        /// The batch's handle.
        batch: BatchId,
        /// The writes, grouped by thread.
        writes: Batch,
    },
    /// Read from the store and report [`Input::ReadDone`]. Reads may
    /// complete in any order.
    Read {
        /// The read's handle.
        read: ReadId,
        /// What to read.
        query: ReadQuery,
    },
    /// Tell every other node of the cluster (only a clustered engine emits
    /// it); see [`crate::cluster`].
    Broadcast {
        /// What to tell them.
        message: ClusterMessage,
    },
    /// Claim a publication's idempotency key for the whole cluster: store
    /// `value` under (`app_id`, `key`) for `ttl_ms` unless the key is held
    /// already, then report [`Input::Claimed`] with the holder's value if it
    /// was (only a clustered engine emits it).
    Claim {
        /// The claim's handle.
        claim: ClaimId,
        /// The app's id.
        app_id: String,
        /// The `Idempotency-Key`.
        key: String,
        /// The record to keep under the key.
        value: String,
        /// How long the key is held.
        ttl_ms: u64,
    },
    /// POST a signed Pusher webhook batch to `url`, with `X-Pusher-Key: key`
    /// and `X-Pusher-Signature: signature` (HMAC-SHA256 of `body` with the
    /// app secret, lowercase hex). Retry until the endpoint answers 2xx,
    /// keeping the order of the batches of one `url`; never hold up anything
    /// else for it.
    Webhook {
        /// The endpoint.
        url: String,
        /// The app key (`X-Pusher-Key`).
        key: String,
        /// The body's signature (`X-Pusher-Signature`).
        signature: String,
        /// `{"time_ms": …, "events": [...]}`.
        body: String,
    },
    /// Report [`Input::Drained`] for `conn` once what was sent to it so far
    /// has been written (flow control for backlog replay).
    WantDrained {
        /// The socket.
        conn: ConnId,
    },
    /// Fetch the JWKS again (read its file, or GET its URL) and report
    /// [`Input::KeysLoaded`] or [`Input::KeysFailed`], within
    /// [`FETCH_TIMEOUT_MS`](crate::auth::refresh::FETCH_TIMEOUT_MS); no other
    /// fetch is asked for until then.
    FetchKeys,
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
    /// `Persisted` named a batch that was never issued, or came out of order.
    #[error("batch {0:?} was never issued")]
    UnknownBatch(BatchId),
}
