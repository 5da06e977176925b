//! The simulated host's side of each step: completing, delaying and
//! failing what the engines asked for, the broker between them, time, and
//! crashes.

use std::collections::{BTreeSet, VecDeque};

use crate::cluster::{ChannelRow, ClaimOutcome, ClusterMessage, MemberRow, NodeState};
use crate::ids::{BatchId, ConnId, ThreadId};
use crate::io::Input;
use crate::store::{Backend, Batch, ReadQuery, ReadResult, StoreError, Write};

use super::world::{thread_id, Owner, Relayed, World, APP};

impl World {
    /// Answers (or fails) one pending read of node `n`.
    pub(crate) fn answer_read(&mut self, n: usize, pick: usize, fail: bool) {
        let reads = &mut self.nodes[n].reads;
        if reads.is_empty() {
            return;
        }
        let (read, query) = reads.remove(pick % reads.len());
        let result = if fail {
            Err(StoreError::Unavailable("injected read failure".into()))
        } else {
            self.store.read(&query)
        };
        if let Ok(ReadResult::Thread(Some(record))) = &result {
            self.saw_version(n, &record.thread_id, record.version);
        }
        self.feed(n, Input::ReadDone { read, result });
    }

    /// Commits the first `count` pending batches of node `n` and reports
    /// them; when the store is `unavailable`, applies nothing and reports
    /// every group refused.
    pub(crate) fn persist(&mut self, n: usize, count: usize, unavailable: bool) {
        let count = count.min(self.nodes[n].batches.len());
        let taken: Vec<(BatchId, Batch)> = self.nodes[n].batches.drain(..count).collect();
        let mut reports = Vec::new();
        for (batch, writes) in taken {
            let refused = if unavailable {
                writes.threads.iter().map(|g| g.thread_id.clone()).collect()
            } else {
                self.commit(&writes)
            };
            reports.push((batch, refused));
        }
        let mut last = None;
        for (batch, refused) in reports {
            if refused.is_empty() {
                last = Some(batch);
                continue;
            }
            if let Some(done) = last.take() {
                self.feed(n, Input::Persisted { batch: done });
            }
            self.feed(
                n,
                Input::PersistFailed {
                    batch,
                    conflicts: refused,
                },
            );
        }
        if let Some(batch) = last {
            self.feed(n, Input::Persisted { batch });
        }
        for (thread, head, version) in std::mem::take(&mut self.learned) {
            self.saw_head(n, &thread, head);
            self.saw_version(n, &thread, version);
        }
    }

    /// Applies one batch to the store, recording who could read each event
    /// it makes durable; returns the refused threads.
    fn commit(&mut self, writes: &Batch) -> Vec<ThreadId> {
        let before: Vec<_> = writes
            .threads
            .iter()
            .map(|g| self.facts.readers(&self.store, &g.thread_id))
            .collect();
        let refused = match self.store.apply(&[writes]) {
            Ok(mut per_batch) => per_batch.pop().unwrap_or_default(),
            Err(e) => {
                self.fail(format!("the memory store failed: {e}"));
                return Vec::new();
            }
        };
        for (group, before) in writes.threads.iter().zip(before) {
            if refused.contains(&group.thread_id) {
                continue;
            }
            // The states between the group's writes were decided in order
            // and acknowledged with it: a read between a grant and its
            // revocation in one group is a read with access.
            let after = self.facts.readers(&self.store, &group.thread_id);
            let mut current = before.clone();
            for write in &group.writes {
                match write {
                    Write::PutGrant { principal_id, .. } => {
                        current.insert(principal_id.as_str().to_owned());
                        self.facts
                            .committed_group(&group.thread_id, 0, current.clone());
                    }
                    Write::DeleteGrant { principal_id, .. } => {
                        current.remove(principal_id.as_str());
                        self.facts
                            .committed_group(&group.thread_id, 0, current.clone());
                    }
                    Write::AppendEvent { seq, .. } => {
                        let then: BTreeSet<String> = current.union(&after).cloned().collect();
                        self.facts
                            .committed_event(&group.thread_id, *seq, &before, &then);
                    }
                    _ => {}
                }
            }
            self.facts
                .committed_group(&group.thread_id, group.record.version, after);
            self.learned.push((
                group.thread_id.clone(),
                group.record.head_seq,
                group.record.version,
            ));
        }
        refused
    }

    /// Another writer commits a new version of thread `thread` (same
    /// content), announcing it through the broker or not at all.
    pub(crate) fn second_writer(&mut self, thread: u8, announce: bool) {
        let id = thread_id(thread);
        let Ok(ReadResult::Thread(Some(mut record))) = self.store.read(&ReadQuery::Thread {
            thread_id: id.clone(),
        }) else {
            return;
        };
        self.counter += 1;
        let expect = record.at();
        record.version = record.version.wrapping_mul(31).wrapping_add(self.counter) | 1;
        let batch = Batch {
            threads: vec![crate::store::ThreadWrites {
                thread_id: id.clone(),
                expect: Some(expect),
                record: record.clone(),
                writes: Vec::new(),
            }],
        };
        if self.store.apply(&[&batch]).is_err() {
            self.fail("the memory store failed".into());
        }
        let readers = self.facts.readers(&self.store, &id);
        self.facts.committed_group(&id, record.version, readers);
        if announce {
            let ghost = self.nodes.len();
            for to in 0..self.nodes.len() {
                self.relays
                    .entry((ghost, to))
                    .or_default()
                    .push_back(Relayed::Changed {
                        thread: id.clone(),
                        head_seq: record.head_seq,
                        version: record.version,
                    });
            }
        }
    }

    /// Delivers the next broker message from `from` to `to`; a thread
    /// change is dropped when `drop` says so.
    pub(crate) fn relay(&mut self, from: usize, to: usize, drop: bool) -> bool {
        let Some(message) = self
            .relays
            .get_mut(&(from, to))
            .and_then(VecDeque::pop_front)
        else {
            return false;
        };
        let from_name = self
            .nodes
            .get(from)
            .map_or_else(|| "second-writer".to_owned(), |node| node.name.clone());
        match message {
            Relayed::Cluster(ClusterMessage::ThreadChanged { .. }) | Relayed::Changed { .. }
                if drop => {}
            Relayed::Cluster(message) => {
                if let ClusterMessage::ThreadChanged {
                    thread_id,
                    head_seq,
                    ..
                } = &message
                {
                    self.saw_head(to, thread_id, *head_seq);
                    if let ClusterMessage::ThreadChanged { version, .. } = &message {
                        self.saw_version(to, thread_id, *version);
                    }
                }
                self.feed(
                    to,
                    Input::Remote {
                        node: &from_name,
                        message,
                    },
                );
            }
            Relayed::Changed {
                thread,
                head_seq,
                version,
            } => {
                self.saw_head(to, &thread, head_seq);
                self.saw_version(to, &thread, version);
                self.feed(
                    to,
                    Input::Changed {
                        thread,
                        head_seq,
                        version,
                    },
                );
            }
        }
        true
    }

    /// Node `n` has been told of `thread` at `version`: it knows at least
    /// the commit that made it.
    fn saw_version(&mut self, n: usize, thread: &ThreadId, version: u64) {
        let commit = self.facts.commit_of(thread, version);
        let known = self.nodes[n]
            .known_commit
            .entry(thread.clone())
            .or_default();
        *known = (*known).max(commit);
    }

    fn saw_head(&mut self, n: usize, thread: &ThreadId, head: u64) {
        let known = self.nodes[n].known_head.entry(thread.clone()).or_default();
        *known = (*known).max(head);
    }

    /// The broker settles one pending key claim of node `n`.
    pub(crate) fn claim(&mut self, n: usize, pick: usize) {
        let claims = &mut self.nodes[n].claims;
        if claims.is_empty() {
            return;
        }
        let pending = claims.remove(pick % claims.len());
        let outcome = match self.broker_keys.get(&pending.key) {
            Some((value, expires)) if *expires > self.now => ClaimOutcome::Taken(value.clone()),
            _ => {
                let expires = self.now.plus(pending.ttl_ms);
                self.broker_keys
                    .insert(pending.key.clone(), (pending.value, expires));
                ClaimOutcome::Won
            }
        };
        self.feed(
            n,
            Input::Claimed {
                claim: pending.claim,
                outcome,
            },
        );
    }

    /// A socket of node `n` waiting for it reports it drained.
    pub(crate) fn drain(&mut self, n: usize, pick: usize) {
        let ready: Vec<ConnId> = self.nodes[n]
            .drains
            .iter()
            .copied()
            .filter(|c| !self.stalled(*c))
            .collect();
        if ready.is_empty() {
            return;
        }
        let conn = ready[pick % ready.len()];
        self.nodes[n].drains.remove(&conn);
        self.feed(n, Input::Drained { conn });
    }

    /// Time jumps to the earliest deadline; every engine due gets `Tick`.
    pub(crate) fn advance_time(&mut self) {
        let next = self
            .nodes
            .iter()
            .filter_map(|node| node.engine.poll_timeout())
            .min();
        self.now = next.map_or(self.now.plus(1_000), |at| self.now.max(at));
        for n in 0..self.nodes.len() {
            if self.nodes[n]
                .engine
                .poll_timeout()
                .is_some_and(|at| at <= self.now)
            {
                self.feed(n, Input::Tick);
            }
        }
    }

    /// The other nodes' channel state, as the broker holds it.
    fn state_for(&self, n: usize) -> Vec<NodeState> {
        self.rows
            .iter()
            .filter(|(node, _)| **node != n)
            .map(|(node, rows)| NodeState {
                node: self.nodes[*node].name.clone(),
                seq: rows.seq,
                since: rows.since,
                members: rows
                    .members
                    .iter()
                    .map(|((channel, user), info)| MemberRow {
                        app_id: APP.into(),
                        channel: channel.clone(),
                        user_id: user.clone(),
                        user_info: info.clone(),
                    })
                    .collect(),
                channels: rows
                    .counts
                    .iter()
                    .map(|(channel, count)| ChannelRow {
                        app_id: APP.into(),
                        channel: channel.clone(),
                        count: *count,
                    })
                    .collect(),
            })
            .collect()
    }

    /// The broker hands node `n` everyone else's channel state.
    pub(crate) fn remote_presence(&mut self, n: usize) {
        let nodes = self.state_for(n);
        self.feed(n, Input::ClusterState { nodes });
    }

    /// Node `n` crashes: its sockets drop, its unreported work is lost
    /// except the first `keep` batches, which had landed in the store. It
    /// restarts empty over the same store; the broker tells the others.
    pub(crate) fn restart(&mut self, n: usize, keep: usize) {
        let batches: Vec<(BatchId, Batch)> = self.nodes[n].batches.drain(..).collect();
        for (_, writes) in batches.iter().take(keep) {
            self.commit(writes);
        }
        self.learned.clear();
        let conns: Vec<ConnId> = self
            .owners
            .iter()
            .filter(|(_, owner)| match owner {
                Owner::Ws(slot) => self.ws.get(slot).is_some_and(|c| c.node == n),
                Owner::Channel(slot) => self.channels.get(slot).is_some_and(|c| c.node == n),
            })
            .map(|(conn, _)| *conn)
            .collect();
        for conn in conns {
            self.forget_conn(conn);
        }
        self.rows.remove(&n);
        self.relays.retain(|(_, to), _| *to != n);
        let name = self.nodes[n].name.clone();
        self.broadcast(n, ClusterMessage::NodeGone { node: name });
        self.nodes[n] = self.fresh_node(n);
        self.remote_presence(n);
    }

    /// Completes everything pending: reads (none fail), batches, claims,
    /// drains (stalled sockets resume), broker messages; then the broker
    /// repairs presence and every node rechecks its threads, and the whole
    /// runs again until nothing moves.
    pub(crate) fn quiesce(&mut self) {
        for client in self.ws.values_mut() {
            client.stalled = false;
        }
        self.run_until_quiet();
        for n in 0..self.nodes.len() {
            self.remote_presence(n);
            self.feed(n, Input::Recheck);
        }
        self.run_until_quiet();
    }

    fn run_until_quiet(&mut self) {
        for _ in 0..100_000 {
            if self.violation.is_some() || !self.one_completion() {
                return;
            }
        }
        self.fail("the deployment never went quiet".into());
    }

    fn one_completion(&mut self) -> bool {
        for n in 0..self.nodes.len() {
            if !self.nodes[n].reads.is_empty() {
                self.answer_read(n, 0, false);
                return true;
            }
            if !self.nodes[n].batches.is_empty() {
                let all = self.nodes[n].batches.len();
                self.persist(n, all, false);
                return true;
            }
            if !self.nodes[n].claims.is_empty() {
                self.claim(n, 0);
                return true;
            }
            if !self.nodes[n].drains.is_empty() {
                self.drain(n, 0);
                return true;
            }
        }
        let keys: Vec<(usize, usize)> = self
            .relays
            .iter()
            .filter(|(_, q)| !q.is_empty())
            .map(|(k, _)| *k)
            .collect();
        for (from, to) in keys {
            if self.relay(from, to, false) {
                return true;
            }
        }
        false
    }
}
