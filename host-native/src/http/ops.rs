//! Health, readiness and metrics.

use std::time::Duration;

use axum::response::Response;
use bubble_core::edge;
use tokio::sync::oneshot;

use super::{respond, Host};
use crate::driver::Command;

/// How long readiness waits for the engine task and the store.
const READY_TIMEOUT: Duration = Duration::from_secs(2);

/// `GET /healthz`: the process is up.
pub(super) fn healthz() -> Response {
    respond(edge::healthy())
}

fn not_ready(why: &str) -> Response {
    respond(edge::not_ready(why))
}

/// `GET /readyz`: the engine task answers, the store answers a query and,
/// in a cluster, the broker is connected and this node's probes come back
/// through its pub/sub connection.
pub(super) async fn readyz(host: &Host) -> Response {
    let (reply, answered) = oneshot::channel();
    if host.inbox.send(Command::Ready { reply }).await.is_err() {
        return not_ready("the engine is stopped");
    }
    if !matches!(
        tokio::time::timeout(READY_TIMEOUT, answered).await,
        Ok(Ok(()))
    ) {
        return not_ready("the engine does not answer");
    }
    if let Some(problem) = host.broker.as_ref().and_then(|b| b.problem()) {
        return not_ready(problem);
    }
    let probe = host.probe.clone();
    let checked = tokio::time::timeout(
        READY_TIMEOUT,
        tokio::task::spawn_blocking(move || probe.check()),
    );
    match checked.await {
        Ok(Ok(Ok(()))) => respond(edge::ready()),
        Ok(Ok(Err(e))) => {
            tracing::warn!(error = %e, "readiness probe failed");
            not_ready("the store does not answer")
        }
        _ => not_ready("the store does not answer"),
    }
}

/// `GET /metrics`: Prometheus text exposition.
pub(super) async fn metrics(host: &Host) -> Response {
    let (reply, rendered) = oneshot::channel();
    if host.inbox.send(Command::Metrics { reply }).await.is_err() {
        return super::unavailable();
    }
    match rendered.await {
        Ok(mut text) => {
            if let Some(broker) = &host.broker {
                broker.render(&mut text);
            }
            respond(edge::metrics(text))
        }
        Err(_) => super::unavailable(),
    }
}
