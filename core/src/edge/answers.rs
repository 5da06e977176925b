//! The answers the edge gives itself, and the bodies of the host-level
//! endpoints, so that every host answers them alike.

use crate::http::{ContentType, HttpResponse};
use crate::BubbleError;

use super::path::PathError;
use super::query::BadQuery;

/// `404`: no endpoint and no page at this path.
pub fn not_found() -> HttpResponse {
    HttpResponse::text(404, "Not found")
}

/// `405`: the endpoint exists, not with this method.
pub fn method_not_allowed() -> HttpResponse {
    HttpResponse::text(405, "Method not allowed")
}

/// `400`: a WebSocket endpoint asked for without `Upgrade: websocket`.
pub fn not_an_upgrade() -> HttpResponse {
    HttpResponse::text(400, "Expected a WebSocket upgrade request.")
}

/// `200 ok`: `GET /healthz`, the process is up.
pub fn healthy() -> HttpResponse {
    HttpResponse::text(200, "ok")
}

/// `200 ready`: `GET /readyz`, the engine and the store answer.
pub fn ready() -> HttpResponse {
    HttpResponse::text(200, "ready")
}

/// `503`: `GET /readyz` when something does not answer (`why`).
pub fn not_ready(why: &str) -> HttpResponse {
    HttpResponse::text(503, format!("not ready: {why}"))
}

/// `200`: `GET /metrics`, Prometheus text exposition.
pub fn metrics(text: String) -> HttpResponse {
    HttpResponse {
        content_type: ContentType::Metrics,
        ..HttpResponse::text(200, text)
    }
}

/// `403`: a WebSocket upgrade from an `Origin` the deployment does not allow.
pub fn origin_not_allowed() -> HttpResponse {
    HttpResponse::text(403, "Origin not allowed.")
}

/// `400 invalid_request`: a path that is not validly percent-encoded.
pub(crate) fn bad_path(err: PathError) -> HttpResponse {
    HttpResponse::error(&BubbleError::from(err))
}

/// `400 invalid_request`: an upgrade whose query is not validly encoded
/// (plain text on `/socket`, whose handshake errors are plain text).
pub(crate) fn bad_query(plain_text: bool) -> HttpResponse {
    if plain_text {
        HttpResponse::text(400, BadQuery.to_string())
    } else {
        HttpResponse::error(&BubbleError::from(BadQuery))
    }
}
