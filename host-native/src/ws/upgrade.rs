//! The WebSocket opening handshake (RFC 6455 §4.2), done by hand so the
//! socket task owns the raw connection: after sending a Close frame it can
//! half-close and drain what the peer still sends, so the peer reads the
//! Close frame instead of a connection reset.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::{Role, WebSocketConfig};
use tokio_tungstenite::WebSocketStream;

use super::io::WsIo;
use crate::driver::conn::Outbound;

/// Read buffer of one socket, in bytes. The protocol layer zero-fills it
/// on every read attempt, which happens on every wake of the socket's task:
/// small keeps idle sockets cheap and fan-out fast; a large client message
/// just takes more reads.
const READ_BUFFER: usize = 2 * 1024;

/// An upgraded server-side WebSocket.
pub(crate) type Socket = WebSocketStream<WsIo>;

/// A request that can be upgraded, and how to answer it.
pub(crate) struct Upgrade {
    accept: String,
    on_upgrade: OnUpgrade,
}

fn has_token(headers: &HeaderMap, name: header::HeaderName, token: &str) -> bool {
    headers.get_all(name).iter().any(|v| {
        v.to_str()
            .is_ok_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
    })
}

/// Why a request cannot be upgraded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Not a WebSocket upgrade request (no `Connection: upgrade`).
    NotUpgrade,
    /// A `Sec-WebSocket-Version` other than 13.
    Version,
    /// No `Sec-WebSocket-Key`.
    MissingKey,
    /// The connection cannot be taken over (e.g. HTTP/2).
    NotUpgradable,
}

impl IntoResponse for Refusal {
    fn into_response(self) -> Response {
        let (status, message) = match self {
            Refusal::NotUpgrade => return crate::http::respond(bubble_core::edge::not_an_upgrade()),
            Refusal::Version => (
                StatusCode::UPGRADE_REQUIRED,
                "Unsupported Sec-WebSocket-Version.",
            ),
            Refusal::MissingKey => (StatusCode::BAD_REQUEST, "Missing Sec-WebSocket-Key."),
            Refusal::NotUpgradable => (
                StatusCode::BAD_REQUEST,
                "This connection cannot be upgraded.",
            ),
        };
        let mut response = (
            status,
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            message,
        )
            .into_response();
        if self == Refusal::Version {
            response.headers_mut().insert(
                header::SEC_WEBSOCKET_VERSION,
                HeaderValue::from_static("13"),
            );
        }
        response
    }
}

impl Upgrade {
    /// Checks the handshake headers the edge leaves to the transport
    /// (`Upgrade: websocket` was checked by the edge).
    pub(crate) fn from_request(req: &mut Request) -> Result<Upgrade, Refusal> {
        let headers = req.headers();
        if !has_token(headers, header::CONNECTION, "upgrade") {
            return Err(Refusal::NotUpgrade);
        }
        if headers
            .get(header::SEC_WEBSOCKET_VERSION)
            .map(HeaderValue::as_bytes)
            != Some(b"13")
        {
            return Err(Refusal::Version);
        }
        let key = headers
            .get(header::SEC_WEBSOCKET_KEY)
            .ok_or(Refusal::MissingKey)?;
        let accept = derive_accept_key(key.as_bytes());
        let on_upgrade = req
            .extensions_mut()
            .remove::<OnUpgrade>()
            .ok_or(Refusal::NotUpgradable)?;
        Ok(Upgrade { accept, on_upgrade })
    }

    /// The `101 Switching Protocols` response, and the future socket
    /// (messages up to `max_message` bytes; larger ones fail to read)
    /// writing through `queue`.
    pub(crate) fn accept(
        self,
        max_message: usize,
        queue: Arc<Outbound>,
    ) -> (
        Response,
        impl std::future::Future<Output = Result<Socket, hyper::Error>>,
    ) {
        let mut response = Response::new(Body::empty());
        *response.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
        let headers = response.headers_mut();
        headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        if let Ok(accept) = HeaderValue::from_str(&self.accept) {
            headers.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
        }
        let config = WebSocketConfig::default()
            .read_buffer_size(READ_BUFFER)
            .max_message_size(Some(max_message))
            .max_frame_size(Some(max_message));
        let on_upgrade = self.on_upgrade;
        let socket = async move {
            let upgraded = on_upgrade.await?;
            Ok(WebSocketStream::from_raw_socket(
                WsIo::new(TokioIo::new(upgraded), queue),
                Role::Server,
                Some(config),
            )
            .await)
        };
        (response, socket)
    }
}
