//! The request edge: what a request means, decided once for every host.
//!
//! A host hands [`Edge::route`] the raw parts of a request (method, path and
//! query as they arrived, and the two headers that matter here) and gets a
//! typed [`Endpoint`]: an engine API request, one of the two WebSocket
//! upgrades with what its open needs, a host endpoint (health, readiness,
//! metrics, the page), or an [`HttpResponse`] to send at once. The native
//! server calls it from Rust, the JavaScript hosts through the wasm adapter;
//! neither restates a rule.
//!
//! Decisions:
//! - **Routes.** `/v1/threads…`, `/api/apps/:appId/…` and Pusher's
//!   `/apps/:appId/…` go to the engine, which answers their 404s and 405s
//!   itself. `GET <ws_path>` (default `/v1/ws`), `GET /socket` and Pusher's
//!   `GET /app/:key` with `Upgrade: websocket` are the sockets (any other
//!   path under `/app` is a Pusher socket that the engine refuses with
//!   4005, as Pusher does); without that header they answer `400` (plain text), with
//!   another method `405`. `GET`/`HEAD` of `/healthz`, `/readyz` and
//!   `/metrics` are the host endpoints. Any other `GET`/`HEAD` is the page
//!   (a host without one answers [`not_found`]); any other method is `405`.
//! - **Paths** are split on `/`, then each segment is percent-decoded on
//!   its own (`%2F` stays inside its segment). An invalid escape, a segment
//!   that is not UTF-8, or a `.`/`..` segment is `400 invalid_request`
//!   (see [`PathError`]).
//! - **Queries** are `application/x-www-form-urlencoded`, decoded strictly:
//!   an invalid escape refuses the request ([`BadQuery`]). An empty value
//!   is absent; a repeated name takes its last value.
//! - **Bearer**: `Bearer`, case-insensitive, one or more spaces, a token
//!   without whitespace (see [`bearer`]); a tab after `Bearer` is refused.
//!   The HTTP routes take it from `Authorization`; `/v1/ws` from
//!   `Authorization` when that holds a bearer, else from `?access_token=`.
//!   A missing or bad token still upgrades `/v1/ws`: the engine answers it
//!   with an `unauthorized` frame and close 1008.
//! - **`/socket`**: `appKey` and the `protocol=2` flag (anything else is
//!   the legacy acknowledgement) are read here into a [`ChannelsUpgrade`];
//!   [`Engine::channel_handshake`](crate::Engine::channel_handshake) turns
//!   it into an [`AcceptedHandshake`] or a plain-text refusal, and only an
//!   accepted handshake opens the socket.
//! - **`Content-Type`** of a request is not consulted: engine request
//!   bodies are JSON whatever the header says (`application/json`,
//!   `application/json; charset=utf-8`, none, or `curl -d`'s form type).
//!   The engine answers a body that is not JSON with `400`.
//! - **CORS** for the API routes: see [`Cors`]. A preflight (`OPTIONS`
//!   with `Origin` and `Access-Control-Request-Method`) of an API path is
//!   answered here; hosts add [`Edge::cors_headers`] to every other
//!   response.
//! - **`Origin` of WebSocket upgrades** (`/v1/ws`, `/socket`, `/app/:key`):
//!   with an allow-list configured ([`Edge::with_socket_origins`]), an
//!   upgrade whose `Origin` is not in it is answered [`origin_not_allowed`]
//!   (`403`, plain text `Origin not allowed.`) before anything else about
//!   the socket is decided. An upgrade without `Origin` (a non-browser
//!   client) is allowed. Without a list, any origin may upgrade.
//! - **Slow consumers**: see [`OutboundLimit`]: the frame that finds a
//!   socket's queue full is not sent, and the socket closes with 1013.
//! - **Time**: [`MonotonicNow`](crate::clock::MonotonicNow) clamps a host's
//!   wall clock so the engine never sees it go backwards.

mod answers;
mod bearer;
mod body;
mod cors;
mod handshake;
mod origins;
mod path;
mod query;
mod slow;

use std::borrow::Cow;

use crate::http::HttpResponse;
use path::PathOwner;

pub use crate::io::AcceptedHandshake;
pub use answers::{
    healthy, method_not_allowed, metrics, not_an_upgrade, not_found, not_ready, origin_not_allowed,
    ready,
};
pub use bearer::bearer;
pub use body::{
    body_limit, body_too_large, PUSHER_BATCH_EVENTS, PUSHER_CHANNEL_CHARS, PUSHER_EVENT_CHANNELS,
};
pub use cors::{
    Cors, Headers, InvalidCors, ALLOWED_HEADERS, ALLOWED_METHODS, DEFAULT_MAX_AGE_SECS,
    EXPOSED_HEADERS,
};
pub use handshake::ChannelsUpgrade;
pub use origins::{AllowedOrigins, InvalidOrigin};
pub use path::PathError;
pub use query::{BadQuery, Query};
pub use slow::{OutboundLimit, SlowConsumer, SLOW_CONSUMER_CLOSE};

pub(crate) use path::segments as path_segments;
pub(crate) use path::{channels_endpoint, engine_api, threads_segments, Api, ChannelsEndpoint};

/// The `/v1/ws` path when the host's config sets none.
pub const DEFAULT_WS_PATH: &str = "/v1/ws";

/// The raw parts of a request that the edge reads. Borrowed from the host.
#[derive(Debug, Clone, Copy, Default)]
pub struct RequestHead<'a> {
    /// The method, e.g. `GET` (case-sensitive, as HTTP methods are).
    pub method: &'a str,
    /// The path as it arrived, still percent-encoded, e.g. `/v1/threads/t%2D1`.
    pub path: &'a str,
    /// The query as it arrived, without `?` (may be empty).
    pub query: &'a str,
    /// The `Authorization` header, if any.
    pub authorization: Option<&'a str>,
    /// The `Upgrade` header, if any.
    pub upgrade: Option<&'a str>,
    /// The `Origin` header, if any.
    pub origin: Option<&'a str>,
    /// The `Access-Control-Request-Method` header, if any.
    pub access_control_request_method: Option<&'a str>,
    /// The `Access-Control-Request-Headers` header, if any.
    pub access_control_request_headers: Option<&'a str>,
}

impl RequestHead<'_> {
    /// A CORS preflight: `OPTIONS` with `Origin` and
    /// `Access-Control-Request-Method`.
    fn is_preflight(&self) -> bool {
        self.method == "OPTIONS"
            && self.origin.is_some()
            && self.access_control_request_method.is_some()
    }
}

/// What a request is, decided by [`Edge::route`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// `/v1/threads…`, `/api/apps/…` or `/apps/…`: hand it to the engine as
    /// [`Input::Http`](crate::Input::Http), with the raw path and query.
    Engine,
    /// The `/v1/ws` upgrade, with its bearer token (`None`: no token).
    ThreadsSocket {
        /// The token, from `Authorization` or `?access_token=`.
        token: Option<String>,
    },
    /// The `/socket` or `/app/:key` upgrade: decide it with
    /// [`Engine::channel_handshake`](crate::Engine::channel_handshake).
    ChannelsSocket(ChannelsUpgrade),
    /// `GET /healthz`: answer [`healthy`].
    Health,
    /// `GET /readyz`: answer [`ready`] or [`not_ready`].
    Ready,
    /// `GET /metrics`: answer [`metrics`].
    Metrics,
    /// Any other `GET`/`HEAD`: a file of the page, or [`not_found`].
    Page,
    /// Answer this at once.
    Answer(HttpResponse),
}

/// A `ws_path` that cannot be the `/v1/ws` endpoint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "ws_path {0:?} must be a plain path starting with '/', other than / /socket /healthz \
     /readyz /metrics and not under /v1/threads, /api/apps, /app or /apps"
)]
pub struct InvalidWsPath(pub String);

/// The routes of one host: every fixed path plus its configured `ws_path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    ws_path: String,
    ws_segments: Vec<String>,
    cors: Option<Cors>,
    socket_origins: Option<AllowedOrigins>,
}

impl Default for Edge {
    fn default() -> Edge {
        Edge {
            ws_path: DEFAULT_WS_PATH.to_owned(),
            ws_segments: vec!["v1".into(), "ws".into()],
            cors: None,
            socket_origins: None,
        }
    }
}

impl Edge {
    /// The routes with `/v1/ws` at `ws_path`.
    pub fn new(ws_path: &str) -> Result<Edge, InvalidWsPath> {
        let invalid = || InvalidWsPath(ws_path.to_owned());
        if !ws_path.starts_with('/') || ws_path.contains(['?', '#']) {
            return Err(invalid());
        }
        let segments = path::segments(ws_path).map_err(|_| invalid())?;
        let names: Vec<&str> = segments.iter().map(Cow::as_ref).collect();
        if matches!(
            names[..],
            ["v1", "threads", ..]
                | ["api", "apps", ..]
                | ["app", ..]
                | ["apps", ..]
                | [""]
                | ["socket"]
                | ["healthz"]
                | ["readyz"]
                | ["metrics"]
        ) {
            return Err(invalid());
        }
        Ok(Edge {
            ws_path: ws_path.to_owned(),
            ws_segments: segments.into_iter().map(Cow::into_owned).collect(),
            ..Edge::default()
        })
    }

    /// These routes, with CORS for the API routes.
    #[must_use]
    pub fn with_cors(self, cors: Cors) -> Edge {
        Edge {
            cors: Some(cors),
            ..self
        }
    }

    /// These routes, upgrading only sockets from `origins` (or without an
    /// `Origin` header).
    #[must_use]
    pub fn with_socket_origins(self, origins: AllowedOrigins) -> Edge {
        Edge {
            socket_origins: Some(origins),
            ..self
        }
    }

    /// The CORS headers a host adds to its response to `request`, whatever
    /// answered it (the engine, or the host itself: `413`, `503`). Empty
    /// unless it is an API request and CORS is configured; a preflight
    /// answered by [`Edge::route`] has its headers already.
    pub fn cors_headers(&self, request: &RequestHead<'_>) -> Headers {
        match &self.cors {
            Some(cors) if !request.is_preflight() && is_api(request.path) => {
                cors.actual_headers(request.origin)
            }
            _ => Headers::new(),
        }
    }

    /// The `/v1/ws` endpoint's path.
    pub fn ws_path(&self) -> &str {
        &self.ws_path
    }

    /// A request to an engine API: the engine's, unless it is a CORS
    /// preflight, which the edge answers.
    fn engine_or_preflight(&self, request: &RequestHead<'_>) -> Endpoint {
        match (request.is_preflight(), &self.cors) {
            (false, _) => Endpoint::Engine,
            (true, Some(cors)) => Endpoint::Answer(cors.preflight(
                request.origin.unwrap_or_default(),
                request.access_control_request_method.unwrap_or_default(),
                request.access_control_request_headers,
            )),
            (true, None) => {
                Endpoint::Answer(cors::refused("Cross-origin requests are not allowed here."))
            }
        }
    }

    /// What `request` is.
    pub fn route(&self, request: &RequestHead<'_>) -> Endpoint {
        // An engine API's path is the engine's to split; any other is
        // split here, once it is known to be valid.
        let segments = match path::owner_of_path(request.path) {
            Ok(PathOwner::Host(segments)) => segments,
            Ok(PathOwner::Engine) => return self.engine_or_preflight(request),
            Err(err) => return Endpoint::Answer(answers::bad_path(err)),
        };
        let read = matches!(request.method, "GET" | "HEAD");
        let host_endpoint = |endpoint| {
            if read {
                endpoint
            } else {
                Endpoint::Answer(method_not_allowed())
            }
        };
        if segments
            .iter()
            .map(Cow::as_ref)
            .eq(self.ws_segments.iter().map(String::as_str))
        {
            return self.socket(request, Socket::Threads);
        }
        match segments.iter().map(Cow::as_ref).collect::<Vec<&str>>()[..] {
            ["socket"] => self.socket(request, Socket::Channels),
            ["app", key] if !key.is_empty() => self.socket(request, Socket::Pusher(Some(key))),
            ["app", ..] => self.socket(request, Socket::Pusher(None)),
            ["healthz"] => host_endpoint(Endpoint::Health),
            ["readyz"] => host_endpoint(Endpoint::Ready),
            ["metrics"] => host_endpoint(Endpoint::Metrics),
            _ => host_endpoint(Endpoint::Page),
        }
    }
}

/// Whether `raw` is a path of an engine API.
fn is_api(raw: &str) -> bool {
    path::api_of_path(raw).is_ok_and(|api| api.is_some())
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Socket<'a> {
    Threads,
    Channels,
    /// `/app/:key`, with the key; any other path under `/app` without one
    /// (Pusher upgrades it, then refuses it with 4005).
    Pusher(Option<&'a str>),
}

/// Whether an `Upgrade` header value asks for a WebSocket.
fn is_websocket(upgrade: Option<&str>) -> bool {
    upgrade.is_some_and(|v| {
        v.split(',')
            .any(|t| t.trim().eq_ignore_ascii_case("websocket"))
    })
}

impl Edge {
    fn socket(&self, request: &RequestHead<'_>, kind: Socket<'_>) -> Endpoint {
        if request.method != "GET" {
            return Endpoint::Answer(method_not_allowed());
        }
        if !is_websocket(request.upgrade) {
            return Endpoint::Answer(not_an_upgrade());
        }
        if let (Some(allowed), Some(origin)) = (&self.socket_origins, request.origin) {
            if !allowed.allows(origin) {
                return Endpoint::Answer(origin_not_allowed());
            }
        }
        let Ok(query) = Query::parse(request.query) else {
            return Endpoint::Answer(answers::bad_query(kind != Socket::Threads));
        };
        match kind {
            Socket::Threads => Endpoint::ThreadsSocket {
                token: bearer::socket_token(request.authorization, &query),
            },
            Socket::Channels => Endpoint::ChannelsSocket(ChannelsUpgrade::from_query(&query)),
            Socket::Pusher(key) => Endpoint::ChannelsSocket(ChannelsUpgrade::pusher(key, &query)),
        }
    }
}

#[cfg(test)]
mod tests;
