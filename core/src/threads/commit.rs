//! Writes: building each input's batch, sealing it with the versions it
//! expects, and what follows its outcome: durable, refused because another
//! writer changed a thread first, or overtaken by a change reported from
//! elsewhere. Also bounds the cache, which must never drop a thread with
//! writes in flight.

use std::collections::BTreeSet;

use crate::cluster::ClusterMessage;
use crate::ctx::Ctx;
use crate::ids::{BatchId, ConnId, ThreadId};
use crate::io::Output;
use crate::maps::HashSet;
use crate::outbox::{drop_recipients, Tag};
use crate::store::{Batch, ReadQuery, ThreadWrites, Write};
use crate::threads::cache::Slot;
use crate::threads::work::{Inflight, Op, Waiter, Work};
use crate::threads::ws::codec;
use crate::threads::Threads;

impl Threads {
    /// Adds `write` on `thread` to the current input's batch. The first
    /// write of a thread records the version it was decided on: a
    /// `CreateThread` expects no thread, anything else the cached thread's
    /// decided version.
    pub(super) fn write(&mut self, cx: &mut Ctx<'_>, thread: &ThreadId, write: Write) {
        cx.out.mark_writing();
        self.wrote = Some(thread.clone());
        if let Some(group) = self.building.iter_mut().find(|g| &g.thread_id == thread) {
            group.writes.push(write);
            return;
        }
        let expect = match write {
            Write::CreateThread { .. } => None,
            _ => self.cache.get(thread).map(|t| t.decided()),
        };
        self.building.push(ThreadWrites {
            thread_id: thread.clone(),
            expect,
            record: placeholder(thread),
            writes: vec![write],
        });
    }

    /// Seals the current input's writes into one batch.
    pub(super) fn seal(&mut self, cx: &mut Ctx<'_>) {
        if self.building.is_empty() {
            return;
        }
        let batch = cx.out.issued() + 1;
        let mut groups = std::mem::take(&mut self.building);
        for group in &mut groups {
            let version = cx.ids.version();
            if let Some(state) = self.cache.get_mut(&group.thread_id) {
                state.sealed(batch, version);
                group.record = state.record(&group.thread_id);
            }
        }
        self.batches
            .insert(batch, groups.iter().map(|g| g.thread_id.clone()).collect());
        cx.out.seal(Batch { threads: groups });
    }

    /// Every batch up to `batch` is durable.
    pub(crate) fn persisted(&mut self, cx: &mut Ctx<'_>, batch: BatchId) {
        let settled: Vec<u64> = self.batches.range(..=batch.0).map(|(b, _)| *b).collect();
        let mut stale = Vec::new();
        let mut changed = BTreeSet::new();
        for b in settled {
            for thread in self.batches.remove(&b).unwrap_or_default() {
                if let Some(state) = self.cache.get_mut(&thread) {
                    let (folds, limits) = (&mut self.folds, cx.limits);
                    state.persisted(batch.0, |event| folds.committed(&thread, &event, limits));
                    // Once per thread: a second reload would find it gone
                    // and rewind its subscriptions to their floor.
                    if state.stale && !state.in_flight() && !stale.contains(&thread) {
                        stale.push(thread.clone());
                    }
                    changed.insert(thread);
                }
            }
        }
        if cx.cluster {
            for thread in changed {
                if let Some(state) = self.cache.get(&thread) {
                    let at = state.durable();
                    cx.out.push_unfenced(Output::Broadcast {
                        message: ClusterMessage::ThreadChanged {
                            thread_id: thread,
                            head_seq: at.head_seq,
                            version: at.version,
                        },
                    });
                }
            }
        }
        while self.inflight.front().is_some_and(|op| op.batch <= batch.0) {
            self.inflight.pop_front();
        }
        for thread in stale {
            self.refresh(cx, &thread);
        }
    }

    /// `batch` is durable except the groups of `conflicts`: drop what those
    /// writes would have released, reload the threads, and decide their
    /// operations again (with every later write of theirs, which expected
    /// the refused version and so is refused too).
    pub(crate) fn persist_failed(
        &mut self,
        cx: &mut Ctx<'_>,
        batch: BatchId,
        conflicts: &[ThreadId],
    ) -> Vec<Inflight> {
        let mut doomed: Vec<&ThreadId> = conflicts
            .iter()
            .filter(|t| self.batches.get(&batch.0).is_some_and(|ts| ts.contains(t)))
            .collect();
        doomed.sort();
        doomed.dedup();
        cx.metrics.write_conflicts += doomed.len() as u64;
        let (rerun, keep): (Vec<Inflight>, Vec<Inflight>) = self
            .inflight
            .drain(..)
            .partition(|op| doomed.contains(&&op.thread));
        self.inflight = keep.into();
        let rerun_ids: HashSet<u64> = rerun.iter().map(|op| op.id).collect();
        let durable: Vec<(ThreadId, u64)> = doomed
            .iter()
            .map(|t| {
                let head = self.cache.get(t).map_or(0, |s| s.durable().head_seq);
                ((*t).clone(), head)
            })
            .collect();
        let redo = self.provisional_subscriptions(cx, batch, &doomed);
        let redone = |c: &ConnId, t: &ThreadId| redo.iter().any(|(rc, rt, _)| rc == c && rt == t);
        cx.out.discard(|tag, out| match tag {
            Tag::Plain => false,
            Tag::Op(id) => rerun_ids.contains(id),
            Tag::Subscription { conn, thread } => redone(conn, thread),
            Tag::Event { thread, seq } => {
                durable.iter().any(|(t, d)| t == &**thread && seq > d)
                    || drop_recipients(out, |conn| redone(&conn, thread))
            }
        });
        let mut rerun = rerun;
        for (conn, thread, from_seq) in redo {
            let id = self.new_op();
            rerun.push(Inflight {
                batch: batch.0,
                thread: thread.clone(),
                id,
                op: Op::Frame {
                    conn,
                    text: codec::subscribe(&thread, from_seq),
                },
            });
        }
        for threads in self.batches.values_mut() {
            threads.retain(|t| !doomed.contains(&t));
        }
        let doomed: Vec<ThreadId> = doomed.into_iter().cloned().collect();
        for thread in &doomed {
            self.reload(cx, thread);
        }
        rerun
    }

    /// Runs operations whose writes were refused again, in decision order.
    pub(crate) fn rerun(&mut self, cx: &mut Ctx<'_>, ops: Vec<Inflight>) {
        for op in ops {
            let since = self.cache.tick();
            self.works.insert(op.id, Work::new(op.op, since));
            self.resume(cx, op.id);
        }
    }

    /// Another writer changed `thread` to `head_seq`/`version`.
    pub(crate) fn changed(
        &mut self,
        cx: &mut Ctx<'_>,
        thread: &ThreadId,
        head_seq: u64,
        version: u64,
    ) {
        if self.loading.contains_key(thread) {
            self.load_for_cache(cx, thread);
            return;
        }
        match self.cache.touch(thread) {
            None => {}
            Some(Slot::Absent) => {
                self.cache.remove(thread);
                self.forget_answers(thread);
            }
            Some(Slot::Present(_)) => {
                let Some(state) = self.cache.get_mut(thread) else {
                    return;
                };
                if state.knows_version(version) || head_seq < state.durable().head_seq {
                    return;
                }
                state.announced_head = state.announced_head.max(head_seq);
                let idle =
                    !state.in_flight() && !self.building.iter().any(|g| &g.thread_id == thread);
                if idle && !self.sockets.followed_at_or_below(thread) {
                    // Nobody follows it or a thread below it here (whose
                    // access may rest on its grants): forget it rather
                    // than read it; its next use loads it again. Events
                    // still held for subscriptions that ended are
                    // withdrawn.
                    self.cache.remove(thread);
                    self.forget_answers(thread);
                    self.rewind_subscriptions(cx, thread, None);
                    return;
                }
                self.refresh(cx, thread);
            }
        }
    }

    /// Reads the record of every subscribed thread, to catch changes the
    /// broker lost ([`crate::Input::Recheck`]).
    /// A subscribed thread that is not cached (its reload failed) is loaded
    /// again, which resumes its subscriptions.
    pub(crate) fn recheck(&mut self, cx: &mut Ctx<'_>) {
        for thread in self.subscribed_threads() {
            if self.loading.contains_key(&thread) {
                continue;
            }
            if self.cache.get(&thread).is_none() {
                self.load_for_cache(cx, &thread);
                continue;
            }
            let query = ReadQuery::Thread {
                thread_id: thread.clone(),
            };
            self.new_read(cx, query, Waiter::Recheck { thread });
        }
    }

    /// A recheck read `thread` at `head_seq`/`version`: a version this
    /// engine does not know is a change nobody announced.
    pub(super) fn rechecked(
        &mut self,
        cx: &mut Ctx<'_>,
        thread: &ThreadId,
        head_seq: u64,
        version: u64,
    ) {
        let Some(state) = self.cache.get(thread) else {
            return;
        };
        if state.knows_version(version) || head_seq < state.durable().head_seq {
            return;
        }
        cx.metrics.missed_changes += 1;
        self.changed(cx, thread, head_seq, version);
    }

    /// Reads `thread` again once nothing of ours is in flight on it (its
    /// writes would be refused by then, or their outcome would tell).
    pub(super) fn refresh(&mut self, cx: &mut Ctx<'_>, thread: &ThreadId) {
        let writing = self.building.iter().any(|g| &g.thread_id == thread);
        if let Some(state) = self.cache.get_mut(thread) {
            if writing || state.in_flight() {
                state.stale = true;
                self.hold_subscriptions(cx, thread);
                return;
            }
        }
        self.reload(cx, thread);
    }

    /// Forgets `thread` and reads it again; its subscriptions resume from
    /// what they were sent that is durable.
    pub(super) fn reload(&mut self, cx: &mut Ctx<'_>, thread: &ThreadId) {
        // A thread no longer cached (its reload is already under way, or
        // failed) keeps its subscriptions where that reload put them.
        let durable = self.cache.get(thread).map(|s| s.durable().head_seq);
        self.cache.remove(thread);
        self.forget_answers(thread);
        self.rewind_subscriptions(cx, thread, durable);
        self.load_for_cache(cx, thread);
    }

    /// Bounds the cache: threads with subscriptions or writes in flight,
    /// their ancestors, and threads a parked operation may still use stay.
    pub(super) fn trim(&mut self, cx: &mut Ctx<'_>) {
        let capacity = cx.limits.thread_cache;
        if self.cache.len() > capacity {
            let mut pinned: HashSet<ThreadId> =
                self.sockets.followed_and_above().cloned().collect();
            let in_flight = self.batches.values().flatten().chain(self.loading.keys());
            for id in in_flight {
                if pinned.insert(id.clone()) {
                    pinned.extend(self.cache.ancestors(id).cloned());
                }
            }
            self.cache.trim(capacity, self.oldest_work(), &pinned);
            let (cache, loading) = (&self.cache, &self.loading);
            self.folds
                .retain(|id| cache.knows(id) || loading.contains_key(id));
        }
        cx.metrics.thread_cache_entries = self.cache.len() as u64;
    }
}

/// A group's record until the batch is sealed.
fn placeholder(thread: &ThreadId) -> crate::store::ThreadRecord {
    crate::store::ThreadRecord {
        thread_id: thread.clone(),
        parent_thread_id: None,
        title: None,
        created_at: String::new(),
        head_seq: 0,
        version: 0,
        grants: Vec::new(),
        participants: Vec::new(),
    }
}
