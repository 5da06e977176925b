//! Start-up and shutdown: open the store, start the engine task and the
//! persistence worker, bind, serve, and stop in order on SIGTERM/SIGINT.

use std::io::Write as _;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio_util::sync::CancellationToken;

use crate::config::Settings;
use crate::driver::table::ConnIds;
use crate::driver::{self, Command, Home, Writing};
use crate::http::{self, Host};
use crate::persist::Stats;
use crate::store;

/// How long open sockets get to finish their close at shutdown.
const SOCKET_DRAIN: Duration = Duration::from_secs(10);

/// Why the server could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The store could not be opened or loaded.
    #[error("store: {0}")]
    Store(#[from] bubble_core::store::StoreError),
    /// Another server has the store open.
    #[error("store: {0}")]
    StoreLocked(#[from] store::lock::LockError),
    /// Binding, threads or the runtime failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// Why it failed.
        source: std::io::Error,
    },
}

impl ServeError {
    /// The process exit status for this error: 3 when the store is held by
    /// another server, 1 otherwise.
    pub fn exit_code(&self) -> u8 {
        match self {
            ServeError::StoreLocked(_) => STORE_LOCKED_EXIT,
            ServeError::Store(_) | ServeError::Io { .. } => 1,
        }
    }
}

/// Read connections answering the engine's reads (SQLite): a long history
/// page occupies one while the other serves the rest.
const READ_CONNECTIONS: usize = 2;

/// The exit status when the store is in use by another server.
pub const STORE_LOCKED_EXIT: u8 = 3;

fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> ServeError {
    let context = context.into();
    move |source| ServeError::Io { context, source }
}

/// Serves until SIGTERM or SIGINT, then shuts down gracefully.
async fn serve(settings: Settings, home: Home, writing: Writing) -> Result<(), ServeError> {
    let opened = store::open(&settings.store, READ_CONNECTIONS).map_err(|e| match e {
        store::OpenError::Locked(e) => ServeError::StoreLocked(e),
        store::OpenError::Store(e) => ServeError::Store(e),
    })?;
    tracing::info!(store = %settings.store, "store opened");
    let stats = Arc::new(Stats::default());
    let broker = settings.cluster.as_ref().map(|c| {
        tracing::info!(node = %c.node, prefix = %c.prefix, "cluster node");
        (c, Arc::new(crate::cluster::Health::default()))
    });
    let health = broker.as_ref().map(|(_, health)| health.clone());
    let conn_ids = Arc::new(ConnIds::default());
    let running = driver::spawn(
        home,
        conn_ids.clone(),
        writing,
        settings.engine.clone(),
        opened.engine,
        stats,
        driver::Services {
            cluster: broker,
            jwks: settings.jwks.clone(),
            webhooks: &settings.webhooks,
        },
    )
    .map_err(io("starting the engine"))?;
    if crate::cluster::deployment(&settings.store).is_some() {
        tokio::spawn(crate::cluster::check_periodically(running.inbox.clone()));
    }
    let listener = TcpListener::bind(&settings.listen)
        .await
        .map_err(io(format!("binding {}", settings.listen)))?;
    let addr = listener
        .local_addr()
        .map_err(io("reading the bound address"))?;
    if let Some(dir) = &settings.www {
        tracing::info!(dir = %dir.display(), "serving the web page from a directory");
    }
    let host = Arc::new(Host::new(
        running.inbox.clone(),
        settings.edge.clone(),
        settings.engine.limits.clone(),
        opened.probe,
        health,
        settings.www.clone(),
        conn_ids,
    ));

    let signals = Signals::catch();
    let base = format!("http://{addr}");
    tracing::info!(%addr, ws_path = settings.edge.ws_path(), engine = ?home, io_threads = writing.io_threads, io_uring = writing.io_uring, write_delay_ms = writing.delay.as_millis(), "listening");
    let mut stdout = std::io::stdout();
    let _ = writeln!(stdout, "listening on {base}");
    let _ = stdout.flush();
    if settings.dev {
        eprintln!("{}", settings.dev_banner(&base));
    }

    let stop = CancellationToken::new();
    tokio::spawn(watch_signals(signals, stop.clone()));
    let inbox = running.inbox.clone();
    let signalled = stop.clone();
    let listener = crate::ws::Accepting(listener);
    axum::serve(listener, http::Connections::new(host.clone()))
        .with_graceful_shutdown(async move {
            signalled.cancelled().await;
            tracing::info!("shutting down: closing sockets (1001, Pusher sockets 4200)");
            let _ = inbox.send(Command::Shutdown).await;
        })
        .await
        .map_err(io("serving"))?;

    host.sockets.close();
    if tokio::time::timeout(SOCKET_DRAIN, host.sockets.wait())
        .await
        .is_err()
    {
        tracing::warn!("some sockets did not finish closing in time");
    }
    let _ = running.inbox.send(Command::Stop).await;
    drop(host);
    running.engine.join().await;
    // The worker ends once every batch handed to it is committed.
    if let Some(worker) = running.worker {
        let _ = tokio::task::spawn_blocking(move || worker.join()).await;
    }
    tracing::info!("stopped");
    Ok(())
}

/// Runs the server to completion on a runtime sized to the machine: with
/// one core, one thread runs the sockets and the engine together; with
/// more, the engine has its own thread and the sockets share the rest.
pub fn run(settings: Settings) -> Result<(), ServeError> {
    raise_open_files_limit();
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let writing = Writing {
        io_threads: settings
            .io_threads
            .unwrap_or_else(|| default_io_threads(cores)),
        io_uring: settings.io_uring.unwrap_or(true),
        delay: settings.write_delay,
    };
    if cores == 1 {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(io("starting the runtime"))?;
        tokio::task::LocalSet::new().block_on(&runtime, serve(settings, Home::Local, writing))
    } else {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(io("starting the runtime"))?;
        runtime.block_on(serve(settings, Home::Thread, writing))
    }
}

/// Writer threads when none are configured: on up to 3 cores the engine's
/// thread writes its sockets itself (a hand-over per turn costs more than
/// it frees there); above, a quarter of the cores write, at most 8.
fn default_io_threads(cores: usize) -> usize {
    if cores < 4 {
        0
    } else {
        (cores / 4).min(8)
    }
}

/// Raises the open-files soft limit to the hard limit and logs the limit in
/// force. Every connection holds two descriptors (hyper's and the duplicate
/// the engine writes through, see `ws/direct.rs`), so a shell's usual soft
/// limit of 1024 would cap the server at a few hundred connections, far
/// below what the hard limit allows.
fn raise_open_files_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let limit = getrlimit(Resource::Nofile);
    let (Some(current), Some(maximum)) = (limit.current, limit.maximum) else {
        return;
    };
    let mut in_force = current;
    if current < maximum {
        let raised = Rlimit {
            current: Some(maximum),
            maximum: Some(maximum),
        };
        match setrlimit(Resource::Nofile, raised) {
            Ok(()) => in_force = maximum,
            Err(e) => tracing::warn!(error = %e, "could not raise the open-files limit"),
        }
    }
    tracing::info!(open_files = in_force, "open-files limit");
}

/// SIGINT and SIGTERM, caught from the moment this is made: a signal that
/// arrives right after the listening line still shuts down gracefully.
struct Signals {
    interrupt: Option<Signal>,
    terminate: Option<Signal>,
}

impl Signals {
    fn catch() -> Signals {
        let watch = |kind: SignalKind, name: &str| match signal(kind) {
            Ok(stream) => Some(stream),
            Err(e) => {
                tracing::warn!(error = %e, "cannot watch {name}");
                None
            }
        };
        Signals {
            interrupt: watch(SignalKind::interrupt(), "SIGINT"),
            terminate: watch(SignalKind::terminate(), "SIGTERM"),
        }
    }

    /// Resolves on the next SIGINT or SIGTERM.
    async fn next(&mut self) {
        async fn recv(stream: &mut Option<Signal>) {
            match stream {
                Some(stream) => {
                    stream.recv().await;
                }
                None => std::future::pending().await,
            }
        }
        tokio::select! {
            () = recv(&mut self.interrupt) => {}
            () = recv(&mut self.terminate) => {}
        }
    }
}

/// The first signal starts a graceful shutdown; a second one exits at once
/// (what is committed stays committed; nothing else was acknowledged).
async fn watch_signals(mut signals: Signals, stop: CancellationToken) {
    signals.next().await;
    stop.cancel();
    signals.next().await;
    tracing::warn!("second signal: exiting without waiting");
    std::process::exit(130);
}
