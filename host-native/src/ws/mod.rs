//! The two WebSocket endpoints: `/v1/ws` (threads) and `/socket` (channels).

use std::sync::Arc;

use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use bubble_core::edge::{ChannelsUpgrade, OutboundLimit};
use tokio::sync::oneshot;

mod direct;
pub(crate) mod frame;
mod gate;
mod io;
mod socket;
mod upgrade;

use crate::driver::conn::ConnHandle;
use crate::driver::Command;
use crate::http::{respond, unavailable, Host};
pub(crate) use direct::{send_now, Accepting, Peer, Sent};
use socket::Open;
use upgrade::{Refusal, Upgrade};

/// Upgrades `req` and runs the socket on a tracked task.
fn upgrade(mut req: Request, host: Arc<Host>, open: Open, max_message: usize) -> Response {
    let upgrade = match Upgrade::from_request(&mut req) {
        Ok(upgrade) => upgrade,
        Err(refusal) => return refusal.into_response(),
    };
    let Some(fd) = direct::own_fd(&req) else {
        return Refusal::NotUpgradable.into_response();
    };
    let (handle, queue) = ConnHandle::new(OutboundLimit::new(&host.limits), fd);
    // The protocol layer refuses what is far over the limit without reading
    // it; between the limit and the hard bound the socket closes with 1009
    // after reading the message.
    let hard_bound = max_message.saturating_mul(2).saturating_add(64 * 1024);
    let (response, socket) = upgrade.accept(hard_bound, queue.clone());
    let tracker = host.sockets.clone();
    tracker.spawn(async move {
        match socket.await {
            Ok(ws) => socket::run(ws, host, open, max_message, handle, queue).await,
            Err(e) => tracing::info!(error = %e, "websocket upgrade failed"),
        }
    });
    response
}

/// `GET /v1/ws`, with the bearer the edge read (from `Authorization` or
/// `?access_token=`). The upgrade is always accepted; the engine answers a
/// bad token with an `unauthorized` frame and close 1008.
pub(crate) fn threads(host: Arc<Host>, req: Request, token: Option<String>) -> Response {
    let max = host.limits.max_ws_frame_bytes;
    upgrade(req, host, Open::Threads { token }, max)
}

/// `GET /socket?appKey=…&protocol=2`: the engine decides the handshake
/// first; a refusal is a plain-text HTTP answer instead of an upgrade.
pub(crate) async fn channels(host: Arc<Host>, req: Request, request: ChannelsUpgrade) -> Response {
    let (reply, decided) = oneshot::channel();
    if host
        .inbox
        .send(Command::Handshake { request, reply })
        .await
        .is_err()
    {
        return unavailable();
    }
    let handshake = match decided.await {
        Ok(Ok(handshake)) => handshake,
        Ok(Err(refusal)) => return respond(refusal),
        Err(_) => return unavailable(),
    };
    let max = host.limits.max_channel_message_bytes;
    upgrade(req, host, Open::Channels { handshake }, max)
}
