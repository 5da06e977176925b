//! The engine's output queue and its durability fence.
//!
//! Every output produced after a write is held until the batch holding that
//! write is reported durable ([`Input::Persisted`](crate::Input::Persisted)):
//! "acknowledged means durable". The queue is one FIFO, so outputs to a
//! connection keep their order across the fence.

use std::collections::VecDeque;

use crate::engine::Output;
use crate::ids::BatchId;
use crate::store::Write;

/// Outputs ready to poll, outputs held behind the fence, and the batch being
/// built by the current input.
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    persist: VecDeque<Output>,
    ready: VecDeque<Output>,
    held: VecDeque<(u64, Output)>,
    building: Vec<Write>,
    issued: u64,
    durable: u64,
}

impl Outbox {
    /// Queues `out` behind every write made so far.
    pub(crate) fn push(&mut self, out: Output) {
        let fence = self.issued + u64::from(!self.building.is_empty());
        if fence <= self.durable && self.held.is_empty() {
            self.ready.push_back(out);
        } else {
            self.held.push_back((fence, out));
        }
    }

    /// Queues `out` ahead of the fence. Only for outputs that depend on no
    /// write and go to peers that never receive fenced outputs (channel
    /// sockets and the channels HTTP API): their order among themselves is
    /// kept, and thread commits never delay them.
    pub(crate) fn push_unfenced(&mut self, out: Output) {
        self.ready.push_back(out);
    }

    /// Adds `write` to the batch of the current input.
    pub(crate) fn write(&mut self, write: Write) {
        self.building.push(write);
    }

    /// The batch the writes made so far belong to (the fence of new outputs).
    pub(crate) fn current_batch(&self) -> u64 {
        self.issued + u64::from(!self.building.is_empty())
    }

    /// Ends the current input: its writes become one `Persist` batch.
    pub(crate) fn seal(&mut self) {
        if !self.building.is_empty() {
            self.issued += 1;
            let writes = std::mem::take(&mut self.building);
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
            .is_some_and(|(fence, _)| *fence <= self.durable)
        {
            if let Some((_, out)) = self.held.pop_front() {
                self.ready.push_back(out);
            }
        }
        true
    }

    /// The next output: persistence requests first, then released outputs.
    pub(crate) fn pop(&mut self) -> Option<Output> {
        self.persist.pop_front().or_else(|| self.ready.pop_front())
    }
}
