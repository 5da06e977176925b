//! The persistence worker over a real SQLite file, with a gate in front of
//! `apply` so that a test decides when each commit runs and how it ends.

use std::sync::mpsc as std_mpsc;
use std::sync::Arc;
use std::thread::JoinHandle;

use bubble_core::store::{
    Backend, Batch, ReadQuery, ReadResult, StoreError, ThreadRecord, ThreadWrites, Version, Write,
};
use bubble_core::{BatchId, ThreadId};
use tokio::sync::mpsc;
use tokio::sync::mpsc::error::TryRecvError;

use super::{run_worker, Outcome, Stats};
use crate::store::{SqliteReader, SqliteStore};

/// How the gate lets one commit end.
enum Step {
    /// Hand the batches to the SQLite store.
    Apply,
    /// Answer this error without touching the store.
    Fail(StoreError),
}

/// A [`SqliteStore`] whose `apply` first reports which batches it was given
/// (the seq of each batch's first append, 0 for a create) and then waits for
/// the test's [`Step`].
struct Gated {
    store: SqliteStore,
    entered: std_mpsc::Sender<Vec<u64>>,
    steps: std_mpsc::Receiver<Step>,
}

impl Backend for Gated {
    fn read(&self, query: &ReadQuery) -> Result<ReadResult, StoreError> {
        self.store.read(query)
    }

    fn apply(&mut self, batches: &[&Batch]) -> Result<Vec<Vec<ThreadId>>, StoreError> {
        let firsts = batches.iter().map(|b| first_seq(b)).collect();
        self.entered.send(firsts).expect("the test is listening");
        match self.steps.recv().expect("the test sends a step") {
            Step::Apply => self.store.apply(batches),
            Step::Fail(e) => Err(e),
        }
    }
}

fn first_seq(batch: &Batch) -> u64 {
    batch.threads[0]
        .writes
        .iter()
        .find_map(|w| match w {
            Write::AppendEvent { seq, .. } => Some(*seq),
            _ => None,
        })
        .unwrap_or(0)
}

/// A worker thread over a gated store, and the test's ends of its channels.
struct Rig {
    batches: std_mpsc::Sender<(BatchId, Batch)>,
    outcomes: mpsc::UnboundedReceiver<Outcome>,
    entered: std_mpsc::Receiver<Vec<u64>>,
    steps: std_mpsc::Sender<Step>,
    reader: SqliteReader,
    worker: JoinHandle<Result<(), StoreError>>,
    _dir: tempfile::TempDir,
}

impl Rig {
    fn start() -> Rig {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = SqliteStore::open(&dir.path().join("p.db")).expect("open");
        let reader = store.reader().expect("reader");
        let (entered_tx, entered) = std_mpsc::channel();
        let (steps, steps_rx) = std_mpsc::channel();
        let gated = Gated {
            store,
            entered: entered_tx,
            steps: steps_rx,
        };
        let (batches, rx) = std_mpsc::channel();
        let (done, outcomes) = mpsc::unbounded_channel();
        let worker =
            std::thread::spawn(move || run_worker(Box::new(gated), &rx, &done, &Stats::default()));
        Rig {
            batches,
            outcomes,
            entered,
            steps,
            reader,
            worker,
            _dir: dir,
        }
    }

    fn send(&self, id: u64, batch: Batch) {
        self.batches
            .send((BatchId(id), batch))
            .expect("worker runs");
    }

    /// Waits until the worker is inside `apply`; returns what it holds.
    fn wait_entered(&self) -> Vec<u64> {
        self.entered.recv().expect("the worker calls apply")
    }

    /// Blocks for the next outcome.
    fn outcome(&mut self) -> Outcome {
        self.outcomes.blocking_recv().expect("an outcome")
    }

    fn nothing_reported(&mut self) {
        assert_eq!(self.outcomes.try_recv(), Err(TryRecvError::Empty));
    }

    fn durable_head(&self) -> u64 {
        let query = ReadQuery::Thread {
            thread_id: thread(),
        };
        match self.reader.read(&query).expect("read") {
            ReadResult::Thread(record) => record.map_or(0, |r| r.head_seq),
            other => panic!("unexpected read: {other:?}"),
        }
    }

    /// Closes the queue and returns how the worker ended.
    fn finish(self) -> Result<(), StoreError> {
        drop(self.batches);
        drop(self.steps);
        self.worker.join().expect("the worker does not panic")
    }
}

fn thread() -> ThreadId {
    ThreadId::parse("t").expect("thread id")
}

fn record(head_seq: u64) -> ThreadRecord {
    ThreadRecord {
        thread_id: thread(),
        parent_thread_id: None,
        title: None,
        created_at: "2026-01-01T00:00:00.000Z".into(),
        head_seq,
        version: head_seq + 1,
        grants: Vec::new(),
        participants: Vec::new(),
    }
}

/// The batch creating the thread.
fn create() -> Batch {
    let writes = vec![Write::CreateThread {
        thread_id: thread(),
        parent_thread_id: None,
        created_at: "2026-01-01T00:00:00.000Z".into(),
    }];
    Batch {
        threads: vec![ThreadWrites {
            thread_id: thread(),
            expect: None,
            record: record(0),
            writes,
        }],
    }
}

/// The batch appending `seq`, decided on the thread at `seq - 1`: applied
/// out of order, the store refuses it.
fn append(seq: u64) -> Batch {
    Batch {
        threads: vec![ThreadWrites {
            thread_id: thread(),
            expect: Some(Version {
                head_seq: seq - 1,
                version: seq,
            }),
            record: record(seq),
            writes: vec![Write::AppendEvent {
                thread_id: thread(),
                seq,
                idempotency_key: None,
                json: Arc::from(format!("{{\"seq\":{seq}}}")),
            }],
        }],
    }
}

#[test]
fn a_batch_is_reported_durable_only_after_apply_returned() {
    let mut rig = Rig::start();
    rig.send(1, create());
    assert_eq!(rig.wait_entered(), [0]);
    // The commit is held inside `apply`: nothing may be reported yet.
    rig.nothing_reported();
    rig.steps.send(Step::Apply).expect("step");
    assert_eq!(rig.outcome(), Outcome::Persisted(BatchId(1)));

    rig.send(2, append(1));
    assert_eq!(rig.wait_entered(), [1]);
    rig.nothing_reported();
    assert_eq!(rig.durable_head(), 0, "not committed yet");
    rig.steps.send(Step::Apply).expect("step");
    assert_eq!(rig.outcome(), Outcome::Persisted(BatchId(2)));
    // Reported durable: another connection reads it.
    assert_eq!(rig.durable_head(), 1);
    assert_eq!(rig.finish(), Ok(()));
}

#[test]
fn batches_queued_during_a_commit_share_the_next_one_in_order() {
    let mut rig = Rig::start();
    rig.send(1, create());
    assert_eq!(rig.wait_entered(), [0]);
    // While the first commit is held, four more batches queue up.
    for seq in 1..=4 {
        rig.send(seq + 1, append(seq));
    }
    rig.steps.send(Step::Apply).expect("step");
    assert_eq!(rig.outcome(), Outcome::Persisted(BatchId(1)));
    assert_eq!(rig.wait_entered(), [1, 2, 3, 4], "one commit, in order");
    rig.nothing_reported();
    rig.steps.send(Step::Apply).expect("step");
    for id in 2..=5 {
        assert_eq!(rig.outcome(), Outcome::Persisted(BatchId(id)));
    }
    assert_eq!(rig.durable_head(), 4);
    assert_eq!(rig.finish(), Ok(()));
}

#[test]
fn a_store_failure_stops_the_worker_without_reporting_its_commit() {
    let mut rig = Rig::start();
    rig.send(1, create());
    rig.wait_entered();
    rig.steps.send(Step::Apply).expect("step");
    assert_eq!(rig.outcome(), Outcome::Persisted(BatchId(1)));

    rig.send(2, append(1));
    rig.wait_entered();
    rig.send(3, append(2));
    let failure = StoreError::Failed("disk I/O error".into());
    rig.steps.send(Step::Fail(failure.clone())).expect("step");
    let worker = rig.worker;
    assert_eq!(worker.join().expect("no panic"), Err(failure));
    // Neither the failed commit nor the batch queued behind it was reported.
    assert_eq!(rig.outcomes.try_recv(), Err(TryRecvError::Disconnected));
    let query = ReadQuery::Thread {
        thread_id: thread(),
    };
    let ReadResult::Thread(Some(record)) = rig.reader.read(&query).expect("read") else {
        panic!("the thread exists");
    };
    assert_eq!(record.head_seq, 0);
}

#[test]
fn an_unreachable_store_refuses_the_commit_and_the_next_one_retries() {
    let mut rig = Rig::start();
    rig.send(1, create());
    rig.wait_entered();
    rig.steps.send(Step::Apply).expect("step");
    assert_eq!(rig.outcome(), Outcome::Persisted(BatchId(1)));

    rig.send(2, append(1));
    rig.wait_entered();
    let down = StoreError::Unavailable("connection reset".into());
    rig.steps.send(Step::Fail(down)).expect("step");
    assert_eq!(rig.outcome(), Outcome::Failed(BatchId(2), vec![thread()]));
    assert_eq!(rig.durable_head(), 0);

    rig.send(3, append(1));
    rig.wait_entered();
    rig.steps.send(Step::Apply).expect("step");
    assert_eq!(rig.outcome(), Outcome::Persisted(BatchId(3)));
    assert_eq!(rig.durable_head(), 1);
    assert_eq!(rig.finish(), Ok(()));
}
