//! Error codes with stable wire strings and HTTP statuses, and the typed
//! errors the engine reports to peers.

use serde::{Deserialize, Serialize};

use crate::ids::{PrincipalId, ThreadId};
use crate::policy::Capability;

/// `BubbleErrorCode`: the `code` of error bodies and `error` frames, and the
/// `reason` of `thread.subscription_closed`. A shipped code is never renamed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// 400: the request or frame is malformed or breaks a rule.
    InvalidRequest,
    /// 401: missing or bad credentials.
    Unauthorized,
    /// 403: the caller can read the thread but lacks the capability.
    Forbidden,
    /// 404: no such thread, or the caller cannot read it.
    NotFound,
    /// 409: the request conflicts with existing state.
    Conflict,
    /// 413: the body or event is larger than the configured limit.
    PayloadTooLarge,
    /// 429: a rate limit was exceeded.
    RateLimited,
    /// 500: the server failed.
    Internal,
    /// 503: a dependency is unavailable.
    Unavailable,
}

/// Every code, in table order: the one table of wire string and HTTP status.
pub const ERROR_CODES: [(ErrorCode, &str, u16); 9] = [
    (ErrorCode::InvalidRequest, "invalid_request", 400),
    (ErrorCode::Unauthorized, "unauthorized", 401),
    (ErrorCode::Forbidden, "forbidden", 403),
    (ErrorCode::NotFound, "not_found", 404),
    (ErrorCode::Conflict, "conflict", 409),
    (ErrorCode::PayloadTooLarge, "payload_too_large", 413),
    (ErrorCode::RateLimited, "rate_limited", 429),
    (ErrorCode::Internal, "internal", 500),
    (ErrorCode::Unavailable, "unavailable", 503),
];

impl ErrorCode {
    fn row(self) -> (ErrorCode, &'static str, u16) {
        ERROR_CODES[self as usize]
    }

    /// The wire string, e.g. `"not_found"`.
    pub fn as_str(self) -> &'static str {
        self.row().1
    }

    /// The HTTP status this code maps to.
    pub fn http_status(self) -> u16 {
        self.row().2
    }
}

/// An error reported to a peer. The message is the seed's exact sentence
/// where a seed gives one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BubbleError {
    /// A malformed request, frame or field; the message says which.
    #[error("{0}")]
    InvalidRequest(String),
    /// Missing, malformed or expired credentials.
    #[error("{0}")]
    Unauthorized(String),
    /// The caller can read the thread but lacks `capability`.
    #[error("Principal \"{principal}\" lacks \"{capability}\" on thread \"{thread}\".")]
    Forbidden {
        /// Who asked.
        principal: PrincipalId,
        /// What they lacked.
        capability: Capability,
        /// Where.
        thread: ThreadId,
    },
    /// A principal tried to act as someone else.
    #[error("{0}")]
    PrincipalMismatch(String),
    /// A cross-origin preflight the deployment's CORS rules refuse.
    #[error("{0}")]
    CrossOrigin(String),
    /// The thread does not exist, or the caller cannot read it.
    #[error("Thread \"{0}\" was not found.")]
    ThreadNotFound(ThreadId),
    /// Some other resource was not found.
    #[error("{0}")]
    NotFound(String),
    /// The connection already holds a subscription on this thread.
    #[error("Connection is already subscribed to thread \"{0}\".")]
    AlreadySubscribed(ThreadId),
    /// A state conflict; the message says which.
    #[error("{0}")]
    Conflict(String),
    /// A body or event over its size limit.
    #[error("{0}")]
    PayloadTooLarge(String),
    /// A rate limit was exceeded.
    #[error("{0}")]
    RateLimited(String),
    /// The store failed; details are logged by the host, never sent.
    #[error("Internal error.")]
    Internal,
    /// A dependency is unavailable.
    #[error("{0}")]
    Unavailable(String),
}

impl BubbleError {
    /// The wire code of this error.
    pub fn code(&self) -> ErrorCode {
        match self {
            BubbleError::InvalidRequest(_) => ErrorCode::InvalidRequest,
            BubbleError::Unauthorized(_) => ErrorCode::Unauthorized,
            BubbleError::Forbidden { .. }
            | BubbleError::PrincipalMismatch(_)
            | BubbleError::CrossOrigin(_) => ErrorCode::Forbidden,
            BubbleError::ThreadNotFound(_) | BubbleError::NotFound(_) => ErrorCode::NotFound,
            BubbleError::AlreadySubscribed(_) | BubbleError::Conflict(_) => ErrorCode::Conflict,
            BubbleError::PayloadTooLarge(_) => ErrorCode::PayloadTooLarge,
            BubbleError::RateLimited(_) => ErrorCode::RateLimited,
            BubbleError::Internal => ErrorCode::Internal,
            BubbleError::Unavailable(_) => ErrorCode::Unavailable,
        }
    }

    /// `{ "error": { "code", "message" } }`, the HTTP error body.
    pub fn to_http_body(&self) -> String {
        serde_json::json!({ "error": { "code": self.code(), "message": self.to_string() } })
            .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn code_table_is_pinned() {
        let pinned = [
            ("invalid_request", 400),
            ("unauthorized", 401),
            ("forbidden", 403),
            ("not_found", 404),
            ("conflict", 409),
            ("payload_too_large", 413),
            ("rate_limited", 429),
            ("internal", 500),
            ("unavailable", 503),
        ];
        for ((code, wire, status), (want_wire, want_status)) in ERROR_CODES.iter().zip(pinned) {
            assert_eq!(code.as_str(), want_wire);
            assert_eq!(*wire, want_wire);
            assert_eq!(code.http_status(), want_status);
            assert_eq!(*status, want_status);
            assert_eq!(serde_json::to_value(code).unwrap(), want_wire);
        }
    }

    #[test]
    fn conflict_message_matches_seed() {
        let err = BubbleError::AlreadySubscribed(ThreadId::parse("thread-1").unwrap());
        assert_eq!(
            err.to_string(),
            "Connection is already subscribed to thread \"thread-1\"."
        );
        assert_eq!(err.code(), ErrorCode::Conflict);
    }
}
