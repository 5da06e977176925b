//! A minimal host for fuzzing the engine: one [`Engine`] over a
//! [`MemoryStore`], every output handled the way the native host handles
//! it (reads answered, batches made durable and reported, drains and
//! closes reported back), with invariants checked on everything that
//! leaves the engine. A broken invariant panics, which libFuzzer reports
//! as a crash with the input that caused it.
//!
//! Inputs are text so that the seed corpus stays readable: a target splits
//! its input into steps on [`STEP`] lines.

use std::collections::BTreeSet;

use bubble_core::edge::{Edge, Endpoint, RequestHead};
use bubble_core::http::{ContentType, HttpRequest, HttpResponse, Method};
use bubble_core::store::{Backend, MemoryStore, ReadQuery, ReadResult};
use bubble_core::{
    AppConfig, Config, ConnId, Engine, Input, Millis, Output, PrincipalId, RequestId, ThreadId,
    WsFrame,
};
use serde_json::Value;

/// The line that separates two steps of one input.
pub const STEP: &str = "\n===\n";

/// A fixed clock: 2026-11-30T09:44:10.000Z.
pub const NOW: Millis = Millis(1_796_031_850_000);

/// The channel app every engine is configured with: `(id, key, secret)`.
pub const APP: (&str, &str, &str) = ("app-1", "app-key", "app-secret");

/// The JWT secret every engine is configured with.
pub const JWT_SECRET: &str = "fuzz-jwt-secret";

/// Every error code of the protocols, with its HTTP status.
const CODES: [(&str, u16); 9] = [
    ("invalid_request", 400),
    ("unauthorized", 401),
    ("forbidden", 403),
    ("not_found", 404),
    ("conflict", 409),
    ("payload_too_large", 413),
    ("rate_limited", 429),
    ("internal", 500),
    ("unavailable", 503),
];

/// The engine's configuration: principals alice, bob and root (admin)
/// with tokens `token-<name>`, the JWT driver and one channel app.
pub fn config() -> Config {
    let mut config = Config::default();
    config.admins.push(PrincipalId::new("root"));
    for p in ["alice", "bob", "root"] {
        config
            .auth
            .tokens
            .push((format!("token-{p}"), PrincipalId::new(p)));
    }
    config.auth.jwt_secret = Some(JWT_SECRET.into());
    config.apps.push(AppConfig {
        id: APP.0.into(),
        key: APP.1.into(),
        secret: APP.2.into(),
        max_connections: None,
        client_events: false,
        webhooks: Vec::new(),
    });
    config
}

/// The simulated host.
pub struct Host {
    engine: Engine,
    store: MemoryStore,
    edge: Edge,
    open: BTreeSet<ConnId>,
    next_conn: u64,
    next_req: u64,
    /// The frames sent, per connection, parsed.
    pub frames: Vec<(ConnId, Value)>,
    /// The last response, when the last request was answered.
    pub response: Option<HttpResponse>,
    /// Whether the request in flight is one of the threads API.
    threads_api: bool,
}

impl Default for Host {
    fn default() -> Host {
        Host::new()
    }
}

impl Host {
    /// An engine over an empty store.
    pub fn new() -> Host {
        Host {
            engine: Engine::new(config(), 7),
            store: MemoryStore::default(),
            edge: Edge::default(),
            open: BTreeSet::new(),
            next_conn: 1,
            next_req: 1,
            frames: Vec::new(),
            response: None,
            threads_api: false,
        }
    }

    fn input(&mut self, input: Input<'_>) {
        self.engine
            .handle(NOW, input)
            .expect("the host drives the engine correctly");
        self.pump();
    }

    /// Handles outputs until the engine is quiet.
    fn pump(&mut self) {
        while let Some(out) = self.engine.poll_output() {
            match out {
                Output::Read { read, query } => {
                    let result = self.store.read(&query);
                    self.engine
                        .handle(NOW, Input::ReadDone { read, result })
                        .expect("the read was asked for");
                }
                Output::Persist { batch, writes } => {
                    self.store
                        .apply(&[&writes])
                        .expect("the memory store applies");
                    self.engine
                        .handle(NOW, Input::Persisted { batch })
                        .expect("the batch was issued");
                }
                Output::Send { conn, frame } => self.sent(conn, &frame),
                Output::SendAll { conns, frame } => {
                    for conn in conns {
                        self.sent(conn, &frame);
                    }
                }
                Output::Close { conn, .. } => {
                    if self.open.remove(&conn) {
                        self.engine
                            .handle(NOW, Input::Closed { conn })
                            .expect("the close is reported once");
                    }
                }
                Output::Respond { response, .. } => {
                    check_response(&response, self.threads_api);
                    self.response = Some(response);
                }
                Output::WantDrained { conn } => {
                    if self.open.contains(&conn) {
                        self.engine
                            .handle(NOW, Input::Drained { conn })
                            .expect("the socket is open");
                    }
                }
                Output::Ping { .. } | Output::Broadcast { .. } | Output::Claim { .. } => {}
                Output::Webhook { url, .. } => panic!("a webhook to {url}: the app has none"),
                Output::FetchKeys => panic!("a key-set fetch: the config has no JWKS"),
            }
        }
    }

    /// Records a frame sent to `conn` while it is open.
    fn sent(&mut self, conn: ConnId, frame: &str) {
        if self.open.contains(&conn) {
            let value = self.check_frame(frame);
            self.frames.push((conn, value));
        }
    }

    /// A frame is one JSON object; a `thread.event` is durable, as stored.
    fn check_frame(&self, frame: &str) -> Value {
        let value: Value = serde_json::from_str(frame)
            .unwrap_or_else(|e| panic!("a frame is not JSON ({e}): {frame}"));
        assert!(value.is_object(), "a frame is not an object: {frame}");
        if value["type"] == "thread.event" {
            self.check_durable(&value["event"]);
        }
        value
    }

    fn check_durable(&self, event: &Value) {
        let thread = event["threadId"].as_str().expect("an event has threadId");
        let seq = event["seq"].as_u64().expect("an event has seq");
        let query = ReadQuery::Events {
            thread_id: ThreadId::parse(thread).expect("a valid threadId"),
            from_seq: seq,
            through_seq: seq,
            limit: 1,
        };
        let Ok(ReadResult::Events(stored)) = self.store.read(&query) else {
            panic!("the memory store reads events");
        };
        assert_eq!(stored.len(), 1, "{thread}#{seq} released before durable");
    }

    /// Opens a `/v1/ws` connection with `token`.
    pub fn open_threads(&mut self, token: Option<&str>) -> ConnId {
        let conn = self.conn();
        self.input(Input::OpenThreads { conn, token });
        conn
    }

    /// Opens a `/socket` connection with the app's key (protocol 2).
    pub fn open_channels(&mut self) -> ConnId {
        let query = format!("appKey={}&protocol=2", APP.1);
        let head = RequestHead {
            method: "GET",
            path: "/socket",
            query: &query,
            authorization: None,
            upgrade: Some("websocket"),
            ..RequestHead::default()
        };
        let Endpoint::ChannelsSocket(upgrade) = self.edge.route(&head) else {
            panic!("/socket routes to the channels socket");
        };
        let handshake = self
            .engine
            .channel_handshake(&upgrade)
            .expect("the app's key is accepted");
        let conn = self.conn();
        self.input(Input::OpenChannels {
            conn,
            handshake: &handshake,
        });
        conn
    }

    fn conn(&mut self) -> ConnId {
        let conn = ConnId(self.next_conn);
        self.next_conn += 1;
        self.open.insert(conn);
        conn
    }

    /// Whether `conn` is still open.
    pub fn is_open(&self, conn: ConnId) -> bool {
        self.open.contains(&conn)
    }

    /// Delivers a frame on `conn`: text when `bytes` is UTF-8, else binary.
    pub fn frame(&mut self, conn: ConnId, bytes: &[u8]) {
        if !self.is_open(conn) {
            return;
        }
        let frame = match std::str::from_utf8(bytes) {
            Ok(text) => WsFrame::Text(text),
            Err(_) => WsFrame::Binary(bytes),
        };
        self.input(Input::Frame { conn, frame });
    }

    /// Routes a request through the edge and, for an engine route, hands it
    /// to the engine; returns the response (answered at once by the edge or
    /// by the engine once its reads and writes completed).
    pub fn request(
        &mut self,
        method: &str,
        target: &str,
        authorization: Option<&str>,
        idempotency_key: Option<&str>,
        body: &[u8],
    ) -> Option<HttpResponse> {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let head = RequestHead {
            method,
            path,
            query,
            authorization,
            upgrade: None,
            ..RequestHead::default()
        };
        self.response = None;
        self.threads_api = path.starts_with("/v1/");
        match self.edge.route(&head) {
            Endpoint::Engine => {
                let req = RequestId(self.next_req);
                self.next_req += 1;
                let request = HttpRequest {
                    method: Method::parse(method),
                    path,
                    query,
                    authorization,
                    idempotency_key,
                    body,
                };
                self.input(Input::Http { req, request });
                let response = self.response.take();
                assert!(response.is_some(), "{method} {target} got no response");
                response
            }
            Endpoint::Answer(response) => {
                check_response(&response, false);
                Some(response)
            }
            _ => None,
        }
    }

    /// Creates thread `id` as `token`'s principal (a fixture step).
    pub fn create_thread(&mut self, token: &str, id: &str) {
        let body = format!("{{\"threadId\":\"{id}\"}}");
        let auth = format!("Bearer {token}");
        let response = self
            .request("POST", "/v1/threads", Some(&auth), None, body.as_bytes())
            .expect("an engine route");
        assert_eq!(response.status, 201, "{}", response.body);
    }

    /// Appends a `run_started` event to `id` as `token`'s principal.
    pub fn append(&mut self, token: &str, id: &str) {
        let auth = format!("Bearer {token}");
        let path = format!("/v1/threads/{id}/events");
        let body = br#"{"type":"run_started","runId":"r"}"#;
        let response = self
            .request("POST", &path, Some(&auth), None, body)
            .expect("an engine route");
        assert_eq!(response.status, 201, "{}", response.body);
    }
}

/// No input is an internal error; a JSON body parses; an error body of the
/// threads API carries a known code that matches the status (a known path
/// with another method is `405` with `invalid_request`). The channels API
/// has codes of its own.
fn check_response(response: &HttpResponse, threads_api: bool) {
    assert_ne!(response.status, 500, "internal error: {}", response.body);
    if response.content_type != ContentType::Json || response.body.is_empty() {
        return;
    }
    let body: Value = serde_json::from_str(&response.body)
        .unwrap_or_else(|e| panic!("a JSON body does not parse ({e}): {}", response.body));
    if let (Some(code), true) = (body["error"]["code"].as_str(), threads_api) {
        if (code, response.status) == ("invalid_request", 405) {
            return;
        }
        let status = CODES
            .iter()
            .find(|(c, _)| *c == code)
            .map(|(_, s)| *s)
            .unwrap_or_else(|| panic!("unknown error code {code}"));
        assert_eq!(
            status, response.status,
            "{code} answered as {}",
            response.status
        );
    }
}

/// Splits a fuzz input into its steps.
pub fn steps(data: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = data;
    while let Some(at) = find(rest, STEP.as_bytes()) {
        out.push(&rest[..at]);
        rest = &rest[at + STEP.len()..];
    }
    out.push(rest);
    out
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
