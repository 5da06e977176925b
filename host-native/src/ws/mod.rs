//! The two WebSocket endpoints: `/v1/ws` (threads) and `/socket` (channels).

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use bubble_core::ChannelProtocol;
use tokio::sync::oneshot;

pub(crate) mod frame;
mod gate;
mod io;
mod socket;
mod upgrade;

use crate::driver::Command;
use crate::http::{respond, unavailable, Host};
use socket::Open;
use upgrade::Upgrade;

/// The first value of query parameter `name`, percent-decoded.
fn query_param(req: &Request, name: &str) -> Option<String> {
    let query = req.uri().query()?;
    form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
}

/// Upgrades `req` and runs the socket on a tracked task.
fn upgrade(mut req: Request, host: Arc<Host>, open: Open, max_message: usize) -> Response {
    let upgrade = match Upgrade::from_request(&mut req) {
        Ok(upgrade) => upgrade,
        Err(refusal) => return refusal.into_response(),
    };
    // The protocol layer refuses what is far over the limit without reading
    // it; between the limit and the hard bound the socket closes with 1009
    // after reading the message.
    let hard_bound = max_message.saturating_mul(2).saturating_add(64 * 1024);
    let (response, socket) = upgrade.accept(hard_bound);
    let tracker = host.sockets.clone();
    tracker.spawn(async move {
        match socket.await {
            Ok(ws) => socket::run(ws, host, open, max_message).await,
            Err(e) => tracing::info!(error = %e, "websocket upgrade failed"),
        }
    });
    response
}

/// `GET /v1/ws`: the bearer comes from `Authorization` or `?access_token=`
/// (browsers cannot set headers). The upgrade is always accepted; the engine
/// answers a bad token with an `unauthorized` frame and close 1008.
pub(crate) async fn threads(State(host): State<Arc<Host>>, req: Request) -> Response {
    let header_token = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| bubble_core::auth::bearer(Some(v)).ok())
        .map(str::to_owned);
    let token = header_token.or_else(|| query_param(&req, "access_token"));
    let max = host.limits.max_ws_frame_bytes;
    upgrade(req, host, Open::Threads { token }, max)
}

/// `GET /socket?appKey=…&protocol=2`: the engine decides the handshake
/// first; a refusal is a plain-text HTTP answer instead of an upgrade.
pub(crate) async fn channels(State(host): State<Arc<Host>>, req: Request) -> Response {
    let app_key = query_param(&req, "appKey");
    let protocol = match query_param(&req, "protocol").as_deref() {
        Some("2") => ChannelProtocol::V2,
        _ => ChannelProtocol::Legacy,
    };
    let (reply, decided) = oneshot::channel();
    let asked = Command::Handshake {
        app_key: app_key.clone(),
        reply,
    };
    if host.inbox.send(asked).await.is_err() {
        return unavailable();
    }
    match decided.await {
        Ok(Ok(())) => {}
        Ok(Err(refusal)) => return respond(refusal),
        Err(_) => return unavailable(),
    }
    let Some(app_key) = app_key else {
        // The engine accepted a handshake without a key; nothing to open.
        return (axum::http::StatusCode::BAD_REQUEST, "Missing appKey.").into_response();
    };
    let max = host.limits.max_channel_message_bytes;
    upgrade(req, host, Open::Channels { app_key, protocol }, max)
}
