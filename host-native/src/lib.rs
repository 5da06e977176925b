//! Bubble's native server: an axum + tokio host for the engine of
//! `bubble-core`, with an embedded SQLite store (or a PostgreSQL one).
//!
//! The host moves bytes and decides nothing the protocol defines. One task
//! owns the [`bubble_core::Engine`] and is fed every socket event, HTTP
//! request and timer through one bounded inbox (on one core, HTTP requests
//! are fed to it directly by their connection's task); a persistence worker
//! makes the engine's write batches durable (group commit) and reports them
//! back; each WebSocket has a task with a bounded outbound queue.

// One exception, argued where it is: handing socket writes to io_uring
// (`driver::uring`), which the kernel reads after the call that queues them.
#![deny(unsafe_code)]
#![warn(missing_docs, unreachable_pub)]

pub mod cli;
pub mod cluster;
pub mod config;
mod driver;
mod http;
pub mod jwks;
mod persist;
mod reads;
pub mod server;
pub mod store;
mod webhooks;
mod ws;
