//! Bubble's engine for JavaScript: a thin wasm-bindgen adapter over
//! [`bubble_core::Engine`]. It converts types and nothing else; every
//! protocol rule stays in the core.
//!
//! JavaScript drives it exactly like a native host drives the core:
//!
//! ```js
//! const engine = new Engine(JSON.stringify(config), seed);
//! engine.openThreads(Date.now(), conn, token);          // or frame(), handleHttp(), tick()…
//! for (let out; (out = engine.pollOutput()); ) {
//!   switch (out.kind) {
//!     case 'send': sockets.get(out.conn).send(out.frame); break;
//!     case 'sendAll': for (const conn of out.conns) sockets.get(conn).send(out.frame); break;
//!     case 'respond': answer(out.req, out.status, out.contentType, out.body); break;
//!     case 'read': // answer from storage whenever it can, in any order (worker/storage.mjs)
//!       answerRead(storage, out.query, (err, json) => engine.readDone(Date.now(), out.read, json));
//!       break;
//!     case 'persist': // commit in order, then persisted(now, batch) or persistFailed(now, batch, refused)
//!       commitBatches(storage, [out.writes], (err, [refused]) => report(out.batch, refused));
//!       break;
//!     // 'ping', 'close', 'wantDrained'
//!   }
//! }                                                        // and drain again after each completion
//! const due = engine.pollTimeout();                        // re-arm one timer, then tick()
//! ```
//!
//! With the feature `sim`, the deterministic simulator of whole
//! deployments is the `Simulation` class (see `sim.rs`); the page's package
//! is built with it, the edge worker's without.
//!
//! What a request is comes from the core's edge, exported as the `Edge`
//! class (`routeRequest`, `admitFrame`), and every `now` from a
//! `MonotonicClock`; see `edge.rs`.
//!
//! The engine keeps no history: it asks for what it needs with `read`
//! outputs and hands what must become durable to `persist` outputs, both as
//! plain objects (see `index.d.ts` and the `wire` module for their JSON).
//! The host answers from its own storage, reads in any order, batches in
//! order.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod config;
mod edge;
mod js;
#[cfg(feature = "sim")]
mod sim;
mod ts;
mod wire;

use bubble_core::auth::KeySet;
use bubble_core::edge::ChannelsUpgrade;
use bubble_core::http::{HttpRequest, Method};
use bubble_core::store::StoreError;
use bubble_core::{
    BatchId, ChannelProtocol, ConnId, Input, Millis, Output, ReadId, RequestId, ThreadId, WsFrame,
};
use wasm_bindgen::prelude::*;

pub use edge::{ChannelHandshake, MonotonicClock, WasmEdge};
#[cfg(feature = "sim")]
pub use sim::WasmSimulation;

/// The engine, as a JavaScript class.
#[wasm_bindgen(js_name = Engine)]
pub struct WasmEngine {
    inner: bubble_core::Engine,
    /// `auth.jwks.url`: where the host fetches the key set.
    key_url: Option<String>,
}

fn millis(now_ms: f64) -> Millis {
    Millis(now_ms.max(0.0) as u64)
}

fn conn(id: u32) -> ConnId {
    ConnId(u64::from(id))
}

impl WasmEngine {
    fn handle(&mut self, now_ms: f64, input: Input<'_>) -> Result<(), JsValue> {
        self.inner.handle(millis(now_ms), input).map_err(js::misuse)
    }
}

#[wasm_bindgen(js_class = Engine)]
impl WasmEngine {
    /// An engine from `config` (JSON with the keys of `bubble.toml`), drawing
    /// ids and version tokens from `seed`. It starts empty: history comes
    /// from the host's storage through `read` outputs.
    #[wasm_bindgen(constructor)]
    pub fn new(config: &str, seed: f64) -> Result<WasmEngine, JsValue> {
        let parsed = config::parse(config).map_err(|e| js::error("invalid_config", e))?;
        Ok(WasmEngine {
            inner: bubble_core::Engine::new(parsed.config, seed as u64),
            key_url: parsed.key_url,
        })
    }

    /// Where to GET the key set when a `fetchKeys` output asks for it
    /// (`auth.jwks.url`), or `undefined`.
    #[wasm_bindgen(getter, js_name = keyUrl)]
    pub fn key_url(&self) -> Option<String> {
        self.key_url.clone()
    }

    /// The document a `fetchKeys` output asked for, as fetched. A JWKS
    /// replaces the key set in use and gives `undefined`; anything else
    /// counts as a failed fetch (the set in use stays) and gives why.
    #[wasm_bindgen(js_name = keysLoaded)]
    pub fn keys_loaded(
        &mut self,
        #[wasm_bindgen(js_name = nowMs)] now_ms: f64,
        document: &str,
    ) -> Result<Option<String>, JsValue> {
        match KeySet::parse(document) {
            Ok(keys) => self
                .handle(now_ms, Input::KeysLoaded { keys })
                .map(|()| None),
            Err(e) => self
                .handle(now_ms, Input::KeysFailed)
                .map(|()| Some(e.to_string())),
        }
    }

    /// The key set a `fetchKeys` output asked for could not be had
    /// (unreachable, not `2xx`, too large): the set in use stays.
    #[wasm_bindgen(js_name = keysFailed)]
    pub fn keys_failed(
        &mut self,
        #[wasm_bindgen(js_name = nowMs)] now_ms: f64,
    ) -> Result<(), JsValue> {
        self.handle(now_ms, Input::KeysFailed)
    }

    /// An HTTP request the edge routed to the engine (`/v1/threads…`,
    /// `/api/apps/…`), with its raw path and query; the answer comes out as
    /// a `respond` output echoing `req`.
    #[wasm_bindgen(js_name = handleHttp)]
    #[allow(clippy::too_many_arguments)]
    pub fn handle_http(
        &mut self,
        #[wasm_bindgen(js_name = nowMs)] now_ms: f64,
        req: u32,
        method: &str,
        path: &str,
        query: &str,
        authorization: Option<String>,
        #[wasm_bindgen(js_name = idempotencyKey)] idempotency_key: Option<String>,
        body: &[u8],
    ) -> Result<(), JsValue> {
        let request = HttpRequest {
            method: Method::parse(method),
            path,
            query,
            authorization: authorization.as_deref(),
            idempotency_key: idempotency_key.as_deref(),
            body,
        };
        self.handle(
            now_ms,
            Input::Http {
                req: RequestId(u64::from(req)),
                request,
            },
        )
    }

    /// A `/v1/ws` socket opened with bearer `token` (header or `?access_token=`).
    #[wasm_bindgen(js_name = openThreads)]
    pub fn open_threads(
        &mut self,
        #[wasm_bindgen(js_name = nowMs)] now_ms: f64,
        #[wasm_bindgen(js_name = conn)] conn_id: u32,
        token: Option<String>,
    ) -> Result<(), JsValue> {
        self.handle(
            now_ms,
            Input::OpenThreads {
                conn: conn(conn_id),
                token: token.as_deref(),
            },
        )
    }

    /// A `/v1/ws` socket that outlived the engine that served it (a
    /// hibernated Durable Object socket), opened again with the `token` it
    /// opened with, and subscribed again to `threads[i]` from `nextSeqs[i]`
    /// (what `threadSubscriptions` reported on the engine before) without a
    /// second `thread.subscription_opened`.
    #[wasm_bindgen(js_name = resumeThreads)]
    pub fn resume_threads(
        &mut self,
        #[wasm_bindgen(js_name = nowMs)] now_ms: f64,
        #[wasm_bindgen(js_name = conn)] conn_id: u32,
        token: Option<String>,
        threads: Vec<String>,
        #[wasm_bindgen(js_name = nextSeqs)] next_seqs: Vec<f64>,
    ) -> Result<(), JsValue> {
        if threads.len() != next_seqs.len() {
            return Err(js::error(
                "invalid_subscriptions",
                "threads and nextSeqs differ in length",
            ));
        }
        let subscriptions = threads
            .iter()
            .zip(&next_seqs)
            .map(|(id, next)| Ok((ThreadId::parse(id)?, next.max(1.0) as u64)))
            .collect::<Result<Vec<_>, bubble_core::BubbleError>>()
            .map_err(|e| js::error("invalid_thread_id", e))?;
        self.handle(
            now_ms,
            Input::ResumeThreads {
                conn: conn(conn_id),
                token: token.as_deref(),
                subscriptions: &subscriptions,
            },
        )
    }

    /// Where the subscriptions of `/v1/ws` socket `conn` stand, as
    /// `[threadId, nextSeq]` pairs in id order (`nextSeq`: the last seq
    /// delivered + 1 once the host has performed every output), or
    /// `undefined` when `conn` is no open `/v1/ws` socket.
    #[wasm_bindgen(js_name = threadSubscriptions, unchecked_return_type = "[string, number][] | undefined")]
    pub fn thread_subscriptions(&self, #[wasm_bindgen(js_name = conn)] conn_id: u32) -> JsValue {
        let Some(subs) = self.inner.thread_subscriptions(conn(conn_id)) else {
            return JsValue::UNDEFINED;
        };
        subs.into_iter()
            .map(|(thread, next)| {
                js_sys::Array::of2(
                    &JsValue::from_str(thread.as_str()),
                    &JsValue::from(next as f64),
                )
            })
            .collect::<js_sys::Array>()
            .into()
    }

    /// Decides a `/socket` or `/app/:key` upgrade (an `Edge.routeRequest`
    /// route of kind `channelsSocket`, whose `pusher` and `version` are the
    /// last two arguments): `{accepted}`, the handshake `openChannels`
    /// consumes, or `{refused}`, the plain-text response to answer instead
    /// (a Pusher socket is always accepted: it hears its refusal).
    #[wasm_bindgen(js_name = channelHandshake, unchecked_return_type = "Handshake")]
    pub fn channel_handshake(
        &self,
        #[wasm_bindgen(js_name = appKey)] app_key: Option<String>,
        protocol2: bool,
        pusher: Option<bool>,
        version: Option<String>,
    ) -> JsValue {
        let protocol = match (pusher, protocol2) {
            (Some(true), _) => ChannelProtocol::Pusher,
            (_, true) => ChannelProtocol::V2,
            (_, false) => ChannelProtocol::Legacy,
        };
        let upgrade = ChannelsUpgrade {
            app_key,
            protocol,
            version,
        };
        match self.inner.channel_handshake(&upgrade) {
            Ok(accepted) => js::object(&[("accepted", edge::ChannelHandshake(accepted).into())]),
            Err(refusal) => js::object(&[("refused", js::response(refusal))]),
        }
    }

    /// A `/socket` opened after `channelHandshake` accepted it; consumes
    /// the accepted handshake.
    #[wasm_bindgen(js_name = openChannels)]
    pub fn open_channels(
        &mut self,
        #[wasm_bindgen(js_name = nowMs)] now_ms: f64,
        #[wasm_bindgen(js_name = conn)] conn_id: u32,
        handshake: edge::ChannelHandshake,
    ) -> Result<(), JsValue> {
        self.handle(
            now_ms,
            Input::OpenChannels {
                conn: conn(conn_id),
                handshake: &handshake.0,
            },
        )
    }

    /// A text frame from a client.
    pub fn frame(
        &mut self,
        #[wasm_bindgen(js_name = nowMs)] now_ms: f64,
        #[wasm_bindgen(js_name = conn)] conn_id: u32,
        text: &str,
    ) -> Result<(), JsValue> {
        self.handle(
            now_ms,
            Input::Frame {
                conn: conn(conn_id),
                frame: WsFrame::Text(text),
            },
        )
    }

    /// A binary frame from a client (answered as the protocols say).
    #[wasm_bindgen(js_name = binaryFrame)]
    pub fn binary_frame(
        &mut self,
        #[wasm_bindgen(js_name = nowMs)] now_ms: f64,
        #[wasm_bindgen(js_name = conn)] conn_id: u32,
        bytes: &[u8],
    ) -> Result<(), JsValue> {
        self.handle(
            now_ms,
            Input::Frame {
                conn: conn(conn_id),
                frame: WsFrame::Binary(bytes),
            },
        )
    }

    /// A WebSocket Pong arrived.
    pub fn pong(
        &mut self,
        #[wasm_bindgen(js_name = nowMs)] now_ms: f64,
        #[wasm_bindgen(js_name = conn)] conn_id: u32,
    ) -> Result<(), JsValue> {
        self.handle(
            now_ms,
            Input::Pong {
                conn: conn(conn_id),
            },
        )
    }

    /// What was sent to the socket so far has been written (answers `wantDrained`).
    pub fn drained(
        &mut self,
        #[wasm_bindgen(js_name = nowMs)] now_ms: f64,
        #[wasm_bindgen(js_name = conn)] conn_id: u32,
    ) -> Result<(), JsValue> {
        self.handle(
            now_ms,
            Input::Drained {
                conn: conn(conn_id),
            },
        )
    }

    /// The socket is gone.
    pub fn closed(
        &mut self,
        #[wasm_bindgen(js_name = nowMs)] now_ms: f64,
        #[wasm_bindgen(js_name = conn)] conn_id: u32,
    ) -> Result<(), JsValue> {
        self.handle(
            now_ms,
            Input::Closed {
                conn: conn(conn_id),
            },
        )
    }

    /// Every batch up to and including `batch` is durable in the host's storage.
    pub fn persisted(
        &mut self,
        #[wasm_bindgen(js_name = nowMs)] now_ms: f64,
        batch: f64,
    ) -> Result<(), JsValue> {
        let batch = BatchId(batch as u64);
        self.handle(now_ms, Input::Persisted { batch })
    }

    /// Every batch before `batch` is durable (reported already), and so is
    /// `batch` except the groups of the threads in `conflicts`, which the
    /// storage refused (their `expect` no longer held).
    #[wasm_bindgen(js_name = persistFailed)]
    pub fn persist_failed(
        &mut self,
        #[wasm_bindgen(js_name = nowMs)] now_ms: f64,
        batch: f64,
        conflicts: Vec<String>,
    ) -> Result<(), JsValue> {
        let conflicts = conflicts
            .iter()
            .map(|id| ThreadId::parse(id))
            .collect::<Result<_, _>>()
            .map_err(|e| js::error("invalid_thread_id", e))?;
        let batch = BatchId(batch as u64);
        self.handle(now_ms, Input::PersistFailed { batch, conflicts })
    }

    /// The storage answered `read` with `result`, the JSON of its answer
    /// (`{"events":[…]}`, `{"event":…}`, `{"thread":…}` or `{"threads":[…]}`).
    /// An answer that does not parse fails the read (its request answers
    /// `internal`) and throws `invalid_read_result`.
    #[wasm_bindgen(js_name = readDone)]
    pub fn read_done(
        &mut self,
        #[wasm_bindgen(js_name = nowMs)] now_ms: f64,
        read: f64,
        result: &str,
    ) -> Result<(), JsValue> {
        let parsed = wire::read_result(result);
        let error = parsed.as_ref().err().map(ToString::to_string);
        let result = parsed.map_err(|e| StoreError::Failed(format!("unreadable read result: {e}")));
        let read = ReadId(read as u64);
        self.handle(now_ms, Input::ReadDone { read, result })?;
        error.map_or(Ok(()), |e| Err(js::error("invalid_read_result", e)))
    }

    /// The storage failed to answer `read`; the request waiting for it
    /// answers `internal` (the host logs `message`).
    #[wasm_bindgen(js_name = readFailed)]
    pub fn read_failed(
        &mut self,
        #[wasm_bindgen(js_name = nowMs)] now_ms: f64,
        read: f64,
        message: String,
    ) -> Result<(), JsValue> {
        let read = ReadId(read as u64);
        let result = Err(StoreError::Failed(message));
        self.handle(now_ms, Input::ReadDone { read, result })
    }

    /// Another engine over the same storage committed to `thread`: its
    /// record is now at `headSeq` and `version` (the record's string token).
    /// What a broker between engines reports; a lone engine never needs it.
    pub fn changed(
        &mut self,
        #[wasm_bindgen(js_name = nowMs)] now_ms: f64,
        thread: &str,
        #[wasm_bindgen(js_name = headSeq)] head_seq: f64,
        version: &str,
    ) -> Result<(), JsValue> {
        let thread = ThreadId::parse(thread).map_err(|e| js::error("invalid_thread_id", e))?;
        let version = version
            .parse()
            .map_err(|e| js::error("invalid_version", e))?;
        let head_seq = head_seq as u64;
        self.handle(
            now_ms,
            Input::Changed {
                thread,
                head_seq,
                version,
            },
        )
    }

    /// The deadline from `pollTimeout` passed (early ticks are harmless).
    pub fn tick(&mut self, #[wasm_bindgen(js_name = nowMs)] now_ms: f64) -> Result<(), JsValue> {
        self.handle(now_ms, Input::Tick)
    }

    /// The next output as a plain object (`{kind: 'send', conn, frame}`…),
    /// or `undefined` when there is nothing to do.
    #[wasm_bindgen(js_name = pollOutput, unchecked_return_type = "Output | undefined")]
    pub fn poll_output(&mut self) -> Result<JsValue, JsValue> {
        let Some(out) = self.inner.poll_output() else {
            return Ok(JsValue::UNDEFINED);
        };
        let Output::Persist { batch, writes } = out else {
            return Ok(js::output(out));
        };
        let json = wire::batch_json(&writes).map_err(|e| js::error("internal", e))?;
        Ok(js::persist(batch, js::parse_json(&json)?))
    }

    /// When to call `tick` next (milliseconds since the epoch), or `undefined`.
    #[wasm_bindgen(js_name = pollTimeout)]
    pub fn poll_timeout(&self) -> Option<f64> {
        self.inner.poll_timeout().map(|m| m.0 as f64)
    }

    /// The configured limits, with the keys of `bubble.toml`'s `[limits]`.
    #[wasm_bindgen(unchecked_return_type = "Limits")]
    pub fn limits(&self) -> Result<JsValue, JsValue> {
        let json =
            serde_json::to_string(self.inner.limits()).map_err(|e| js::error("internal", e))?;
        js::parse_json(&json)
    }
}
