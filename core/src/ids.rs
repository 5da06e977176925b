//! Identifier newtypes and the host-supplied clock value.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::BubbleError;

/// Milliseconds since the Unix epoch, as read by the host's wall clock.
///
/// The engine never reads a clock: every input carries `now`. Timestamps
/// (`createdAt`, `joinedAt`) are formatted from it, and timers compare it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Millis(pub u64);

impl Millis {
    /// `self + ms`, saturating.
    #[must_use]
    pub fn plus(self, ms: u64) -> Millis {
        Millis(self.0.saturating_add(ms))
    }
}

/// A connection handle chosen by the host; unique among open connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(pub u64);

/// An HTTP request handle chosen by the host; echoed on the matching response.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RequestId(pub u64);

/// A persistence batch handle chosen by the engine (ascending from 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BatchId(pub u64);

/// A read handle chosen by the engine, echoed on its completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReadId(pub u64);

/// A publication's idempotency-key claim, chosen by the engine, echoed on
/// its outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClaimId(pub u64);

/// A validated thread id: 1–128 characters of `[A-Za-z0-9._:-]` (SPEC §2).
/// Shared, not copied, by its clones: one id names a thread in every map,
/// write and frame its events pass through.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct ThreadId(Arc<str>);

impl ThreadId {
    /// Validates `raw` as a thread id.
    pub fn parse(raw: &str) -> Result<ThreadId, BubbleError> {
        let ok = (1..=128).contains(&raw.len())
            && raw
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'));
        if ok {
            Ok(ThreadId(Arc::from(raw)))
        } else {
            Err(BubbleError::InvalidRequest(format!(
                "Invalid threadId \"{raw}\": expected 1-128 characters of [A-Za-z0-9._:-]."
            )))
        }
    }

    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> Deserialize<'de> for ThreadId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = String::deserialize(d)?;
        ThreadId::parse(&raw).map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for ThreadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A principal (a person or an agent) as named by the auth drivers; shared,
/// not copied, by its clones.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PrincipalId(Arc<str>);

impl PrincipalId {
    /// Wraps a principal id; principals come from trusted auth drivers or
    /// validated request fields.
    pub fn new(raw: impl AsRef<str>) -> PrincipalId {
        PrincipalId(Arc::from(raw.as_ref()))
    }

    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for PrincipalId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_id_charset_and_length() {
        assert!(ThreadId::parse("thread-1").is_ok());
        assert!(ThreadId::parse("a.b_c:d-E9").is_ok());
        assert!(ThreadId::parse(&"x".repeat(128)).is_ok());
        assert!(ThreadId::parse(&"x".repeat(129)).is_err());
        assert!(ThreadId::parse("").is_err());
        assert!(ThreadId::parse("has space").is_err());
        assert!(ThreadId::parse("slash/no").is_err());
    }
}
