//! Persistence: makes the engine's write batches durable, with group commit.
//!
//! The worker is a dedicated thread owning the store's writer. It blocks for
//! one batch, takes every other batch already queued, applies them all in one
//! transaction and commits; only then does it report the last batch durable.
//! While writers are busy (the last commit grouped several batches) it waits
//! [`COMMIT_DELAY`] before gathering, so that more batches share one commit.
//! Batches arrive and are reported in the order the engine issued them.
//!
//! A store that cannot be reached ([`StoreError::Unavailable`]: nothing of
//! the commit was applied) refuses every group of the commit: the engine
//! reloads those threads, and the operations waiting on them answer
//! `unavailable` while the reads fail too. The next commit tries again. Any
//! other store failure is fatal: the worker logs it and exits the process
//! with status 1. Nothing the failed commit held was acknowledged (acks
//! wait for the report), and the next start reloads the state from the
//! store.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc as std_mpsc, Arc};
use std::time::Duration;

use bubble_core::store::{Backend, Batch, StoreError};
use bubble_core::{BatchId, ThreadId};
use tokio::sync::mpsc;

/// Writes gathered into one commit before it is cut (bounds one transaction).
const MAX_GROUP_WRITES: usize = 16 * 1024;

/// How long the worker lets more batches arrive before a commit, when the
/// previous commit grouped more than one batch (the writers are busy). An
/// idle server commits at once; a busy one trades this much latency for
/// fewer, larger commits: each commit costs an `fsync` and, on one core, CPU
/// the engine would otherwise use (BENCHMARKS.md, run G).
const COMMIT_DELAY: Duration = Duration::from_micros(250);

/// The exit status after a store failure.
pub(crate) const STORE_FAILURE_EXIT: i32 = 1;

/// What became of a batch, reported to the engine in batch order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Durable, whole.
    Persisted(BatchId),
    /// Durable except the groups of these threads, which another writer beat.
    Failed(BatchId, Vec<ThreadId>),
}

impl Outcome {
    fn of(batch: BatchId, refused: Vec<ThreadId>) -> Outcome {
        if refused.is_empty() {
            Outcome::Persisted(batch)
        } else {
            Outcome::Failed(batch, refused)
        }
    }
}

/// Where `Persist` batches go.
pub(crate) enum Persister {
    /// Applied on the engine thread, durable at once (the memory store).
    Inline(Box<dyn Backend + Send>),
    /// Sent to the persistence worker.
    Worker(std_mpsc::Sender<(BatchId, Batch)>),
}

impl Persister {
    /// Starts the worker thread over `writer`; it reports durable batches on `done`.
    pub(crate) fn worker(
        writer: Box<dyn Backend + Send>,
        done: mpsc::UnboundedSender<Outcome>,
        stats: Arc<Stats>,
    ) -> std::io::Result<(Persister, std::thread::JoinHandle<()>)> {
        let (tx, rx) = std_mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("bubble-persist".into())
            .spawn(move || {
                if let Err(e) = run_worker(writer, &rx, &done, &stats) {
                    fail(&e);
                }
            })?;
        Ok((Persister::Worker(tx), thread))
    }

    /// Hands a batch over; returns its outcome when it is already settled.
    pub(crate) fn persist(&mut self, batch: BatchId, writes: Batch) -> Option<Outcome> {
        match self {
            Persister::Inline(backend) => match backend.apply(&[&writes]) {
                Ok(mut refused) => Some(Outcome::of(batch, refused.pop().unwrap_or_default())),
                Err(e) => fail(&e),
            },
            Persister::Worker(tx) => {
                if tx.send((batch, writes)).is_err() {
                    tracing::error!("the persistence worker is gone");
                    std::process::exit(STORE_FAILURE_EXIT);
                }
                None
            }
        }
    }
}

fn fail(err: &dyn std::fmt::Display) -> ! {
    tracing::error!(error = %err, "store failure: exiting; the state is reloaded from the store on restart");
    std::process::exit(STORE_FAILURE_EXIT);
}

fn threads_of(batch: &Batch) -> Vec<ThreadId> {
    batch.threads.iter().map(|g| g.thread_id.clone()).collect()
}

fn writes_of(batch: &Batch) -> usize {
    batch.threads.iter().map(|g| g.writes.len()).sum()
}

/// Commits batches until the engine drops its sender; returns the first
/// fatal store failure, having reported nothing of the commit it broke.
fn run_worker(
    mut writer: Box<dyn Backend + Send>,
    rx: &std_mpsc::Receiver<(BatchId, Batch)>,
    done: &mpsc::UnboundedSender<Outcome>,
    stats: &Stats,
) -> Result<(), StoreError> {
    // `recv` fails once the engine dropped its sender and the queue is empty:
    // everything handed over has been committed.
    let mut busy = false;
    while let Ok(first) = rx.recv() {
        if busy {
            std::thread::sleep(COMMIT_DELAY);
        }
        let mut writes = writes_of(&first.1);
        let mut group = vec![first];
        while writes < MAX_GROUP_WRITES {
            let Ok(next) = rx.try_recv() else {
                break;
            };
            writes += writes_of(&next.1);
            group.push(next);
        }
        let batches: Vec<&Batch> = group.iter().map(|(_, b)| b).collect();
        let refused = match writer.apply(&batches) {
            Ok(refused) => refused,
            Err(e @ StoreError::Unavailable(_)) => {
                tracing::warn!(error = %e, "store unreachable: the commit's writes are refused");
                batches.iter().map(|b| threads_of(b)).collect()
            }
            Err(e) => return Err(e),
        };
        busy = group.len() > 1;
        stats.commits.fetch_add(1, Ordering::Relaxed);
        stats
            .batches
            .fetch_add(group.len() as u64, Ordering::Relaxed);
        // The engine task may already be gone at shutdown; the commit stands.
        for ((batch, _), refused) in group.iter().zip(refused) {
            let _ = done.send(Outcome::of(*batch, refused));
        }
        // Housekeeping only: the commit stands, the next one retries.
        if let Err(e) = writer.after_commit() {
            tracing::warn!(error = %e, "store housekeeping failed");
        }
    }
    tracing::debug!("persistence worker flushed and stopped");
    Ok(())
}

/// Host-side counters, rendered after the engine's metrics.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    commits: AtomicU64,
    batches: AtomicU64,
    slow_consumers: AtomicU64,
}

impl Stats {
    /// Counts a socket closed as a slow consumer.
    pub(crate) fn slow_consumer(&self) {
        self.slow_consumers.fetch_add(1, Ordering::Relaxed);
    }

    /// Appends the host's lines in Prometheus text format.
    pub(crate) fn render(&self, out: &mut String, sockets: usize, pending_requests: usize) {
        let mut metric = |name: &str, kind: &str, help: &str, value: u64| {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
            );
        };
        metric(
            "bubble_store_commits_total",
            "counter",
            "Store transactions committed.",
            self.commits.load(Ordering::Relaxed),
        );
        metric(
            "bubble_store_batches_total",
            "counter",
            "Write batches made durable by the worker.",
            self.batches.load(Ordering::Relaxed),
        );
        metric(
            "bubble_slow_consumer_closes_total",
            "counter",
            "Sockets closed because their outbound queue was full.",
            self.slow_consumers.load(Ordering::Relaxed),
        );
        metric(
            "bubble_open_sockets",
            "gauge",
            "WebSocket connections open (both protocols).",
            sockets as u64,
        );
        metric(
            "bubble_http_requests_in_flight",
            "gauge",
            "Engine HTTP requests awaiting a response.",
            pending_requests as u64,
        );
    }
}

#[cfg(test)]
mod tests;
