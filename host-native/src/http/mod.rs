//! The HTTP surface: every request goes through the core's request edge,
//! which says what it is (an engine route, a WebSocket upgrade, health,
//! readiness, metrics, the web page, or an answer to send at once); this
//! module only carries out that decision. The page is built into the
//! binary (see [`page`]).

use std::convert::Infallible;
use std::future::{Future, Ready};
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::serve::IncomingStream;
use bubble_core::edge::{Edge, Endpoint, RequestHead};
use bubble_core::http::{HttpResponse, Method};
use bubble_core::{BubbleError, ConnId, Limits};
use bytes::{Bytes, BytesMut};
use http_body_util::BodyExt as _;
use tokio::sync::{mpsc, oneshot};
use tokio_util::task::TaskTracker;
use tower::ServiceExt as _;
use tower_http::services::ServeDir;

use crate::cluster::Health;
use crate::driver::table::ConnIds;
use crate::driver::{Command, OwnedRequest};
use crate::store::Probe;
use crate::ws::{Accepting, Peer};

mod ops;
mod page;

/// What every handler shares.
pub(crate) struct Host {
    /// The engine's inbox.
    pub(crate) inbox: mpsc::Sender<Command>,
    /// What each request is.
    edge: Edge,
    /// The engine's limits (queue and message sizes).
    pub(crate) limits: Limits,
    /// Readiness probe of the store.
    pub(crate) probe: Probe,
    /// The broker's health and counters, in cluster mode.
    pub(crate) broker: Option<Arc<Health>>,
    /// Socket tasks, awaited at shutdown.
    pub(crate) sockets: TaskTracker,
    /// A directory served at `/` instead of the built-in page (`--www`).
    pub(crate) www: Option<PathBuf>,
    /// Where socket ids come from (shared with the engine task's table).
    conn_ids: Arc<ConnIds>,
}

impl Host {
    /// Shared state for the handlers.
    pub(crate) fn new(
        inbox: mpsc::Sender<Command>,
        edge: Edge,
        limits: Limits,
        probe: Probe,
        broker: Option<Arc<Health>>,
        www: Option<PathBuf>,
        conn_ids: Arc<ConnIds>,
    ) -> Host {
        Host {
            inbox,
            edge,
            limits,
            probe,
            broker,
            sockets: TaskTracker::new(),
            www,
            conn_ids,
        }
    }

    /// An id for a new socket: none that the engine may still know.
    pub(crate) fn next_conn(&self) -> ConnId {
        self.conn_ids.next()
    }
}

/// Makes each accepted connection's [`Requests`].
#[derive(Clone)]
pub(crate) struct Connections {
    host: Arc<Host>,
}

impl Connections {
    /// Every connection's requests go to `host`.
    pub(crate) fn new(host: Arc<Host>) -> Connections {
        Connections { host }
    }
}

impl tower::Service<IncomingStream<'_, Accepting>> for Connections {
    type Response = Requests;
    type Error = Infallible;
    type Future = Ready<Result<Requests, Infallible>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, stream: IncomingStream<'_, Accepting>) -> Self::Future {
        std::future::ready(Ok(Requests {
            host: self.host.clone(),
            peer: stream.remote_addr().clone(),
        }))
    }
}

/// One connection's requests, each carried out as the edge decides: the
/// edge is the only router, so no router stands between hyper and it.
#[derive(Clone)]
pub(crate) struct Requests {
    host: Arc<Host>,
    /// The connection, for a socket's own descriptor after an upgrade.
    peer: Peer,
}

impl tower::Service<Request> for Requests {
    type Response = Response;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, mut req: Request) -> Self::Future {
        req.extensions_mut().insert(self.peer.clone());
        let host = self.host.clone();
        Box::pin(async move {
            Ok(
                if tracing::enabled!(target: "bubble::http", tracing::Level::DEBUG) {
                    logged(host, req).await
                } else {
                    serve(host, req).await
                },
            )
        })
    }
}

/// Writes the engine's response.
pub(crate) fn respond(response: HttpResponse) -> Response {
    let status = StatusCode::from_u16(response.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let empty = response.body.is_empty() && status == StatusCode::NO_CONTENT;
    let mut out = Response::new(Body::from(response.body));
    *out.status_mut() = status;
    if !empty {
        out.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static(response.content_type.as_str()),
        );
    }
    if let Some(seconds) = response.retry_after {
        out.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    add_headers(&mut out, response.headers);
    out
}

/// Appends headers the core decided (CORS); values it could not have
/// produced as header values are skipped.
fn add_headers(response: &mut Response, headers: Vec<(&'static str, String)>) {
    for (name, value) in headers {
        if let Ok(value) = HeaderValue::try_from(value) {
            response
                .headers_mut()
                .append(header::HeaderName::from_static(name), value);
        }
    }
}

/// `503 unavailable`: the engine task is gone (shutting down).
pub(crate) fn unavailable() -> Response {
    respond(HttpResponse::error(&BubbleError::Unavailable(
        "The server is shutting down.".into(),
    )))
}

fn header_string(req: &axum::http::request::Parts, name: header::HeaderName) -> Option<String> {
    req.headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
}

/// A header's value however it is spelled: bytes that are not UTF-8 become
/// U+FFFD. For headers the engine validates itself (`Idempotency-Key`), so a
/// malformed value is refused there instead of passing for a missing header.
fn header_lossy(req: &axum::http::request::Parts, name: header::HeaderName) -> Option<String> {
    req.headers
        .get(name)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
}

/// Carries out what the edge decides `req` is, with the CORS headers it
/// decides for the response.
async fn serve(host: Arc<Host>, req: Request) -> Response {
    let (endpoint, cors) = route(&host.edge, &req);
    let mut response = endpoint_response(host, req, endpoint).await;
    add_headers(&mut response, cors);
    response
}

async fn endpoint_response(host: Arc<Host>, req: Request, endpoint: Endpoint) -> Response {
    match endpoint {
        Endpoint::Engine => engine_route(host, req).await,
        Endpoint::ThreadsSocket { token } => crate::ws::threads(host, req, token),
        Endpoint::ChannelsSocket(upgrade) => crate::ws::channels(host, req, upgrade).await,
        Endpoint::Health => ops::healthz(),
        Endpoint::Ready => ops::readyz(&host).await,
        Endpoint::Metrics => ops::metrics(&host).await,
        Endpoint::Page => static_file(&host, req).await,
        Endpoint::Answer(answer) => respond(answer),
    }
}

fn route(edge: &Edge, req: &Request) -> (Endpoint, bubble_core::edge::Headers) {
    let header = |name| req.headers().get(name).and_then(|v| v.to_str().ok());
    let head = RequestHead {
        method: req.method().as_str(),
        path: req.uri().path(),
        query: req.uri().query().unwrap_or_default(),
        authorization: header(header::AUTHORIZATION),
        upgrade: header(header::UPGRADE),
        origin: header(header::ORIGIN),
        access_control_request_method: header(header::ACCESS_CONTROL_REQUEST_METHOD),
        access_control_request_headers: header(header::ACCESS_CONTROL_REQUEST_HEADERS),
    };
    (edge.route(&head), edge.cors_headers(&head))
}

/// Bytes of an oversized body read and discarded before answering 413, so
/// the client is not reset while it is still sending.
const DRAIN_LIMIT: usize = 32 * 1024 * 1024;

/// Why a body was not read.
enum BodyError {
    /// Over the limit.
    TooLarge,
    /// The transport failed.
    Unreadable,
}

/// Reads `body` up to `limit` bytes; past it, drains up to [`DRAIN_LIMIT`].
async fn read_body(mut body: Body, limit: usize) -> Result<Bytes, BodyError> {
    let mut buf = BytesMut::new();
    let mut seen = 0usize;
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.map_err(|_| BodyError::Unreadable)?.into_data() else {
            continue;
        };
        seen = seen.saturating_add(data.len());
        if seen > DRAIN_LIMIT {
            break;
        }
        if seen <= limit {
            buf.extend_from_slice(&data);
        }
    }
    if seen > limit {
        Err(BodyError::TooLarge)
    } else {
        Ok(buf.freeze())
    }
}

async fn engine_route(host: Arc<Host>, req: Request) -> Response {
    let limit = bubble_core::edge::body_limit(&host.limits, req.uri().path());
    let (parts, body) = req.into_parts();
    let too_large = |limit| respond(bubble_core::edge::body_too_large(parts.uri.path(), limit));
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > DRAIN_LIMIT as u64) {
        return too_large(limit);
    }
    let body = match read_body(body, limit).await {
        Ok(body) => body,
        Err(BodyError::TooLarge) => return too_large(limit),
        Err(BodyError::Unreadable) => {
            return respond(HttpResponse::error(&BubbleError::InvalidRequest(
                "The request body could not be read.".into(),
            )))
        }
    };
    let request = OwnedRequest {
        method: Method::parse(parts.method.as_str()),
        path: parts.uri.path().to_owned(),
        query: parts.uri.query().unwrap_or_default().to_owned(),
        authorization: header_string(&parts, header::AUTHORIZATION),
        idempotency_key: header_lossy(&parts, header::HeaderName::from_static("idempotency-key")),
        body,
    };
    let (reply, response) = oneshot::channel();
    if let Some((request, reply)) = crate::driver::here(request, reply) {
        if host
            .inbox
            .send(Command::Http { request, reply })
            .await
            .is_err()
        {
            return unavailable();
        }
    }
    match response.await {
        Ok(response) => respond(response),
        Err(_) => unavailable(),
    }
}

/// A file of the web page, or the edge's `404`.
async fn static_file(host: &Host, req: Request) -> Response {
    match &host.www {
        Some(dir) => match ServeDir::new(dir).oneshot(req).await {
            Ok(response) if response.status() == StatusCode::NOT_FOUND => {
                respond(bubble_core::edge::not_found())
            }
            Ok(response) => response.into_response(),
            Err(never) => match never {},
        },
        None => match page::serve(req.method(), req.uri().path(), req.headers()) {
            response if response.status() == StatusCode::NOT_FOUND => {
                respond(bubble_core::edge::not_found())
            }
            response => response,
        },
    }
}

/// [`serve`] with one log line per request: method, path (never the
/// query, which may carry `access_token`), status and duration.
async fn logged(host: Arc<Host>, req: Request) -> Response {
    let started = Instant::now();
    let method = req.method().clone();
    let path = req.uri().path().to_owned();
    let response = serve(host, req).await;
    tracing::debug!(
        target: "bubble::http",
        %method,
        path,
        status = response.status().as_u16(),
        micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
        "request"
    );
    response
}
