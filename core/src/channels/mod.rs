//! Channels: the pubb protocol (public, private and presence channels,
//! signatures, HTTP publish with idempotency keys).

use crate::config::Config;
use crate::engine::{ChannelProtocol, Ctx, WsFrame};
use crate::http::{HttpRequest, HttpResponse};
use crate::ids::{ConnId, Millis, RequestId};

/// Apps, their sockets, channels, presence members and idempotency keys.
#[derive(Debug, Default)]
pub(crate) struct Channels {}

impl Channels {
    pub(crate) fn new(_config: &Config) -> Channels {
        Channels {}
    }

    /// Decides a `/socket` upgrade (SPEC §6 handshake errors).
    pub(crate) fn handshake(&self, _app_key: Option<&str>) -> Result<(), HttpResponse> {
        Ok(())
    }

    /// A socket opened: send `pubb:connection_established`.
    pub(crate) fn open(
        &mut self,
        _cx: &mut Ctx<'_>,
        _conn: ConnId,
        _app_key: &str,
        _protocol: ChannelProtocol,
    ) {
    }

    /// A client message.
    pub(crate) fn frame(&mut self, _cx: &mut Ctx<'_>, _conn: ConnId, _frame: WsFrame<'_>) {}

    /// The socket closed: leave every channel (presence removal included).
    pub(crate) fn closed(&mut self, _cx: &mut Ctx<'_>, _conn: ConnId) {}

    /// An `/api/apps/:appId/…` request.
    pub(crate) fn http(&mut self, _cx: &mut Ctx<'_>, _req: RequestId, _request: &HttpRequest<'_>) {}

    /// Timers: idempotency-key expiry.
    pub(crate) fn tick(&mut self, _cx: &mut Ctx<'_>) {}

    /// The next idempotency-key expiry.
    pub(crate) fn next_deadline(&self) -> Option<Millis> {
        None
    }
}
