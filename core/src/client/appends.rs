//! The outgoing append queue: appends wait while the client is offline,
//! go out one at a time per thread (so a thread receives them in the
//! order they were made), and are retried with the idempotency key they
//! were given once, so each lands exactly once.

use std::collections::BTreeSet;

use crate::ids::{Millis, ThreadId};

use super::AppendId;

/// Where an append stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// Ready to go out as soon as the client is online.
    Queued,
    /// Posted; its answer is awaited.
    InFlight,
    /// Failed; posted again at this time (or on the next connection).
    RetryAt(Millis),
    /// Refused as unauthorized; posted again once a new token arrives.
    AwaitingToken,
}

/// One append not yet acknowledged.
#[derive(Debug, Clone)]
pub(crate) struct PendingAppend {
    pub(crate) append: AppendId,
    pub(crate) thread: ThreadId,
    pub(crate) key: String,
    pub(crate) body: String,
    pub(crate) stage: Stage,
    pub(crate) failures: u32,
    pub(crate) refreshed_token: bool,
}

/// The queue, in the order appends were made.
#[derive(Debug, Default)]
pub(crate) struct Appends {
    queue: Vec<PendingAppend>,
}

impl Appends {
    pub(crate) fn contains(&self, append: AppendId) -> bool {
        self.queue.iter().any(|p| p.append == append)
    }

    pub(crate) fn push(&mut self, pending: PendingAppend) {
        self.queue.push(pending);
    }

    pub(crate) fn get_mut(&mut self, append: AppendId) -> Option<&mut PendingAppend> {
        self.queue.iter_mut().find(|p| p.append == append)
    }

    pub(crate) fn remove(&mut self, append: AppendId) -> Option<PendingAppend> {
        let at = self.queue.iter().position(|p| p.append == append)?;
        Some(self.queue.remove(at))
    }

    /// Takes every append out (the client is closing).
    pub(crate) fn drain(&mut self) -> Vec<PendingAppend> {
        std::mem::take(&mut self.queue)
    }

    /// The appends to post now: per thread, the oldest one, when it is
    /// queued or its retry is due (`reconnected`: every retry is due).
    pub(crate) fn due(&mut self, now: Millis, reconnected: bool) -> Vec<PendingAppend> {
        let mut seen = BTreeSet::new();
        let mut due = Vec::new();
        for pending in &mut self.queue {
            if !seen.insert(pending.thread.clone()) {
                continue;
            }
            let ready = match pending.stage {
                Stage::Queued => true,
                Stage::RetryAt(at) => reconnected || at <= now,
                Stage::InFlight | Stage::AwaitingToken => false,
            };
            if ready {
                pending.stage = Stage::InFlight;
                due.push(pending.clone());
            }
        }
        due
    }

    /// Appends refused as unauthorized go back to the queue (a token came).
    pub(crate) fn token_arrived(&mut self) {
        for pending in &mut self.queue {
            if pending.stage == Stage::AwaitingToken {
                pending.stage = Stage::Queued;
            }
        }
    }

    /// The earliest retry due, if any.
    pub(crate) fn next_retry(&self) -> Option<Millis> {
        self.queue
            .iter()
            .filter_map(|p| match p.stage {
                Stage::RetryAt(at) => Some(at),
                _ => None,
            })
            .min()
    }
}
