//! Threads: durable append-only event streams, their HTTP routes and the
//! `/v1/ws` connection state machine.

use crate::auth::AuthError;
use crate::config::Config;
use crate::engine::{Ctx, Misuse, WsFrame};
use crate::http::HttpRequest;
use crate::ids::{BatchId, ConnId, PrincipalId, RequestId};
use crate::store::{EventStore, Snapshot};

/// Every thread's metadata, pending (not yet durable) events, and the
/// `/v1/ws` connections with their subscriptions.
#[derive(Debug, Default)]
pub(crate) struct Threads {}

impl Threads {
    pub(crate) fn new(_snapshot: Snapshot, _config: &Config) -> Result<Threads, Misuse> {
        Ok(Threads {})
    }

    /// A `/v1/ws` socket opened; a refused principal gets one unscoped
    /// `unauthorized` error, then close 1008.
    pub(crate) fn open(
        &mut self,
        _cx: &mut Ctx<'_>,
        _conn: ConnId,
        _principal: Result<PrincipalId, AuthError>,
    ) {
    }

    /// A client frame on a `/v1/ws` socket.
    pub(crate) fn frame(
        &mut self,
        _cx: &mut Ctx<'_>,
        _store: &dyn EventStore,
        _conn: ConnId,
        _frame: WsFrame<'_>,
    ) {
    }

    /// The socket's queue drained: continue backlog replay.
    pub(crate) fn drained(&mut self, _cx: &mut Ctx<'_>, _store: &dyn EventStore, _conn: ConnId) {}

    /// The socket closed: drop its subscriptions.
    pub(crate) fn closed(&mut self, _cx: &mut Ctx<'_>, _conn: ConnId) {}

    /// A `/v1/threads…` request.
    pub(crate) fn http(
        &mut self,
        _cx: &mut Ctx<'_>,
        _store: &dyn EventStore,
        _req: RequestId,
        _principal: Result<PrincipalId, AuthError>,
        _request: &HttpRequest<'_>,
    ) {
    }

    /// Batches up to `batch` are durable: pending events become history.
    pub(crate) fn persisted(&mut self, _batch: BatchId) {}
}
