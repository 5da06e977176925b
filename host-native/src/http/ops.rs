//! Health, readiness and metrics.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio::sync::oneshot;

use super::Host;
use crate::driver::Command;

/// How long readiness waits for the engine task and the store.
const READY_TIMEOUT: Duration = Duration::from_secs(2);

const TEXT: &str = "text/plain; charset=utf-8";

/// `GET /healthz`: the process is up.
pub(super) async fn healthz() -> Response {
    ([(header::CONTENT_TYPE, TEXT)], "ok").into_response()
}

fn not_ready(why: &str) -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        [(header::CONTENT_TYPE, TEXT)],
        format!("not ready: {why}"),
    )
        .into_response()
}

/// `GET /readyz`: the engine task answers and the store answers a query.
pub(super) async fn readyz(State(host): State<Arc<Host>>) -> Response {
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
    let probe = host.probe.clone();
    let checked = tokio::time::timeout(
        READY_TIMEOUT,
        tokio::task::spawn_blocking(move || probe.check()),
    );
    match checked.await {
        Ok(Ok(Ok(()))) => ([(header::CONTENT_TYPE, TEXT)], "ready").into_response(),
        Ok(Ok(Err(e))) => {
            tracing::warn!(error = %e, "readiness probe failed");
            not_ready("the store does not answer")
        }
        _ => not_ready("the store does not answer"),
    }
}

/// `GET /metrics`: Prometheus text exposition.
pub(super) async fn metrics(State(host): State<Arc<Host>>) -> Response {
    let (reply, rendered) = oneshot::channel();
    if host.inbox.send(Command::Metrics { reply }).await.is_err() {
        return super::unavailable();
    }
    match rendered.await {
        Ok(text) => (
            [(
                header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            text,
        )
            .into_response(),
        Err(_) => super::unavailable(),
    }
}
