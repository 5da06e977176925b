//! The engine's output queue and its durability fence.
//!
//! Every output produced after a write is held until the batch holding that
//! write is reported durable ([`Input::Persisted`](crate::Input::Persisted)):
//! "acknowledged means durable". The queue is one FIFO, so outputs to a
//! connection keep their order across the fence. Held outputs carry a
//! [`Tag`] naming what they depend on, so that the outputs of writes a
//! backend refused ([`Input::PersistFailed`](crate::Input::PersistFailed))
//! can be dropped before anyone sees them.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::ids::{BatchId, ConnId, ThreadId};
use crate::io::Output;
use crate::store::Batch;

/// What a held output depends on, beyond the fence itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Tag {
    /// Nothing: released with its fence whatever happens.
    Plain,
    /// Carries event `seq` of `thread`, which may be refused (the thread id
    /// is shared by every recipient's tag).
    Event { thread: Arc<ThreadId>, seq: u64 },
    /// Answers operation `op`, which may be decided again.
    Op(u64),
    /// Opens `conn`'s subscription to `thread`, which may be decided again.
    Subscription { conn: ConnId, thread: Arc<ThreadId> },
}

/// Outputs ready to poll, outputs held behind the fence, and whether the
/// current input has written anything.
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    persist: VecDeque<Output>,
    ready: VecDeque<Output>,
    held: VecDeque<(u64, Tag, Output)>,
    writing: bool,
    issued: u64,
    durable: u64,
}

impl Outbox {
    /// Queues `out` behind every write made so far.
    pub(crate) fn push(&mut self, out: Output) {
        self.push_tagged(out, Tag::Plain);
    }

    /// Queues `out` behind every write made so far, tagged with what it
    /// depends on.
    pub(crate) fn push_tagged(&mut self, out: Output, tag: Tag) {
        let fence = self.current_batch();
        if fence <= self.durable && self.held.is_empty() {
            self.ready.push_back(out);
        } else {
            self.held.push_back((fence, tag, out));
        }
    }

    /// Queues `out` ahead of the fence. Only for outputs that depend on no
    /// write: reads of durable data, and outputs to peers that never receive
    /// fenced outputs (channel sockets and the channels HTTP API), whose
    /// order among themselves is kept and which thread commits never delay.
    pub(crate) fn push_unfenced(&mut self, out: Output) {
        self.ready.push_back(out);
    }

    /// The current input made a write: outputs pushed from now on wait for
    /// the batch it will seal.
    pub(crate) fn mark_writing(&mut self) {
        self.writing = true;
    }

    /// The batch the writes made so far belong to (the fence of new outputs).
    pub(crate) fn current_batch(&self) -> u64 {
        self.issued + u64::from(self.writing)
    }

    /// The last batch issued.
    pub(crate) fn issued(&self) -> u64 {
        self.issued
    }

    /// The last batch reported durable.
    pub(crate) fn durable(&self) -> u64 {
        self.durable
    }

    /// Ends the current input: its writes become one `Persist` batch.
    pub(crate) fn seal(&mut self, writes: Batch) {
        if self.writing {
            self.writing = false;
            self.issued += 1;
            self.persist.push_back(Output::Persist {
                batch: BatchId(self.issued),
                writes,
            });
        }
    }

    /// Records that every batch up to `batch` is durable and releases what
    /// waited for it. Returns false when `batch` was never issued.
    pub(crate) fn persisted(&mut self, batch: BatchId) -> bool {
        if batch.0 > self.issued {
            return false;
        }
        self.durable = self.durable.max(batch.0);
        while self
            .held
            .front()
            .is_some_and(|(fence, _, _)| *fence <= self.durable)
        {
            if let Some((_, _, out)) = self.held.pop_front() {
                self.ready.push_back(out);
            }
        }
        true
    }

    /// Drops every held output that `doomed` picks by its tag and itself;
    /// `doomed` may also trim an output it keeps (see [`drop_recipients`]).
    pub(crate) fn discard(&mut self, mut doomed: impl FnMut(&Tag, &mut Output) -> bool) {
        self.held.retain_mut(|(_, tag, out)| !doomed(tag, out));
    }

    /// The next output: persistence requests first, then released outputs.
    pub(crate) fn pop(&mut self) -> Option<Output> {
        self.persist.pop_front().or_else(|| self.ready.pop_front())
    }
}

/// Takes the connections `gone` picks off a send (one recipient of a
/// fan-out, or a whole `Send`); true when the send has no recipient left
/// and must be dropped. Other outputs are left alone.
pub(crate) fn drop_recipients(out: &mut Output, mut gone: impl FnMut(ConnId) -> bool) -> bool {
    match out {
        Output::Send { conn, .. } => gone(*conn),
        Output::SendAll { conns, .. } => {
            conns.retain(|c| !gone(*c));
            conns.is_empty()
        }
        _ => false,
    }
}
