//! The request edge for JavaScript: what a request is, the slow-consumer
//! decision and a monotonic clock, all decided by `bubble_core::edge`; the
//! JavaScript hosts only carry them out.

use bubble_core::edge::{
    self, AcceptedHandshake, AllowedOrigins, Cors, Edge, Endpoint, OutboundLimit, RequestHead,
};
use bubble_core::{Limits, Millis, MonotonicNow};
use js_sys::{Function, Reflect};
use serde::Deserialize;
use wasm_bindgen::prelude::*;
use wasm_bindgen::JsCast;

use crate::{js, WasmEngine};

#[wasm_bindgen(typescript_custom_section)]
const ROUTE_TYPES: &str = r#"
/** What a request is, from `Edge.routeRequest`. */
export type Route =
  /** `/v1/threads…`, `/api/apps/…` or Pusher's `/apps/…`: pass it to `Engine.handleHttp` with the raw path and query. */
  | { kind: "engine" }
  /** The `/v1/ws` upgrade, with its bearer (`null`: none). */
  | { kind: "threadsSocket"; token: string | null }
  /** The `/socket` or Pusher's `/app/:key` upgrade (`pusher`, with the `protocol` query as `version`): decide it with `Engine.channelHandshake(appKey, protocol2, pusher, version)`. */
  | { kind: "channelsSocket"; appKey: string | null; protocol2: boolean; pusher: boolean; version: string | null }
  | { kind: "health" }
  | { kind: "ready" }
  | { kind: "metrics" }
  /** A file of the page, or `Edge.notFound()` for a host without one. */
  | { kind: "page" }
  /** Answer this at once. */
  | ({ kind: "answer" } & HttpAnswer);
/** Every route may carry `cors`: headers to add to the answer the host gives it. */
export type RouteCors = { cors?: [string, string][] };

/** `Engine.channelHandshake`: the accepted handshake that `openChannels` consumes, or the refusal to answer. */
export type Handshake = { accepted: ChannelHandshake; refused?: undefined } | { accepted?: undefined; refused: HttpAnswer };
"#;

/// The keys of the JSON config the edge reads (the rest are the engine's).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct EdgeJson {
    ws_path: Option<String>,
    limits: Limits,
    cors: Option<CorsJson>,
    websocket: Option<WebsocketJson>,
}

/// `cors`: as `[cors]` in `bubble.toml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CorsJson {
    allowed_origins: Vec<String>,
    #[serde(default)]
    allow_credentials: bool,
    #[serde(default = "default_max_age")]
    max_age_secs: u64,
}

fn default_max_age() -> u64 {
    edge::DEFAULT_MAX_AGE_SECS
}

/// `websocket`: as `[websocket]` in `bubble.toml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WebsocketJson {
    allowed_origins: Vec<String>,
}

/// The request edge of one host, as a JavaScript class.
#[wasm_bindgen(js_name = Edge)]
pub struct WasmEdge {
    edge: Edge,
    outbound: OutboundLimit,
}

/// Reads header `name` from a `Headers` object (`get(name)`) or a plain
/// object keyed by lower-case names (Node's `IncomingMessage.headers`).
fn header(headers: &JsValue, name: &str) -> Option<String> {
    if !headers.is_object() {
        return None;
    }
    let get = Reflect::get(headers, &JsValue::from_str("get")).ok()?;
    let value = match get.dyn_ref::<Function>() {
        Some(get) => get.call1(headers, &JsValue::from_str(name)).ok()?,
        None => Reflect::get(headers, &JsValue::from_str(name)).ok()?,
    };
    value.as_string()
}

fn kind(name: &str) -> (&'static str, JsValue) {
    ("kind", JsValue::from_str(name))
}

fn route_object(endpoint: Endpoint) -> JsValue {
    let null_or = |s: Option<String>| s.map_or(JsValue::NULL, JsValue::from);
    match endpoint {
        Endpoint::Engine => js::object(&[kind("engine")]),
        Endpoint::ThreadsSocket { token } => {
            js::object(&[kind("threadsSocket"), ("token", null_or(token))])
        }
        Endpoint::ChannelsSocket(upgrade) => js::object(&[
            kind("channelsSocket"),
            ("appKey", null_or(upgrade.app_key)),
            (
                "protocol2",
                JsValue::from_bool(upgrade.protocol == bubble_core::ChannelProtocol::V2),
            ),
            (
                "pusher",
                JsValue::from_bool(upgrade.protocol == bubble_core::ChannelProtocol::Pusher),
            ),
            ("version", null_or(upgrade.version)),
        ]),
        Endpoint::Health => js::object(&[kind("health")]),
        Endpoint::Ready => js::object(&[kind("ready")]),
        Endpoint::Metrics => js::object(&[kind("metrics")]),
        Endpoint::Page => js::object(&[kind("page")]),
        Endpoint::Answer(response) => {
            let answer = js::response(response);
            let _ = Reflect::set(&answer, &"kind".into(), &"answer".into());
            answer
        }
    }
}

#[wasm_bindgen(js_class = Edge)]
impl WasmEdge {
    /// The edge of a host configured with `config` (the same JSON as the
    /// engine's; it reads `ws_path` and `limits`).
    #[wasm_bindgen(constructor)]
    pub fn new(config: &str) -> Result<WasmEdge, JsValue> {
        let c: EdgeJson =
            serde_json::from_str(config).map_err(|e| js::error("invalid_config", e))?;
        let invalid = |e: &dyn std::fmt::Display| js::error("invalid_config", e);
        let mut edge = match c.ws_path.as_deref() {
            Some(path) => Edge::new(path).map_err(|e| invalid(&e))?,
            None => Edge::default(),
        };
        if let Some(cors) = c.cors {
            let origins = AllowedOrigins::parse(&cors.allowed_origins).map_err(|e| invalid(&e))?;
            let cors = Cors::new(origins, cors.allow_credentials, cors.max_age_secs)
                .map_err(|e| invalid(&e))?;
            edge = edge.with_cors(cors);
        }
        if let Some(ws) = c.websocket {
            let origins = AllowedOrigins::parse(&ws.allowed_origins).map_err(|e| invalid(&e))?;
            edge = edge.with_socket_origins(origins);
        }
        Ok(WasmEdge {
            edge,
            outbound: OutboundLimit::new(&c.limits),
        })
    }

    /// The `/v1/ws` endpoint's path.
    #[wasm_bindgen(getter, js_name = wsPath)]
    pub fn ws_path(&self) -> String {
        self.edge.ws_path().to_owned()
    }

    /// What a request is: `method`, the raw `path` and `query` (without
    /// `?`) as they arrived, and its `headers` (a `Headers` or a plain
    /// object of lower-case names).
    #[wasm_bindgen(js_name = routeRequest, unchecked_return_type = "Route & RouteCors")]
    pub fn route_request(
        &self,
        method: &str,
        path: &str,
        query: &str,
        headers: JsValue,
    ) -> JsValue {
        let [authorization, upgrade, origin, acr_method, acr_headers] = [
            "authorization",
            "upgrade",
            "origin",
            "access-control-request-method",
            "access-control-request-headers",
        ]
        .map(|name| header(&headers, name));
        let head = RequestHead {
            method,
            path,
            query,
            authorization: authorization.as_deref(),
            upgrade: upgrade.as_deref(),
            origin: origin.as_deref(),
            access_control_request_method: acr_method.as_deref(),
            access_control_request_headers: acr_headers.as_deref(),
        };
        let route = route_object(self.edge.route(&head));
        let cors = self.edge.cors_headers(&head);
        if !cors.is_empty() {
            let _ = Reflect::set(&route, &"cors".into(), &js::header_pairs(cors));
        }
        route
    }

    /// Whether one more frame may go to a socket with `outstanding` frames
    /// not yet written: `undefined`, or the close code of a slow consumer
    /// (the frame is then not sent, and the socket is closed at once).
    #[wasm_bindgen(js_name = admitFrame)]
    pub fn admit_frame(&self, outstanding: u32) -> Option<u16> {
        self.outbound
            .admit(outstanding as usize)
            .err()
            .map(|slow| slow.close_code())
    }

    /// `404`, for a `page` route on a host without a page.
    #[wasm_bindgen(js_name = notFound, unchecked_return_type = "HttpAnswer")]
    pub fn not_found() -> JsValue {
        js::response(edge::not_found())
    }

    /// `400`, for a socket route the runtime cannot upgrade (no `Connection: upgrade`).
    #[wasm_bindgen(js_name = notAnUpgrade, unchecked_return_type = "HttpAnswer")]
    pub fn not_an_upgrade() -> JsValue {
        js::response(edge::not_an_upgrade())
    }

    /// The `health` route's answer.
    #[wasm_bindgen(unchecked_return_type = "HttpAnswer")]
    pub fn healthy() -> JsValue {
        js::response(edge::healthy())
    }

    /// The `ready` route's answer (an in-process engine is ready once it answers).
    #[wasm_bindgen(unchecked_return_type = "HttpAnswer")]
    pub fn ready() -> JsValue {
        js::response(edge::ready())
    }
}

/// A `/socket` handshake the engine accepted; `openChannels` consumes it.
#[wasm_bindgen]
pub struct ChannelHandshake(pub(crate) AcceptedHandshake);

/// A host's wall clock, clamped so the engine never sees it go backwards.
#[wasm_bindgen]
#[derive(Default)]
pub struct MonotonicClock(MonotonicNow);

#[wasm_bindgen]
impl MonotonicClock {
    /// A clock that has seen no reading yet.
    #[wasm_bindgen(constructor)]
    pub fn new() -> MonotonicClock {
        MonotonicClock::default()
    }

    /// `wallMs` (e.g. `Date.now()`), or the latest result when it is earlier.
    pub fn now(&mut self, #[wasm_bindgen(js_name = wallMs)] wall_ms: f64) -> f64 {
        self.0.now(Millis(wall_ms.max(0.0) as u64)).0 as f64
    }
}

#[wasm_bindgen(js_class = Engine)]
impl WasmEngine {
    /// The `metrics` route's answer: the engine's metrics as Prometheus text.
    #[wasm_bindgen(js_name = metricsResponse, unchecked_return_type = "HttpAnswer")]
    pub fn metrics_response(&self) -> JsValue {
        js::response(edge::metrics(self.inner.metrics().render_prometheus()))
    }
}
