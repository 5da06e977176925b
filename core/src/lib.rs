//! Bubble's engine: a sans-IO core for durable threads and pub/sub channels.
//!
//! The engine does no I/O, reads no clock, draws no randomness and owns no
//! store. A host (the native server, a JavaScript edge worker, a browser
//! page) owns sockets, timers and storage, and drives the engine with three
//! calls:
//!
//! 1. [`Engine::handle`] with the current time and one [`Input`]: a socket
//!    opened, a frame arrived, an HTTP request, a read completed, a batch
//!    became durable, another writer changed a thread, a timer fired;
//! 2. [`Engine::poll_output`] until it returns `None`, performing each
//!    [`Output`]: send a frame, answer a request, read from the store,
//!    persist a batch;
//! 3. [`Engine::poll_timeout`] to re-arm one timer, delivering
//!    [`Input::Tick`] when it fires.
//!
//! What a request means (which endpoint, its bearer, its query flags, its
//! decoded path) is decided by [`edge::Edge::route`] before a host hands
//! the engine anything; every host calls it, JavaScript included. Hosts pass
//! their clock through a [`MonotonicNow`].
//!
//! Storage is two outputs. [`Output::Read`] asks for durable data (an event
//! range, an idempotency key, a thread record, a page of threads); the host
//! answers with [`Input::ReadDone`] whenever the read completes, in any
//! order. [`Output::Persist`] asks for a batch of writes whose thread groups
//! expect the version they were decided on; the host makes them durable
//! (grouping as many batches as it likes into one commit) and reports
//! [`Input::Persisted`], or [`Input::PersistFailed`] naming the threads
//! another writer had changed. Acknowledgements and deliveries that depend
//! on a write are released only once it is durable.
//!
//! ```
//! use bubble_core::http::{HttpRequest, Method};
//! use bubble_core::store::{Backend, MemoryStore};
//! use bubble_core::{Config, Engine, Input, Millis, Output, RequestId};
//!
//! let mut store = MemoryStore::default();
//! let mut config = Config::default();
//! config.auth.tokens.push(("dev-alice".into(), bubble_core::PrincipalId::new("alice")));
//! let mut engine = Engine::new(config, 42);
//! let now = Millis(1_700_000_000_000);
//!
//! let request = HttpRequest {
//!     method: Method::Post,
//!     path: "/v1/threads",
//!     query: "",
//!     authorization: Some("Bearer dev-alice"),
//!     idempotency_key: None,
//!     body: br#"{"threadId":"thread-1"}"#,
//! };
//! engine.handle(now, Input::Http { req: RequestId(1), request }).unwrap();
//! let mut status = None;
//! while let Some(out) = engine.poll_output() {
//!     let input = match out {
//!         Output::Read { read, query } => Input::ReadDone { read, result: store.read(&query) },
//!         Output::Persist { batch, writes } => {
//!             let refused = store.apply(&[&writes]).unwrap().remove(0);
//!             assert!(refused.is_empty(), "a single writer never conflicts");
//!             Input::Persisted { batch }
//!         }
//!         Output::Respond { response, .. } => {
//!             status = Some(response.status);
//!             continue;
//!         }
//!         _ => continue,
//!     };
//!     engine.handle(now, input).unwrap();
//! }
//! assert_eq!(status, Some(201));
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod auth;
pub mod channels;
pub mod client;
pub mod clock;
pub mod cluster;
pub mod config;
mod conn_limits;
mod ctx;
pub mod edge;
mod engine;
pub mod error;
pub mod fold;
mod heartbeat;
mod hex;
pub mod http;
mod http_rate;
mod idgen;
pub mod ids;
mod io;
mod json;
mod maps;
pub mod metrics;
pub mod model;
mod outbox;
pub mod policy;
#[cfg(feature = "sim")]
pub mod sim;
pub mod store;
mod threads;

pub use clock::MonotonicNow;
pub use config::{
    AppConfig, AuthConfig, ClaimRules, Config, Heartbeat, JwksConfig, KeyRefresh, Limits,
    WebhookConfig, WebhookConfigError, WEBHOOK_EVENT_TYPES,
};
pub use engine::Engine;
pub use error::{BubbleError, ErrorCode};
pub use ids::{BatchId, ClaimId, ConnId, Millis, PrincipalId, ReadId, RequestId, ThreadId};
pub use io::{ChannelProtocol, CloseReason, Input, Misuse, Output, SharedFrame, WsFrame};
