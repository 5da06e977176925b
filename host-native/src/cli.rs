//! Command-line interface. Flags override environment variables, which
//! override the config file.

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// Bubble: durable threads and pub/sub channels over HTTP and WebSocket.
#[derive(Debug, Parser)]
#[command(name = "bubble", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the HTTP API, both WebSocket protocols and the web page.
    ///
    /// Without --config (or BUBBLE_CONFIG) the server starts with a dev
    /// config (tokens dev-alice, dev-bob, dev-root; app app-1 with key
    /// app-key and secret app-secret) and prints it on start-up.
    Serve(ServeArgs),
}

/// `bubble serve` flags.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ServeArgs {
    /// TOML config file (see bubble.example.toml).
    #[arg(long, env = "BUBBLE_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Address to listen on; port 0 picks a free port [default: 127.0.0.1:3000].
    #[arg(long, env = "BUBBLE_LISTEN", value_name = "ADDR")]
    pub listen: Option<String>,
    /// Store: "memory", "sqlite:PATH" or "postgres://USER@HOST/DB?schema=NAME"
    /// [default: sqlite:./bubble-data/bubble.db].
    #[arg(long, env = "BUBBLE_STORE", value_name = "SPEC")]
    pub store: Option<String>,
    /// Cross-node broker: "none" (single node) or "redis://HOST:PORT" (one
    /// node of a cluster; needs a postgres:// store) [default: none].
    #[arg(long, env = "BUBBLE_BROKER", value_name = "SPEC")]
    pub broker: Option<String>,
    /// Prefix of the cluster's Redis keys and channels; nodes of one
    /// deployment share it [default: "bubble:" + the PostgreSQL schema].
    #[arg(long, env = "BUBBLE_BROKER_PREFIX", value_name = "PREFIX")]
    pub broker_prefix: Option<String>,
    /// This node's id in the cluster, unique among running nodes
    /// [default: random at each start].
    #[arg(long, env = "BUBBLE_NODE_ID", value_name = "ID")]
    pub node_id: Option<String>,
    /// Path of the threads WebSocket [default: /v1/ws].
    #[arg(long, env = "BUBBLE_WS_PATH", value_name = "PATH")]
    pub ws_path: Option<String>,
    /// Serve the web page at / from this directory instead of the copy built
    /// into the binary (for working on the page).
    #[arg(long, env = "BUBBLE_WWW", value_name = "DIR")]
    pub www: Option<PathBuf>,
    /// Threads that write the sockets a fan-out queued to; 0: the engine's
    /// own thread writes them [default: 0 below 4 cores, else a quarter of
    /// the cores, at most 8].
    #[arg(long, env = "BUBBLE_IO_THREADS", value_name = "N")]
    pub io_threads: Option<usize>,
    /// Submit the engine's socket writes of a turn as one io_uring batch
    /// when the kernel offers it (false: one send each) [default: true].
    #[arg(long, env = "BUBBLE_IO_URING", value_name = "BOOL")]
    pub io_uring: Option<bool>,
    /// Hold the frames queued to sockets up to this many milliseconds, so
    /// that one send carries every frame a socket got meanwhile (latency
    /// traded for fewer sends; at most 1000) [default: 0, write at the end
    /// of each engine turn].
    #[arg(long, env = "BUBBLE_WRITE_DELAY_MS", value_name = "MS")]
    pub write_delay_ms: Option<u64>,
}
