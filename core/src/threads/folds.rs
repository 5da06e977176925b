//! The cached message folds of threads (`GET /v1/threads/:id/messages`).
//!
//! A thread's fold is built on its first read, from the store, a page at a
//! time; from then on every event of the thread that becomes durable here
//! is folded as its batch commits, so a read only folds what it lacks
//! (events another node appended, or that committed while the fold was
//! not cached). Only durable events are ever folded, and events never
//! change, so a fold stays valid across reloads of its thread; it is
//! dropped with the thread when the thread cache evicts it, or when the
//! folds together pass `limits.fold_cache_bytes` (least recently read
//! first). A fold past `limits.max_fold_bytes` is replaced by a marker:
//! its route answers `413` without folding it again. The route's body is
//! serialized once per change of the fold, not once per read.

use crate::config::Limits;
use crate::fold::MessageFold;
use crate::ids::ThreadId;
use crate::maps::HashMap;
use crate::model::StoredEvent;

#[derive(Debug)]
enum Entry {
    Live {
        fold: MessageFold,
        used: u64,
        /// The serialized fold, until the fold moves.
        body: Option<String>,
    },
    TooLarge,
}

impl Entry {
    /// The bytes this entry counts against the budget: the folded events
    /// and the serialized body kept beside them.
    fn held(&self) -> usize {
        match self {
            Entry::Live { fold, body, .. } => {
                fold.folded_bytes() + body.as_ref().map_or(0, String::len)
            }
            Entry::TooLarge => 0,
        }
    }
}

/// The folds, and the bytes they hold together.
#[derive(Debug, Default)]
pub(crate) struct Folds {
    entries: HashMap<ThreadId, Entry>,
    bytes: usize,
    tick: u64,
}

impl Folds {
    /// The seq the fold of `id` is folded through, starting an empty fold
    /// when there is none; `None` when it is too large.
    pub(crate) fn through(&mut self, id: &ThreadId) -> Option<u64> {
        self.tick += 1;
        let tick = self.tick;
        match self.entries.entry(id.clone()).or_insert(Entry::Live {
            fold: MessageFold::new(),
            used: tick,
            body: None,
        }) {
            Entry::Live { fold, used, .. } => {
                *used = tick;
                Some(fold.through_seq())
            }
            Entry::TooLarge => None,
        }
    }

    /// Folds the events of `id` that follow its fold (earlier ones are
    /// skipped, a gap stops); returns whether the fold moved.
    pub(crate) fn extend<'a>(
        &mut self,
        id: &ThreadId,
        events: impl IntoIterator<Item = &'a StoredEvent>,
        limits: &Limits,
    ) -> bool {
        let Some(entry) = self.entries.get_mut(id) else {
            return false;
        };
        let before = entry.held();
        let Entry::Live { fold, body, .. } = entry else {
            return false;
        };
        let start = fold.through_seq();
        for event in events {
            if event.seq <= fold.through_seq() {
                continue;
            }
            if fold.apply(event.seq, &event.json).is_err()
                || fold.folded_bytes() > limits.max_fold_bytes
            {
                break;
            }
        }
        let (moved, too_large) = (
            fold.through_seq() > start,
            fold.folded_bytes() > limits.max_fold_bytes,
        );
        if moved {
            *body = None;
        }
        if too_large {
            *entry = Entry::TooLarge;
        }
        self.bytes = self.bytes + entry.held() - before;
        self.bound(id, limits.fold_cache_bytes);
        moved
    }

    /// `event` of `id` became durable: fold it if the fold is right below.
    pub(crate) fn committed(&mut self, id: &ThreadId, event: &StoredEvent, limits: &Limits) {
        if let Some(Entry::Live { fold, .. }) = self.entries.get(id) {
            if fold.through_seq() + 1 == event.seq {
                self.extend(id, [event], limits);
            }
        }
    }

    /// Whether `id` has a fold within bounds.
    pub(crate) fn is_live(&self, id: &ThreadId) -> bool {
        matches!(self.entries.get(id), Some(Entry::Live { .. }))
    }

    /// The route's body for `id`: `{"messages":[…],"throughSeq":n}`,
    /// serialized when the fold moved since the last read.
    pub(crate) fn body(&mut self, id: &ThreadId, limits: &Limits) -> Option<String> {
        let Entry::Live { fold, body, .. } = self.entries.get_mut(id)? else {
            return None;
        };
        let text = match body {
            Some(text) => text.clone(),
            None => {
                let text = fold.to_json();
                self.bytes += text.len();
                *body = Some(text.clone());
                self.bound(id, limits.fold_cache_bytes);
                text
            }
        };
        Some(text)
    }

    /// Keeps only the folds of threads `keep` names.
    pub(crate) fn retain(&mut self, keep: impl Fn(&ThreadId) -> bool) {
        let mut dropped = 0;
        self.entries.retain(|id, entry| {
            let kept = keep(id);
            if !kept {
                dropped += entry.held();
            }
            kept
        });
        self.bytes -= dropped;
    }

    /// Drops the least recently read folds but `keep` until the rest hold
    /// at most `budget` bytes.
    fn bound(&mut self, keep: &ThreadId, budget: usize) {
        if self.bytes <= budget {
            return;
        }
        let mut live: Vec<(u64, usize, ThreadId)> = self
            .entries
            .iter()
            .filter(|(id, _)| *id != keep)
            .filter_map(|(id, e)| match e {
                Entry::Live { used, .. } => Some((*used, e.held(), id.clone())),
                Entry::TooLarge => None,
            })
            .collect();
        live.sort_unstable_by_key(|(used, _, _)| *used);
        for (_, bytes, id) in live {
            if self.bytes <= budget {
                break;
            }
            self.entries.remove(&id);
            self.bytes -= bytes;
        }
    }
}
