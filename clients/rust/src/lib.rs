//! A resumable client for Bubble's durable threads, for agents and
//! services on tokio.
//!
//! Bubble's threads are durable and gapless: every event has a seq, and a
//! subscription replays from any seq before going live. This client keeps
//! each subscribed thread's position, so across lost connections and
//! server restarts a [`Subscription`] yields every event exactly once, in
//! order; appends wait while the client is offline and are retried with
//! one idempotency key, so each lands exactly once.
//!
//! The rules are not written here: the crate drives
//! [`bubble_core::client::Client`], the sans-IO client state machine the
//! JavaScript client follows too. This crate only moves bytes (the `/v1/ws`
//! WebSocket through tokio-tungstenite, the threads HTTP API through hyper)
//! and runs the timers the core asks for.
//!
//! ```no_run
//! use bubble_client::Client;
//! use futures_util::StreamExt as _;
//! use serde_json::json;
//!
//! # async fn demo() -> Result<(), bubble_client::Error> {
//! let client = Client::connect("http://127.0.0.1:3000", "dev-alice").await?;
//! let thread = client.thread("thread-1");
//!
//! // Older history, page by page, then live from the next seq.
//! let mut from_seq = 1;
//! let mut pages = thread.history().limit(100);
//! while let Some(page) = pages.next().await {
//!     for event in page?.events {
//!         from_seq = event.seq + 1;
//!     }
//! }
//! let mut events = thread.subscribe(from_seq);
//!
//! // Resolves to the stored event; made offline, it waits and lands once.
//! let stored = thread.append(json!({"type": "run_started", "runId": "run-1"})).await?;
//! println!("stored at seq {}", stored.seq);
//!
//! while let Some(event) = events.next().await {
//!     let event = event?; // an Err ends the subscription: not_found, forbidden…
//!     println!("{} {:?}", event.seq, event.kind());
//! }
//! client.close().await;
//! # Ok(())
//! # }
//! ```
//!
//! The client runs on a task of the current tokio runtime while any handle
//! to it ([`Client`], [`Thread`], [`Subscription`]) is alive, or until
//! [`Client::close`]. It speaks plain `http://` and `ws://`; TLS is not
//! built in.

#![forbid(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

mod driver;
mod error;
mod model;
mod options;
mod thread;
mod tls;
mod transport;

use std::hash::{BuildHasher as _, RandomState};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use bubble_core::client::{Client as Core, ClientConfig};
use tokio::sync::{mpsc, watch};

use driver::{Command, Driver};
use transport::Transport;

pub use error::Error;
pub use model::{ConnectionState, Event, Page, ScopedError};
pub use options::{Options, TokenSource};
pub use thread::{Append, Errors, History, Subscription, Thread};

/// What every handle of one client shares.
struct Shared {
    commands: mpsc::UnboundedSender<Command>,
    state: watch::Receiver<ConnectionState>,
    transport: Transport,
    next_subscription: AtomicU64,
}

/// A connection to a Bubble server; cheap to clone (clones share it).
#[derive(Clone)]
pub struct Client {
    shared: Arc<Shared>,
}

impl Client {
    /// Connects to the server at `url`, its origin (`http://host:port`),
    /// with default [`Options`]. See [`Client::connect_with`].
    pub async fn connect(url: &str, tokens: impl Into<TokenSource>) -> Result<Client, Error> {
        Client::connect_with(url, tokens, Options::default()).await
    }

    /// Connects to the server at `url`, its origin (`http://host:port`).
    ///
    /// It returns at once, before the connection is open (a refreshing
    /// [`TokenSource`] is asked for the first token before): subscriptions
    /// and appends made meanwhile wait for it, and [`Client::state`] tells
    /// when it opens. Fails only for a URL it cannot use. Must be called
    /// inside a tokio runtime.
    pub async fn connect_with(
        url: &str,
        tokens: impl Into<TokenSource>,
        options: Options,
    ) -> Result<Client, Error> {
        let tokens = tokens.into();
        let transport = Transport::new(url, &options)?;
        let token = match &tokens.refresh {
            Some(refresh) => refresh().await.or_else(|| tokens.token.clone()),
            None => tokens.token.clone(),
        };
        let config = ClientConfig {
            token: token.clone(),
            refresh_token: tokens.refresh.is_some(),
            backoff_base_ms: millis(options.backoff_base),
            backoff_cap_ms: millis(options.backoff_cap),
        };
        let seed = options.seed.unwrap_or_else(random_seed);
        let (commands, commands_rx) = mpsc::unbounded_channel();
        let (state_tx, state) = watch::channel(ConnectionState::Connecting);
        let driver = Driver::new(
            Core::new(config, seed),
            transport.clone(),
            tokens,
            token,
            options.request_timeout,
            commands_rx,
            state_tx,
        );
        tokio::spawn(driver.run());
        Ok(Client {
            shared: Arc::new(Shared {
                commands,
                state,
                transport,
                next_subscription: AtomicU64::new(1),
            }),
        })
    }

    /// The thread `id` (validated when it is used).
    pub fn thread(&self, id: impl Into<String>) -> Thread {
        Thread::new(id.into(), self.shared.clone())
    }

    /// The connection's state, and its changes (`changed().await`).
    pub fn state(&self) -> watch::Receiver<ConnectionState> {
        self.shared.state.clone()
    }

    /// Every `error` frame from now on: about a thread, or (without one)
    /// about the connection.
    pub fn errors(&self) -> Errors {
        let (sink, errors) = mpsc::unbounded_channel();
        let _ = self
            .shared
            .commands
            .send(Command::Errors { thread: None, sink });
        Errors::new(errors)
    }

    /// Closes the client for good and waits until it has: the socket is
    /// closed, pending appends fail with [`Error::Closed`] (one already on
    /// the wire may still have landed), subscriptions end. Calling it again
    /// is harmless.
    pub async fn close(&self) {
        let _ = self.shared.commands.send(Command::Close);
        let mut state = self.shared.state.clone();
        // The driver drops the sender when it stops.
        while state.changed().await.is_ok() {}
    }
}

fn millis(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// A seed from the standard library's randomly keyed hasher.
fn random_seed() -> u64 {
    RandomState::new().hash_one(std::time::SystemTime::now())
}
