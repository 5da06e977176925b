//! Helpers for black-box tests of the `bubble` binary.
//!
//! A test starts the real server as a child process on an ephemeral port
//! with a temporary data directory, then talks to it over real sockets:
//!
//! ```no_run
//! use bubble_tests::{Server, TEST_CONFIG, ALICE};
//! use serde_json::json;
//!
//! # async fn demo() {
//! let server = Server::start(TEST_CONFIG);
//! let alice = server.http(ALICE);
//! let (status, thread) = alice.post("/v1/threads", &json!({"threadId": "t-1"})).await;
//! assert_eq!(status, 201);
//! let mut ws = server.ws(ALICE).await;
//! ws.send_json(&json!({"type": "thread.subscribe", "threadId": "t-1"})).await;
//! let opened = ws.recv_json().await;
//! # }
//! ```
//!
//! Every wait has a generous hang timeout ([`HANG_TIMEOUT`]) so that a bug
//! fails the test instead of freezing it. Only [`latency`] measures time:
//! the hostile tests use it to show that an attack does not starve the
//! other clients (its docs say why that is the one place).

mod binary;
mod cluster;
mod config;
pub mod crash;
mod http;
mod jwks;
mod jwt;
pub mod latency;
mod proxy;
pub mod pusher;
mod server;
pub mod threads;
mod tls;
mod ws;

pub use binary::bubble_binary;
pub use cluster::{readyz, wait_ready, wait_readyz, Deployment, NodeSpec, OwnRedis};
pub use config::{
    config_with_eve, ALICE, APP_ID, APP_KEY, APP_SECRET, BOB, CAROL, DAVE, EVE, JWT_SECRET, ROOT,
    TEST_CONFIG,
};
pub use http::{raw_post, raw_request, HttpClient, HttpResponse};
pub use jwks::{jwks_document, JwksServer, SigningKey};
pub use jwt::{hmac_sha256_hex, sign_jwt, sign_jwt_with_header};
pub use proxy::Proxy;
pub use server::{metric_sample, signal, Server, Store};
pub use tls::{test_ca_der, test_ca_pem, TlsTerminator};
/// A raw WebSocket message, for [`WsClient::send`].
pub use tokio_tungstenite::tungstenite::Message;
pub use ws::{WsClient, WsMessage};

use std::time::Duration;

/// How long any single wait may take before the test fails as hung. It
/// only turns a hang into a failure; apart from the bounds of [`latency`],
/// tests never assert on elapsed time.
pub const HANG_TIMEOUT: Duration = Duration::from_secs(60);

/// The Unix time in seconds (for JWT `exp` claims).
pub fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}
