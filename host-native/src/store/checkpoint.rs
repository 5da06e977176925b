//! WAL checkpoints off the commit path.
//!
//! By default SQLite checkpoints inside the commit that grows the WAL past
//! 1000 pages: that commit then also copies pages into the database file and
//! fsyncs it, and every append waiting for it waits that much longer. The
//! writer turns automatic checkpoints off and this thread runs a passive
//! checkpoint on its own connection at a fixed interval instead; a passive
//! checkpoint never blocks the writer (WAL lets both proceed). Durability is
//! unchanged: a commit is durable once its WAL frames are synced, whenever
//! they are later copied into the database file.

use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Duration;

use bubble_core::store::StoreError;
use rusqlite::Connection;

/// Time between two checkpoints.
const INTERVAL: Duration = Duration::from_millis(100);

/// The checkpoint thread; stopped and joined when dropped.
#[derive(Debug)]
pub(super) struct Checkpointer {
    stop: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Starts checkpointing the database at `path` (already in WAL mode).
    pub(super) fn start(path: &Path, busy_timeout: Duration) -> Result<Checkpointer, StoreError> {
        let conn = Connection::open(path)
            .map_err(|e| StoreError(format!("opening the checkpoint connection: {e}")))?;
        conn.busy_timeout(busy_timeout)
            .map_err(|e| StoreError(format!("busy_timeout: {e}")))?;
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("bubble-checkpoint".into())
            .spawn(move || run(&conn, &stopped))
            .map_err(|e| StoreError(format!("starting the checkpoint thread: {e}")))?;
        Ok(Checkpointer {
            stop: Some(stop),
            thread: Some(thread),
        })
    }
}

fn run(conn: &Connection, stopped: &mpsc::Receiver<()>) {
    while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(INTERVAL) {
        if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
            // The next interval retries; the WAL only grows meanwhile.
            tracing::warn!(error = %e, "WAL checkpoint failed");
        }
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
