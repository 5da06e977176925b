//! The client's vocabulary: what the host and application report
//! ([`ClientInput`]) and what the client asks for ([`ClientOutput`]).

use serde_json::{Map, Value};

use crate::ids::{Millis, ThreadId};

/// The host's handle for one append (like a request id: the host picks it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AppendId(pub u64);

/// How a client behaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientConfig {
    /// The bearer token to connect and append with.
    pub token: Option<String>,
    /// Ask the host for a fresh token before every reconnection, and when
    /// an append is refused as unauthorized.
    pub refresh_token: bool,
    /// The first reconnection delay's ceiling, in milliseconds.
    pub backoff_base_ms: u64,
    /// The longest reconnection delay, in milliseconds.
    pub backoff_cap_ms: u64,
}

impl Default for ClientConfig {
    fn default() -> ClientConfig {
        ClientConfig {
            token: None,
            refresh_token: false,
            backoff_base_ms: 500,
            backoff_cap_ms: 30_000,
        }
    }
}

/// The connection, as the application sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionState {
    /// A connection is being opened (or a token is awaited first).
    Connecting,
    /// Connected: subscriptions are live and appends go out.
    Open,
    /// Disconnected; the `attempt`th reconnection (from 1) starts at `at`.
    Reconnecting {
        /// Which reconnection this will be.
        attempt: u32,
        /// When it starts.
        at: Millis,
    },
    /// Closed by the application; nothing more happens.
    Closed,
}

/// An error the server reported, by its stable code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteError {
    /// The error code (`not_found`, `forbidden`, …).
    pub code: String,
    /// The human-readable message.
    pub message: String,
}

/// Something the host or the application reports to the client.
#[derive(Debug, Clone)]
pub enum ClientInput<'a> {
    /// Follow `thread` from `from_seq` (inclusive, at least 1).
    Subscribe {
        /// The thread.
        thread: ThreadId,
        /// The first seq wanted.
        from_seq: u64,
    },
    /// Stop following `thread`.
    Unsubscribe {
        /// The thread.
        thread: ThreadId,
    },
    /// Append `event` to `thread`; answered by [`ClientOutput::Appended`]
    /// or [`ClientOutput::AppendRejected`] with the same `append`.
    Append {
        /// The host's handle for it (unique among pending appends).
        append: AppendId,
        /// The thread.
        thread: ThreadId,
        /// The event body, as for `POST /v1/threads/:id/events`.
        event: Map<String, Value>,
    },
    /// The connection asked for by [`ClientOutput::Connect`] is open.
    Opened,
    /// A text frame arrived on the connection.
    Frame(&'a str),
    /// The connection failed to open, or closed.
    Closed,
    /// The answer to [`ClientOutput::NeedToken`].
    Token(Option<String>),
    /// The HTTP answer to a [`ClientOutput::Post`].
    AppendDone {
        /// The append.
        append: AppendId,
        /// The status code.
        status: u16,
        /// The response body.
        body: &'a str,
    },
    /// A [`ClientOutput::Post`] got no answer (network failure, timeout).
    AppendFailed {
        /// The append.
        append: AppendId,
    },
    /// The application is done: close the connection, give up on pending
    /// appends.
    Close,
    /// A deadline from [`Client::poll_timeout`] passed (early ticks are harmless).
    Tick,
}

/// Something the host must do, or tell the application.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientOutput {
    /// The connection state changed.
    State(ConnectionState),
    /// Fetch a token and report [`ClientInput::Token`].
    NeedToken,
    /// Open the `/v1/ws` connection with this bearer token.
    Connect {
        /// The token, if any.
        token: Option<String>,
    },
    /// Close the connection (the application closed the client).
    Disconnect,
    /// Send a text frame on the connection.
    Send(String),
    /// `POST /v1/threads/{thread}/events` with `body`, the
    /// `Idempotency-Key` header and the bearer token, then report
    /// [`ClientInput::AppendDone`] or [`ClientInput::AppendFailed`].
    Post {
        /// The append.
        append: AppendId,
        /// The thread.
        thread: ThreadId,
        /// The key, the same on every retry.
        idempotency_key: String,
        /// The event JSON.
        body: String,
        /// The bearer token, if any.
        token: Option<String>,
    },
    /// The next event of a subscribed thread.
    Event {
        /// The thread.
        thread: ThreadId,
        /// Its seq (one more than the last delivered).
        seq: u64,
        /// The event, as stored.
        event: Value,
    },
    /// Every event of `thread` up to the subscription's `throughSeq` has
    /// been delivered; what follows is live.
    CaughtUp {
        /// The thread.
        thread: ThreadId,
        /// The subscription's `throughSeq`.
        through_seq: u64,
    },
    /// An append landed (once); `event` is the stored event.
    Appended {
        /// The append.
        append: AppendId,
        /// The thread.
        thread: ThreadId,
        /// The stored event, with its seq.
        event: Value,
    },
    /// An append was refused, or given up on at [`ClientInput::Close`]
    /// (code `client_closed`); it will not land.
    AppendRejected {
        /// The append.
        append: AppendId,
        /// The thread.
        thread: ThreadId,
        /// Why.
        error: RemoteError,
    },
    /// A scoped `error` frame: about `thread` only.
    ThreadError {
        /// The thread.
        thread: ThreadId,
        /// The error.
        error: RemoteError,
    },
    /// The server ended the subscription. With `resubscribing` (the reason
    /// was `internal`, a failed read) the client subscribes again after a
    /// backoff; otherwise the subscription is over.
    SubscriptionClosed {
        /// The thread.
        thread: ThreadId,
        /// The error code that ended it.
        reason: String,
        /// Whether the client subscribes again.
        resubscribing: bool,
    },
    /// An unscoped `error` frame: about the connection.
    ConnectionError {
        /// The error.
        error: RemoteError,
    },
}

/// The host or application broke the driving contract.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClientMisuse {
    /// `Subscribe` for a thread already subscribed.
    #[error("already subscribed to {0}")]
    AlreadySubscribed(ThreadId),
    /// `Subscribe` with `from_seq` 0.
    #[error("fromSeq must be at least 1")]
    FromSeqZero,
    /// `Append` reused the id of a pending append.
    #[error("append {0:?} is already pending")]
    AppendInUse(AppendId),
    /// The client was closed.
    #[error("the client is closed")]
    Closed,
}
