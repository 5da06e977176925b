//! What the client hands to the application: stored events, history pages,
//! the connection's state and scoped errors.

use serde_json::Value;
use tokio::time::Instant;

use crate::Error;

/// One stored event of a thread, as the server keeps it.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// Its position in the thread: 1, 2, 3… without gaps.
    pub seq: u64,
    /// The whole event (`seq`, `type`, `createdAt`, `principalId`, …).
    pub value: Value,
}

impl Event {
    /// Reads a stored event: a JSON object with a `seq`.
    pub(crate) fn from_value(value: Value) -> Result<Event, Error> {
        match value.get("seq").and_then(Value::as_u64) {
            Some(seq) if value.is_object() => Ok(Event { seq, value }),
            _ => Err(Error::Protocol(format!("an event without a seq: {value}"))),
        }
    }

    /// The event's `type` (`message_part`, `run_started`, …).
    pub fn kind(&self) -> Option<&str> {
        self.value.get("type").and_then(Value::as_str)
    }
}

/// One page of a thread's history (`GET /v1/threads/:id/events`).
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// The events of the page, in seq order.
    pub events: Vec<Event>,
    /// Where the next page starts, or `None` after the last page.
    pub next_seq: Option<u64>,
}

/// The connection to the server, as [`crate::Client::state`] reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionState {
    /// A connection is being opened (or a fresh token fetched first).
    Connecting,
    /// Connected: subscriptions are live and appends go out.
    Open,
    /// Disconnected; the `attempt`th reconnection (from 1) starts at `at`.
    Reconnecting {
        /// Which reconnection this will be.
        attempt: u32,
        /// When it starts.
        at: Instant,
    },
    /// Closed by the application; nothing more happens.
    Closed,
}

/// An `error` frame the server sent: about one thread, or (without a
/// thread) about the connection. Informational: a subscription ends only
/// when its stream yields an [`Error`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScopedError {
    /// The thread it is about, if any.
    pub thread: Option<String>,
    /// The server's error code.
    pub code: String,
    /// The server's message.
    pub message: String,
}
