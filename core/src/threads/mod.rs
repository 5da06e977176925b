//! Threads: durable append-only event streams, their HTTP routes and the
//! `/v1/ws` connection state machine.
//!
//! The engine keeps every thread's metadata in memory ([`state::Table`]):
//! rebuilt from the store's [`Snapshot`] at start-up, updated as soon as an
//! operation decides a write. Events appended but not yet durable are kept
//! as pending; history reads take durable seqs from the [`EventStore`] and
//! pending ones from memory. Every output that depends on a write is pushed
//! after the write, so the outbox fence releases it only once it is durable.

use std::collections::HashSet;

use crate::auth::AuthError;
use crate::config::Config;
use crate::engine::{Ctx, Misuse, WsFrame};
use crate::http::{HttpRequest, HttpResponse};
use crate::ids::{BatchId, ConnId, PrincipalId, RequestId};
use crate::store::{EventStore, Snapshot};

mod http;
mod ops;
mod query;
mod rules;
mod state;
mod ws;

use state::{Caller, Table};
use ws::conn::Sockets;

/// Every thread's metadata, pending (not yet durable) events, and the
/// `/v1/ws` connections with their subscriptions.
#[derive(Debug)]
pub(crate) struct Threads {
    admins: HashSet<PrincipalId>,
    table: Table,
    sockets: Sockets,
}

impl Threads {
    pub(crate) fn new(snapshot: Snapshot, config: &Config) -> Result<Threads, Misuse> {
        Ok(Threads {
            admins: config.admins.iter().cloned().collect(),
            table: Table::from_snapshot(snapshot)?,
            sockets: Sockets::default(),
        })
    }

    fn caller(&self, principal: PrincipalId) -> Caller {
        Caller {
            admin: self.admins.contains(&principal),
            principal,
        }
    }

    /// A `/v1/ws` socket opened; a refused principal gets one unscoped
    /// `unauthorized` error, then close 1008.
    pub(crate) fn open(
        &mut self,
        cx: &mut Ctx<'_>,
        conn: ConnId,
        principal: Result<PrincipalId, AuthError>,
    ) {
        match principal {
            Ok(principal) => {
                let caller = self.caller(principal);
                self.ws_open(cx, conn, caller);
            }
            Err(err) => ws::refuse(cx, conn, err),
        }
    }

    /// A client frame on a `/v1/ws` socket.
    pub(crate) fn frame(
        &mut self,
        cx: &mut Ctx<'_>,
        store: &dyn EventStore,
        conn: ConnId,
        frame: WsFrame<'_>,
    ) {
        self.ws_frame(cx, store, conn, frame);
    }

    /// The socket's queue drained: continue backlog replay.
    pub(crate) fn drained(&mut self, cx: &mut Ctx<'_>, store: &dyn EventStore, conn: ConnId) {
        self.ws_drained(cx, store, conn);
    }

    /// The socket closed: drop its subscriptions.
    pub(crate) fn closed(&mut self, cx: &mut Ctx<'_>, conn: ConnId) {
        self.ws_closed(cx, conn);
    }

    /// A `/v1/threads…` request.
    pub(crate) fn http(
        &mut self,
        cx: &mut Ctx<'_>,
        store: &dyn EventStore,
        req: RequestId,
        principal: Result<PrincipalId, AuthError>,
        request: &HttpRequest<'_>,
    ) {
        let caller = principal.map(|p| self.caller(p));
        let response = self
            .route(cx, store, caller, request)
            .unwrap_or_else(|err| {
                cx.metrics.count_error(err.code());
                HttpResponse::error(&err)
            });
        cx.out.push(crate::Output::Respond { req, response });
    }

    /// Batches up to `batch` are durable: pending events become history.
    pub(crate) fn persisted(&mut self, batch: BatchId) {
        self.table.persisted(batch.0);
    }
}

#[cfg(test)]
mod tests;
