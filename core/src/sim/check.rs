//! The invariants: checked on every output as it leaves an engine, on the
//! store after every step, and on the whole deployment once it is quiet.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::http::HttpResponse;
use crate::ids::{Millis, ThreadId};
use crate::store::{Backend, Batch, MemoryStore, ReadQuery, ReadResult, ThreadRecord, Write};

use super::clients::{Presence, Sub};
use super::step::THREADS;
use super::world::{self, thread_id, Call, World, PRINCIPALS};

/// What the run has established so far, to judge later outputs by.
#[derive(Debug, Default)]
pub(crate) struct Facts {
    /// Per durable event, who could read the thread when it was committed
    /// (before or after its group).
    readable: BTreeMap<(ThreadId, u64), BTreeSet<String>>,
    /// `201 Created` answers per thread.
    created: BTreeMap<u8, u32>,
    /// The publications answered per publication key, in order, with when
    /// each was first answered (a key is free again once the retention of
    /// its latest has passed).
    publications: BTreeMap<u8, Vec<(String, Millis)>>,
    /// The highest seq any engine has asked to persist, per thread.
    issued: BTreeMap<ThreadId, u64>,
    /// Events of each thread already checked in the store.
    checked: BTreeMap<u8, u64>,
    /// The data of every publication delivered to some socket.
    pub(crate) published: BTreeSet<String>,
    /// The data of requests answered as a duplicate of an earlier one.
    pub(crate) duplicates: BTreeSet<String>,
    /// Group commits applied so far.
    pub(crate) commits: u64,
    /// Per thread, each commit of its group: its number, the version it
    /// left, and who could read the thread after it.
    reader_log: BTreeMap<ThreadId, Vec<(u64, u64, BTreeSet<String>)>>,
}

fn record(store: &MemoryStore, thread: &ThreadId) -> Option<ThreadRecord> {
    match store.read(&ReadQuery::Thread {
        thread_id: thread.clone(),
    }) {
        Ok(ReadResult::Thread(record)) => record,
        _ => None,
    }
}

/// The durable head of `thread` (0 when it does not exist).
pub(super) fn head(store: &MemoryStore, thread: &ThreadId) -> u64 {
    record(store, thread).map_or(0, |r| r.head_seq)
}

impl Facts {
    /// Who can read `thread` per its durable record (the admin always can).
    pub(crate) fn readers(&self, store: &MemoryStore, thread: &ThreadId) -> BTreeSet<String> {
        let mut readers: BTreeSet<String> = record(store, thread)
            .map(|r| {
                r.grants
                    .iter()
                    .map(|(p, _)| p.as_str().to_owned())
                    .collect()
            })
            .unwrap_or_default();
        readers.insert(PRINCIPALS[0].to_owned());
        readers
    }

    pub(crate) fn committed_event(
        &mut self,
        thread: &ThreadId,
        seq: u64,
        before: &BTreeSet<String>,
        after: &BTreeSet<String>,
    ) {
        let readers = before.union(after).cloned().collect();
        self.readable.insert((thread.clone(), seq), readers);
    }

    /// `thread`'s group committed; `after` can read it now.
    pub(crate) fn committed_group(
        &mut self,
        thread: &ThreadId,
        version: u64,
        after: BTreeSet<String>,
    ) {
        self.commits += 1;
        self.reader_log
            .entry(thread.clone())
            .or_default()
            .push((self.commits, version, after));
    }

    /// The commit that left `thread` at `version` (0 if none did).
    pub(crate) fn commit_of(&self, thread: &ThreadId, version: u64) -> u64 {
        self.reader_log
            .get(thread)
            .and_then(|log| log.iter().find(|(_, v, _)| *v == version))
            .map_or(0, |(at, _, _)| *at)
    }

    /// Whether `who` could read `thread` in its state after commit `since`
    /// or any later one.
    fn could_read_since(&self, thread: &ThreadId, since: u64, who: &str) -> bool {
        who == PRINCIPALS[0]
            || self.reader_log.get(thread).is_some_and(|log| {
                log.iter()
                    .any(|(at, _, readers)| *at >= since && readers.contains(who))
            })
    }

    pub(crate) fn issued(&mut self, batch: &Batch) {
        for group in &batch.threads {
            for write in &group.writes {
                if let Write::AppendEvent { seq, .. } = write {
                    let max = self.issued.entry(group.thread_id.clone()).or_default();
                    *max = (*max).max(*seq);
                }
            }
        }
    }
}

impl World {
    /// Checks an event an engine released: it is durable at its seq,
    /// byte-for-byte the stored one, and (for a delivery by `node` to
    /// `who`) `who` could read the thread when the event was committed (a
    /// revocation that became durable in the same group commit), or can in
    /// the thread's state the node last learned or any later one (a
    /// revocation made elsewhere applies once the node hears of it).
    pub(crate) fn check_event(
        &mut self,
        thread: u8,
        event: &Value,
        to: Option<(usize, usize)>,
        what: &str,
    ) {
        let id = thread_id(thread);
        let seq = event["seq"].as_u64().unwrap_or(0);
        let query = ReadQuery::Events {
            thread_id: id.clone(),
            from_seq: seq,
            through_seq: seq,
            limit: 1,
        };
        let stored = match self.store.read(&query) {
            Ok(ReadResult::Events(events)) => events,
            _ => Vec::new(),
        };
        let same = stored.first().is_some_and(|s| {
            serde_json::from_str::<Value>(&s.json).is_ok_and(|stored| &stored == event)
        });
        if !same {
            self.fail(format!(
                "{what} released t{thread}#{seq} that is not durable as sent: {event}"
            ));
            return;
        }
        if let Some((node, who)) = to {
            let principal = PRINCIPALS[who];
            let known = self.nodes[node].known_commit.get(&id).copied().unwrap_or(0);
            let allowed = self
                .facts
                .readable
                .get(&(id.clone(), seq))
                .is_some_and(|r| r.contains(principal))
                || self.facts.could_read_since(&id, known, principal);
            if !allowed {
                self.fail(format!(
                    "{what} delivered t{thread}#{seq} to {} who could not read it (readers then: {:?}; event {event})",
                    PRINCIPALS[who],
                    self.facts.readable.get(&(thread_id(thread), seq))
                ));
            }
        }
    }

    /// Checks the answer to one request.
    pub(crate) fn check_response(&mut self, call: Call, response: &HttpResponse) {
        let body: Value = serde_json::from_str(&response.body).unwrap_or_default();
        if response.status == 500 {
            self.fail(format!("{call:?} answered 500: {}", response.body));
            return;
        }
        let ok = (200..300).contains(&response.status);
        match call {
            Call::Append { thread, key } if ok => {
                self.check_event(thread, &body["event"], None, "an append's answer");
                if let Some(key) = key {
                    let query = ReadQuery::Idempotent {
                        thread_id: thread_id(thread),
                        key: key.clone(),
                    };
                    let stored = match self.store.read(&query) {
                        Ok(ReadResult::Event(Some(e))) => Some(e.seq),
                        _ => None,
                    };
                    if stored != body["event"]["seq"].as_u64() {
                        self.fail(format!(
                            "append with key {key} to t{thread} answered {} but the key holds {stored:?}",
                            body["event"]["seq"]
                        ));
                    }
                }
            }
            Call::History {
                thread,
                who,
                from,
                limit,
                since,
            } if ok => {
                let events = body["events"].as_array().cloned().unwrap_or_default();
                let can_read =
                    self.facts
                        .could_read_since(&thread_id(thread), since, PRINCIPALS[who]);
                if !can_read {
                    self.fail(format!(
                        "{} read t{thread}'s history without access",
                        PRINCIPALS[who]
                    ));
                }
                if events.len() > limit {
                    self.fail(format!(
                        "a history page of t{thread} exceeds its limit {limit}"
                    ));
                }
                for (event, seq) in events.iter().zip(from..) {
                    if event["seq"].as_u64() != Some(seq) {
                        self.fail(format!(
                            "history of t{thread} from {from} is not contiguous: {body}"
                        ));
                        return;
                    }
                    self.check_event(thread, event, None, "a history page");
                }
                let last = from + events.len() as u64;
                if let Some(next) = body["nextSeq"].as_u64() {
                    if next != last {
                        self.fail(format!(
                            "history of t{thread} from {from}: nextSeq {next}, expected {last}"
                        ));
                    }
                }
            }
            Call::Create { thread } if response.status == 201 => {
                let created = self.facts.created.entry(thread).or_default();
                *created += 1;
                if *created > 1 {
                    self.fail(format!("t{thread} was created twice"));
                } else if record(&self.store, &thread_id(thread)).is_none() {
                    self.fail(format!(
                        "t{thread}'s creation was acknowledged before it was durable"
                    ));
                }
            }
            Call::Auth if ok => self.auth_answer = Some(body),
            Call::Publish {
                key: Some(key),
                data,
            } if ok => {
                if body["duplicate"] == true {
                    if self.facts.published.contains(&data) {
                        self.fail(format!(
                            "publication {data} was delivered and answered duplicate"
                        ));
                    }
                    self.facts.duplicates.insert(data);
                }
                let id = body["publicationId"].as_str().unwrap_or("").to_owned();
                let (now, retention) = (self.now, world::retention_ms());
                let seen = self.facts.publications.entry(key).or_default();
                // An id seen before is the key's latest publication, or an
                // older one a node still remembers (docs/simulation.md).
                let known = seen.iter().any(|(earlier, _)| *earlier == id);
                let free = seen.last().is_none_or(|(_, at)| now.0 >= at.0 + retention);
                if !known && free {
                    seen.push((id, now));
                } else if !known {
                    let latest = seen.last().map(|(l, _)| l.clone()).unwrap_or_default();
                    self.fail(format!(
                        "publication key {key} answered {id} after {latest}: published twice"
                    ));
                }
            }
            _ => {}
        }
    }

    /// Checks the `throughSeq`s announced by the outputs just performed.
    pub(crate) fn end_outputs(&mut self) {
        for opened in std::mem::take(&mut self.deferred) {
            let id = thread_id(opened.thread);
            let hi = head(&self.store, &id).max(self.facts.issued.get(&id).copied().unwrap_or(0));
            if opened.through < opened.lo || opened.through > hi {
                self.fail(format!(
                    "node {} opened t{} at throughSeq {}, outside the heads {}..={hi} it could have had",
                    opened.node, opened.thread, opened.through, opened.lo
                ));
            }
        }
    }

    /// Checks the store after a step: each thread's events are exactly
    /// 1..=head, each stored with its own seq and thread.
    pub(crate) fn check_store(&mut self) {
        for thread in 0..THREADS {
            let id = thread_id(thread);
            let head = head(&self.store, &id);
            let checked = self.facts.checked.get(&thread).copied().unwrap_or(0);
            if head < checked {
                self.fail(format!(
                    "t{thread}'s head went back from {checked} to {head}"
                ));
                return;
            }
            let query = ReadQuery::Events {
                thread_id: id.clone(),
                from_seq: checked + 1,
                through_seq: u64::MAX,
                limit: usize::MAX,
            };
            let events = match self.store.read(&query) {
                Ok(ReadResult::Events(events)) => events,
                _ => Vec::new(),
            };
            if events.len() as u64 != head - checked {
                self.fail(format!(
                    "t{thread} holds {} events after #{checked} but its head is {head}",
                    events.len()
                ));
                return;
            }
            for (event, seq) in events.iter().zip(checked + 1..) {
                let json: Value = serde_json::from_str(&event.json).unwrap_or_default();
                if event.seq != seq || json["seq"] != seq || json["threadId"] != id.as_str() {
                    self.fail(format!("t{thread}#{seq} is stored as {}", event.json));
                    return;
                }
            }
            self.facts.checked.insert(thread, head);
        }
    }

    /// Checks the quiet deployment: every request answered, every
    /// subscription delivered exactly up to the head and still readable,
    /// every presence view equal to the users connected to it.
    pub(crate) fn check_settled(&mut self) {
        for (n, node) in self.nodes.iter().enumerate() {
            if let Some((req, call)) = node.requests.iter().next() {
                let message = format!("node {n} never answered {req:?} ({call:?})");
                self.fail(message);
                return;
            }
        }
        let slots: Vec<u8> = self.ws.keys().copied().collect();
        for slot in slots {
            self.check_settled_ws(slot);
        }
        let expected: BTreeSet<String> = self
            .channels
            .values()
            .filter(|c| matches!(c.presence, Presence::In(_)))
            .map(|c| c.user.clone())
            .collect();
        let mut problems = Vec::new();
        for (slot, client) in &self.channels {
            if let Presence::In(members) = &client.presence {
                if *members != expected {
                    problems.push(format!(
                        "channel slot {slot} on node {} sees members {members:?}, connected are {expected:?}",
                        client.node
                    ));
                }
            }
        }
        if let Some(problem) = problems.into_iter().next() {
            self.fail(problem);
        }
    }

    fn check_settled_ws(&mut self, slot: u8) {
        let Some(client) = self.ws.get(&slot) else {
            return;
        };
        let (who, node, conn) = (client.who, client.node, client.conn);
        let subs = client.subs.clone();
        let Some(registered) = self.nodes[node].engine.thread_subscriptions(conn) else {
            self.fail(format!("node {node} forgot the open socket of slot {slot}"));
            return;
        };
        let registered: BTreeMap<ThreadId, u64> = registered.into_iter().collect();
        let mut kept = BTreeMap::new();
        for (thread, sub) in subs {
            let id = thread_id(thread);
            match sub {
                Sub::Open { next, .. } => {
                    let head = head(&self.store, &id);
                    if registered.get(&id) != Some(&next) {
                        self.fail(format!(
                            "slot {slot}: t{thread} open at next {next}, the engine has {:?}",
                            registered.get(&id)
                        ));
                    } else if next != head + 1 {
                        self.fail(format!(
                            "slot {slot}: t{thread} delivered through #{} but the head is {head}",
                            next - 1
                        ));
                    } else if !self
                        .facts
                        .readers(&self.store, &id)
                        .contains(PRINCIPALS[who])
                    {
                        self.fail(format!(
                            "slot {slot}: {} still subscribes to t{thread} without access",
                            PRINCIPALS[who]
                        ));
                    }
                    kept.insert(thread, sub);
                }
                Sub::Doomed {
                    from,
                    durable,
                    through,
                } => self.fail(format!(
                    "slot {slot} subscribed to t{thread} from #{from} with #{durable} durable, was opened at throughSeq {through} and never ended"
                )),
                Sub::Subscribing { .. } | Sub::Leftover => {
                    if registered.contains_key(&id) {
                        self.fail(format!(
                            "slot {slot}: t{thread} is registered but the client was never told ({sub:?})"
                        ));
                    }
                }
            }
        }
        for id in registered.keys() {
            let known =
                super::world::thread_index(id.as_str()).is_some_and(|t| kept.contains_key(&t));
            if !known {
                self.fail(format!(
                    "slot {slot}: the engine holds a subscription to {id} the client does not"
                ));
            }
        }
        if let Some(client) = self.ws.get_mut(&slot) {
            client.subs = kept;
        }
    }
}
