//! The reference model: what every thread's head, idempotency keys and
//! readers should be after the scenario's operations.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::scenario::{ADMIN_INDEX, PRINCIPALS, ROLES};

#[derive(Debug, Default)]
pub(crate) struct ThreadModel {
    pub(crate) parent: Option<usize>,
    pub(crate) head: u64,
    pub(crate) keys: HashMap<u8, u64>,
    /// For each seq (index seq - 1): the principals who could read at append.
    pub(crate) readers: Vec<BTreeSet<usize>>,
    /// For each seq (index seq - 1): the event's `runId`.
    pub(crate) runs: Vec<String>,
}

#[derive(Debug, Default)]
pub(crate) struct Model {
    pub(crate) threads: BTreeMap<usize, ThreadModel>,
    pub(crate) grants: BTreeMap<(usize, usize), usize>,
}

impl Model {
    pub(crate) fn readable(&self, principal: usize, thread: usize) -> bool {
        if principal == ADMIN_INDEX {
            return self.threads.contains_key(&thread);
        }
        let mut at = Some(thread);
        while let Some(t) = at {
            let Some(model) = self.threads.get(&t) else {
                return false;
            };
            if self.grants.contains_key(&(t, principal)) {
                return true;
            }
            at = model.parent;
        }
        false
    }

    /// `None` when allowed; otherwise the error code.
    pub(crate) fn append_denied(&self, principal: usize, thread: usize) -> Option<&'static str> {
        if !self.readable(principal, thread) {
            return Some("not_found");
        }
        let appends = principal == ADMIN_INDEX
            || self
                .grants
                .get(&(thread, principal))
                .is_some_and(|role| ROLES[*role] != "reader");
        (!appends).then_some("forbidden")
    }

    /// Appends one event with `runId` `run` unless `key` repeats; returns
    /// the seq and whether it was a repeat.
    pub(crate) fn append_keyed(
        &mut self,
        thread: usize,
        key: Option<u8>,
        run: String,
    ) -> (u64, bool) {
        let known = key.and_then(|k| self.threads[&thread].keys.get(&k).copied());
        if let Some(seq) = known {
            return (seq, true);
        }
        let seq = self.append(thread, run);
        if let Some(k) = key {
            self.threads
                .get_mut(&thread)
                .expect("thread")
                .keys
                .insert(k, seq);
        }
        (seq, false)
    }

    /// Appends one event; returns its seq.
    pub(crate) fn append(&mut self, thread: usize, run: String) -> u64 {
        let readers: BTreeSet<usize> = (0..PRINCIPALS)
            .filter(|p| self.readable(*p, thread))
            .collect();
        let model = self
            .threads
            .get_mut(&thread)
            .expect("appending to an existing thread");
        model.head += 1;
        model.readers.push(readers);
        model.runs.push(run);
        model.head
    }
}
