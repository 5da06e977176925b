//! Bubble's engine: a sans-IO core for durable threads and pub/sub channels.
//!
//! The engine does no I/O, reads no clock and draws no randomness. A host
//! (the native server, a JavaScript edge worker, a browser page) owns
//! sockets, timers and storage, and drives the engine with three calls:
//!
//! 1. [`Engine::handle`] with the current time and one [`Input`]: a socket
//!    opened, a frame arrived, an HTTP request, a batch became durable, a
//!    timer fired;
//! 2. [`Engine::poll_output`] until it returns `None`, performing each
//!    [`Output`]: send a frame, answer a request, persist a batch;
//! 3. [`Engine::poll_timeout`] to re-arm one timer, delivering
//!    [`Input::Tick`] when it fires.
//!
//! What a request means (which endpoint, its bearer, its query flags, its
//! decoded path) is decided by [`edge::Edge::route`] before a host hands
//! the engine anything; every host calls it, JavaScript included. Hosts pass
//! their clock through a [`MonotonicNow`].
//!
//! Durability is an output: the engine asks for [`Write`](store::Write)
//! batches, the host makes them durable (grouping as many as it likes into
//! one commit) and reports [`Input::Persisted`]. Acknowledgements and
//! deliveries that depend on a write are released only then.
//!
//! ```
//! use bubble_core::http::{HttpRequest, Method};
//! use bubble_core::store::{Backend, MemoryStore};
//! use bubble_core::{Config, Engine, Input, Millis, Output, RequestId};
//!
//! let store = MemoryStore::default();
//! let mut config = Config::default();
//! config.auth.tokens.push(("dev-alice".into(), bubble_core::PrincipalId::new("alice")));
//! let mut engine = Engine::new(config, 42, store.load().unwrap(), Box::new(store.clone())).unwrap();
//! let mut backend = store;
//!
//! let request = HttpRequest {
//!     method: Method::Post,
//!     path: "/v1/threads",
//!     query: "",
//!     authorization: Some("Bearer dev-alice"),
//!     idempotency_key: None,
//!     body: br#"{"threadId":"thread-1"}"#,
//! };
//! engine.handle(Millis(1_700_000_000_000), Input::Http { req: RequestId(1), request }).unwrap();
//! let mut status = None;
//! while let Some(out) = engine.poll_output() {
//!     match out {
//!         Output::Persist { batch, writes } => {
//!             backend.apply(&writes).unwrap();
//!             engine.handle(Millis(1_700_000_000_001), Input::Persisted { batch }).unwrap();
//!         }
//!         Output::Respond { response, .. } => status = Some(response.status),
//!         _ => {}
//!     }
//! }
//! assert_eq!(status, Some(201));
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod auth;
pub mod channels;
pub mod clock;
pub mod config;
pub mod edge;
mod engine;
pub mod error;
mod heartbeat;
pub mod http;
pub mod idgen;
pub mod ids;
pub mod metrics;
pub mod model;
mod outbox;
pub mod policy;
pub mod store;
mod threads;

pub use clock::MonotonicNow;
pub use config::{AppConfig, AuthConfig, Config, Heartbeat, Limits};
pub use engine::{ChannelProtocol, Engine, Input, Misuse, Output, SharedFrame, WsFrame};
pub use error::{BubbleError, ErrorCode};
pub use ids::{BatchId, ConnId, Millis, PrincipalId, RequestId, ThreadId};
