//! The crate's one error type, with the stable code of each case.

use bubble_core::client::ClientMisuse;

/// Why a subscription, an append, a history page or a connection failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The server refused, with one of its stable error codes
    /// (`not_found`, `forbidden`, `invalid_request`, …), or ended a
    /// subscription with that code as its reason.
    #[error("{code}: {message}")]
    Server {
        /// The server's error code.
        code: String,
        /// The server's message.
        message: String,
    },
    /// The client was closed (by [`crate::Client::close`], or because every
    /// handle to it was dropped) before this could happen.
    #[error("the client is closed")]
    Closed,
    /// The thread is already subscribed on this client (one subscription
    /// per thread, as on the wire).
    #[error("already subscribed to thread {0}")]
    AlreadySubscribed(String),
    /// A thread id that is not 1–128 characters of `[A-Za-z0-9._:-]`.
    #[error("invalid thread id {0:?}")]
    InvalidThreadId(String),
    /// `from_seq` 0: seqs start at 1.
    #[error("fromSeq must be at least 1")]
    InvalidFromSeq,
    /// An event that does not serialize to a JSON object.
    #[error("an event must be a JSON object")]
    InvalidEvent,
    /// A server URL this client cannot use.
    #[error("invalid server URL: {0}")]
    InvalidUrl(String),
    /// The request got no answer (connection refused or lost, timeout).
    #[error("network: {0}")]
    Network(String),
    /// The server answered something this client cannot read.
    #[error("unexpected answer from the server: {0}")]
    Protocol(String),
}

impl Error {
    /// The stable code: the server's code for [`Error::Server`], otherwise
    /// `client_closed`, `already_subscribed`, `invalid_request`, `network`
    /// or `protocol`.
    pub fn code(&self) -> &str {
        match self {
            Error::Server { code, .. } => code,
            Error::Closed => "client_closed",
            Error::AlreadySubscribed(_) => "already_subscribed",
            Error::InvalidThreadId(_)
            | Error::InvalidFromSeq
            | Error::InvalidEvent
            | Error::InvalidUrl(_) => "invalid_request",
            Error::Network(_) => "network",
            Error::Protocol(_) => "protocol",
        }
    }

    /// The error for a request the core client refused.
    pub(crate) fn from_misuse(misuse: ClientMisuse) -> Error {
        match misuse {
            ClientMisuse::AlreadySubscribed(thread) => Error::AlreadySubscribed(thread.to_string()),
            ClientMisuse::FromSeqZero => Error::InvalidFromSeq,
            ClientMisuse::Closed => Error::Closed,
            other => Error::Protocol(other.to_string()),
        }
    }
}
