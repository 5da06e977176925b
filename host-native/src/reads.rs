//! The engine's reads, answered off its thread.
//!
//! A pool of reader threads, each owning one read connection, takes the
//! engine's `Read` outputs from one queue and sends each completion back to
//! the engine task, which feeds it in as `Input::ReadDone`. Completions
//! arrive in whatever order the reads finish; the engine does not mind. A
//! slow read (a long history page) occupies one reader and never the
//! engine, so sockets and appends keep moving meanwhile. Readers run at a
//! lower priority ([`READER_NICE`]): where they share a core with the
//! engine, a live delivery does not wait behind a page being read.

use std::sync::{mpsc as std_mpsc, Arc, Mutex, PoisonError};

use bubble_core::store::{ReadQuery, ReadResult, StoreError};
use bubble_core::ReadId;
use tokio::sync::mpsc;

use crate::store::ReadFn;

/// The nice value of reader threads (the engine's is the process's, 0 by
/// default). On Linux the nice value is per thread.
const READER_NICE: i32 = 10;

/// A completed read.
pub(crate) type ReadDone = (ReadId, Result<ReadResult, StoreError>);

/// The reader threads' shared queue.
pub(crate) struct ReaderPool {
    queue: std_mpsc::Sender<(ReadId, ReadQuery)>,
}

impl ReaderPool {
    /// Starts one thread per read function; completions go to `done`.
    pub(crate) fn start(
        readers: Vec<ReadFn>,
        done: mpsc::UnboundedSender<ReadDone>,
    ) -> std::io::Result<ReaderPool> {
        let (queue, rx) = std_mpsc::channel::<(ReadId, ReadQuery)>();
        let rx = Arc::new(Mutex::new(rx));
        for (i, mut read) in readers.into_iter().enumerate() {
            let rx = rx.clone();
            let done = done.clone();
            std::thread::Builder::new()
                .name(format!("bubble-read-{i}"))
                .spawn(move || {
                    if let Err(e) = rustix::process::setpriority_process(None, READER_NICE) {
                        tracing::debug!(error = %e, "reader priority unchanged");
                    }
                    serve(&rx, &mut read, &done);
                })?;
        }
        Ok(ReaderPool { queue })
    }

    /// Queues a read.
    pub(crate) fn submit(&self, read: ReadId, query: ReadQuery) {
        // The readers outlive the engine task; a send fails only at exit.
        let _ = self.queue.send((read, query));
    }
}

/// One reader thread: answers reads until the queue or the engine is gone.
fn serve(
    rx: &Mutex<std_mpsc::Receiver<(ReadId, ReadQuery)>>,
    read: &mut ReadFn,
    done: &mpsc::UnboundedSender<ReadDone>,
) {
    loop {
        // The lock is held only to take the next read.
        let next = rx.lock().unwrap_or_else(PoisonError::into_inner).recv();
        let Ok((id, query)) = next else {
            return;
        };
        let result = read(&query);
        if let Err(e) = &result {
            tracing::warn!(error = %e, "store read failed");
        }
        if done.send((id, result)).is_err() {
            return;
        }
    }
}
