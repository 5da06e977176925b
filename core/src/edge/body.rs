//! How much of an engine request's body a host reads, and what it answers
//! for a body over that: decided here so every host reads alike.
//!
//! Pusher's `/apps/…` routes take the largest body Pusher's API allows: a
//! batch of [`PUSHER_BATCH_EVENTS`] events, each with `data` at
//! `max_publish_data_bytes` written as a JSON string at its worst (every
//! byte a six-byte `\u00XX` escape), [`PUSHER_EVENT_CHANNELS`] channel names
//! of [`PUSHER_CHANNEL_CHARS`] characters and an event name of 200
//! characters, escaped likewise. Past it, Pusher's plain-text `413`. The
//! other routes read up to twice `max_event_bytes` plus 64 KiB, and answer
//! `payload_too_large` past it, in their API's error shape.

use crate::config::Limits;
use crate::http::HttpResponse;
use crate::BubbleError;

use super::path::{engine_api, Api};
use crate::channels::api::coded_error;

/// Events in one Pusher `batch_events` request.
pub const PUSHER_BATCH_EVENTS: usize = 10;
/// Channels one Pusher event may name.
pub const PUSHER_EVENT_CHANNELS: usize = 100;
/// Longest Pusher channel name.
pub const PUSHER_CHANNEL_CHARS: usize = 164;
/// Longest event name, in characters.
const EVENT_NAME_CHARS: usize = 200;
/// Bytes one character can take written in a JSON string (`\u00XX`).
const WORST_ESCAPE: usize = 6;
/// Room per event for the keys, `socket_id` and `info`.
const EVENT_SLACK: usize = 1024;

/// The largest body a host reads for an engine request at `path`.
pub fn body_limit(limits: &Limits, path: &str) -> usize {
    match engine_api(path) {
        Api::Pusher => {
            let data = limits.max_publish_data_bytes.saturating_mul(WORST_ESCAPE);
            let channels = PUSHER_EVENT_CHANNELS * (PUSHER_CHANNEL_CHARS + 3);
            let event = data + channels + EVENT_NAME_CHARS * WORST_ESCAPE + EVENT_SLACK;
            event.saturating_mul(PUSHER_BATCH_EVENTS)
        }
        Api::Threads | Api::Channels => limits
            .max_event_bytes
            .saturating_mul(2)
            .saturating_add(64 * 1024),
    }
}

/// `413` for a body over [`body_limit`]: plain text on Pusher's routes, as
/// Pusher answers; elsewhere the API's JSON error (`{"error": {"code",
/// "message"}}` on the threads API, `{"error", "code"}` on the channels
/// API).
pub fn body_too_large(path: &str, limit: usize) -> HttpResponse {
    let message = format!("Request body exceeds {limit} bytes.");
    match engine_api(path) {
        Api::Pusher => HttpResponse::text(
            413,
            format!("Payload too large: the request body must be at most {limit} bytes"),
        ),
        Api::Threads => HttpResponse::error(&BubbleError::PayloadTooLarge(message)),
        Api::Channels => coded_error(413, &message, "payload_too_large"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::ContentType;

    #[test]
    fn pusher_routes_read_a_full_batch() {
        let limits = Limits::default();
        let pusher = body_limit(&limits, "/apps/1/batch_events");
        assert_eq!(pusher, 803_640);
        assert_eq!(
            body_limit(&limits, "/v1/threads/t/events"),
            2 * 64 * 1024 + 64 * 1024
        );
        let refused = body_too_large("/apps/1/events", pusher);
        assert_eq!(
            (refused.status, refused.content_type),
            (413, ContentType::Text)
        );
        assert!(refused.body.starts_with("Payload too large"));
        let refused = body_too_large("/v1/threads", 10);
        assert_eq!(
            (refused.status, refused.content_type),
            (413, ContentType::Json)
        );
        assert_eq!(
            refused.body,
            r#"{"error":{"code":"payload_too_large","message":"Request body exceeds 10 bytes."}}"#
        );
        let refused = body_too_large("/api/apps/app-1/events", 10);
        assert_eq!(
            (refused.status, refused.content_type),
            (413, ContentType::Json)
        );
        assert_eq!(
            refused.body,
            r#"{"error":"Request body exceeds 10 bytes.","code":"payload_too_large"}"#
        );
    }
}
