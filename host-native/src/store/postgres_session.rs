//! One PostgreSQL connection driven synchronously: the [`Backend`] seam is
//! blocking and called from dedicated threads (the persistence worker, the
//! reader threads, the readiness probe), so each handle owns a
//! current-thread runtime and one connection, and blocks on its own
//! runtime for every call.
//!
//! A connection-level failure (an I/O error, a connection the server
//! closed, no answer in time) drops the connection: the call that met it
//! returns [`StoreError::Unavailable`] and the next call connects again.
//! A call that failed so on a connection reused without a check (used
//! within [`IDLE_CHECK`]: the database may have restarted since) runs once
//! more on a new connection when its caller says nothing was applied, so a
//! stale connection does not cost a client a `503`.
//! Connecting gives up after [`CONNECT_TIMEOUT`] and a whole call after
//! [`CALL_TIMEOUT`], so a database that is down or stopped answering
//! never blocks a thread for good.
//!
//! [`Backend`]: bubble_core::store::Backend

use std::time::{Duration, Instant};

use bubble_core::store::StoreError;
use sqlx::migrate::MigrateError;
use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::Connection as _;
use tokio::runtime::Runtime;

/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The server cancels a statement running longer than this (a lock wait
/// included).
const STATEMENT_TIMEOUT: Duration = Duration::from_secs(30);

/// The server ends a session idle inside a transaction this long (a frozen
/// writer), releasing the row locks other nodes wait for.
const IDLE_IN_TRANSACTION_TIMEOUT: Duration = Duration::from_secs(10);

/// How long one call (a read, a whole commit) may take before the
/// connection is given up.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// A connection idle for longer than this is pinged before it is used: the
/// database may have gone and come back meanwhile, and a dead connection
/// would otherwise fail the first call made after the database returned.
const IDLE_CHECK: Duration = Duration::from_secs(1);

/// Connection options for `url` with every session's settings: tables
/// resolve in `schema`, the timeouts above, and the application name
/// `bubble` unless the URL names one (`application_name=`).
pub(super) fn connect_options(url: &str, schema: &str) -> Result<PgConnectOptions, StoreError> {
    let mut options: PgConnectOptions = url
        .parse()
        .map_err(|e| StoreError::Failed(format!("PostgreSQL URL: {e}")))?;
    if options.get_application_name().is_none() {
        options = options.application_name("bubble");
    }
    // `schema` is checked to be a plain lowercase identifier; quoted, it
    // cannot be read as a keyword or `$user`.
    Ok(options.options([
        ("search_path", format!("\"{schema}\"")),
        ("statement_timeout", millis(STATEMENT_TIMEOUT)),
        (
            "idle_in_transaction_session_timeout",
            millis(IDLE_IN_TRANSACTION_TIMEOUT),
        ),
    ]))
}

fn millis(d: Duration) -> String {
    format!("{}ms", d.as_millis())
}

/// A connection (made on demand) and the runtime that drives it.
pub(super) struct Session {
    /// Declared before the runtime: dropped first.
    conn: Option<PgConnection>,
    /// When the connection last answered.
    last_used: Instant,
    options: PgConnectOptions,
    /// `None` only while dropping.
    runtime: Option<Runtime>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("connected", &self.conn.is_some())
            .finish_non_exhaustive()
    }
}

impl Session {
    /// A session that connects with `options` on its first call.
    pub(super) fn new(options: PgConnectOptions) -> Result<Session, StoreError> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| StoreError::Failed(format!("starting a runtime: {e}")))?;
        Ok(Session {
            conn: None,
            last_used: Instant::now(),
            options,
            runtime: Some(runtime),
        })
    }

    /// A new session with the same options.
    pub(super) fn another(&self) -> Result<Session, StoreError> {
        Session::new(self.options.clone())
    }

    /// Runs `op`, which changes nothing when it fails, on the connection:
    /// [`run_unless_applied`](Session::run_unless_applied) with every
    /// failed attempt safe to run again.
    pub(super) fn run<T>(
        &mut self,
        what: &str,
        op: impl AsyncFn(&mut PgConnection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.run_unless_applied(what, || true, op)
    }

    /// Runs `op` on the connection, connecting first when there is none,
    /// and blocks until it finishes or [`CALL_TIMEOUT`] passes. The
    /// connection is dropped when `op` fails with
    /// [`StoreError::Unavailable`] or takes too long; when `op` met a
    /// failed connection (not a timeout) that was reused without a check
    /// and `unapplied` says the failed attempt applied nothing, `op` runs
    /// once more on a new connection. Must not be called from inside an
    /// async runtime.
    pub(super) fn run_unless_applied<T>(
        &mut self,
        what: &str,
        unapplied: impl Fn() -> bool,
        op: impl AsyncFn(&mut PgConnection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let Session {
            conn,
            last_used,
            options,
            runtime,
        } = self;
        let Some(runtime) = runtime.as_ref() else {
            return Err(StoreError::Failed("the session is closed".into()));
        };
        runtime.block_on(async {
            let (live, unchecked) = match conn.take() {
                Some(mut live) if last_used.elapsed() > IDLE_CHECK => {
                    match tokio::time::timeout(CONNECT_TIMEOUT, live.ping()).await {
                        Ok(Ok(())) => (live, false),
                        _ => (connect(options).await?, false),
                    }
                }
                Some(live) => (live, true),
                None => (connect(options).await?, false),
            };
            let mut result = attempt(what, conn.insert(live), &op).await;
            if unchecked && matches!(result, Err(Failure::Lost(_))) && unapplied() {
                *conn = None;
                result = attempt(what, conn.insert(connect(options).await?), &op).await;
            }
            let result = result.map_err(StoreError::from);
            if matches!(result, Err(StoreError::Unavailable(_))) {
                *conn = None;
            } else {
                *last_used = Instant::now();
            }
            result
        })
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.conn = None;
        // Dropping a runtime blocks on its shutdown, which panics inside
        // another runtime (a probe dropped by the server's async code);
        // nothing runs on this one between calls, so nothing is waited for.
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

/// How one attempt of a call failed.
enum Failure {
    /// The connection failed ([`StoreError::Unavailable`]).
    Lost(String),
    /// No answer within [`CALL_TIMEOUT`]: a slow database is not asked again.
    TimedOut(String),
    /// Any other error.
    Other(StoreError),
}

impl From<Failure> for StoreError {
    fn from(failure: Failure) -> StoreError {
        match failure {
            Failure::Lost(e) | Failure::TimedOut(e) => StoreError::Unavailable(e),
            Failure::Other(e) => e,
        }
    }
}

/// One run of `op` on `live`, given up after [`CALL_TIMEOUT`].
async fn attempt<T>(
    what: &str,
    live: &mut PgConnection,
    op: &impl AsyncFn(&mut PgConnection) -> Result<T, StoreError>,
) -> Result<T, Failure> {
    match tokio::time::timeout(CALL_TIMEOUT, op(live)).await {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(StoreError::Unavailable(e))) => Err(Failure::Lost(e)),
        Ok(Err(e)) => Err(Failure::Other(e)),
        Err(_) => Err(Failure::TimedOut(format!(
            "{what}: no answer within {}s",
            CALL_TIMEOUT.as_secs()
        ))),
    }
}

async fn connect(options: &PgConnectOptions) -> Result<PgConnection, StoreError> {
    match tokio::time::timeout(CONNECT_TIMEOUT, PgConnection::connect_with(options)).await {
        Ok(Ok(conn)) => Ok(conn),
        Ok(Err(e)) => Err(sql_err("connecting")(e)),
        Err(_) => Err(StoreError::Unavailable(format!(
            "connecting: no answer within {}s",
            CONNECT_TIMEOUT.as_secs()
        ))),
    }
}

/// Whether `e` means the connection is gone or unusable (nothing the
/// failed statement did stands, unless it was `COMMIT`).
fn connection_lost(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => true,
        // Class 08: connection exception; 57P01-57P03: the server is
        // shutting down or starting; 53300: too many connections.
        sqlx::Error::Database(db) => db.code().is_some_and(|code| {
            code.starts_with("08") || matches!(&*code, "57P01" | "57P02" | "57P03" | "53300")
        }),
        _ => false,
    }
}

/// Maps a driver error to a [`StoreError`], prefixed with `context`:
/// [`StoreError::Unavailable`] when the connection is lost,
/// [`StoreError::Failed`] when the database answered with an error.
pub(super) fn sql_err(context: &str) -> impl Fn(sqlx::Error) -> StoreError + '_ {
    move |e| {
        if connection_lost(&e) {
            StoreError::Unavailable(format!("{context}: {e}"))
        } else {
            StoreError::Failed(format!("{context}: {e}"))
        }
    }
}

/// Maps a migration error like [`sql_err`] does.
pub(super) fn migrate_err(e: MigrateError) -> StoreError {
    match e {
        MigrateError::Execute(e) | MigrateError::ExecuteMigration(e, _) => sql_err("migration")(e),
        other => StoreError::Failed(format!("migration: {other}")),
    }
}

/// The SQLSTATE of a database error, if `e` is one.
pub(super) fn sqlstate(e: &sqlx::Error) -> Option<String> {
    match e {
        sqlx::Error::Database(db) => db.code().map(|c| c.into_owned()),
        _ => None,
    }
}
