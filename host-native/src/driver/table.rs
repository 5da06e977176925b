//! Connection ids that index the engine task's table of sockets.
//!
//! The engine names a socket in every frame it sends, so the engine task
//! looks one up per delivery (and again when it writes the socket at the
//! end of its turn). A connection id is a slot of [`Table`] in its low 32
//! bits and the slot's generation in its high 32 bits: a lookup is an index
//! and one comparison, no hashing. A slot is reused once its socket left
//! the table, under a new generation, so an id is never reused while the
//! engine may still know it, and a late command naming a socket that is
//! gone (its `Closed` report, a frame that was on its way) matches nothing.

use std::sync::Arc;

use parking_lot::Mutex;

use bubble_core::ConnId;

use super::conn::{prefetch, ConnHandle};
use super::uring::Ring;

/// Hands out connection ids (the socket tasks) and takes back the slots
/// of sockets that left the table (the engine task).
#[derive(Debug, Default)]
pub(crate) struct ConnIds {
    slots: Mutex<Slots>,
}

#[derive(Debug, Default)]
struct Slots {
    /// The generation each slot is at.
    generations: Vec<u32>,
    /// Slots no socket holds.
    free: Vec<u32>,
}

fn slot(conn: ConnId) -> usize {
    (conn.0 & u64::from(u32::MAX)) as usize
}

impl ConnIds {
    /// An id no open socket holds, nor any socket the engine may still know.
    pub(crate) fn next(&self) -> ConnId {
        let mut slots = self.slots.lock();
        let slot = match slots.free.pop() {
            Some(slot) => slot,
            None => {
                let slot = u32::try_from(slots.generations.len()).unwrap_or(u32::MAX);
                slots.generations.push(0);
                slot
            }
        };
        let generation = slots.generations[slot as usize];
        ConnId(u64::from(generation) << 32 | u64::from(slot))
    }

    /// `conn`'s slot may be handed out again, under the next generation.
    fn release(&self, conn: ConnId) {
        let mut slots = self.slots.lock();
        let slot = slot(conn);
        if let Some(generation) = slots.generations.get_mut(slot) {
            *generation = generation.wrapping_add(1);
            slots.free.push(slot as u32);
        }
    }
}

/// How many sockets ahead a loop over sockets starts loading their queues
/// (see [`ConnHandle::prefetch`]).
const PREFETCH_AHEAD: usize = 4;

/// The engine task's open sockets, by slot, and the ring that writes them.
pub(super) struct Table {
    ids: Arc<ConnIds>,
    slots: Vec<Option<Entry>>,
    open: usize,
    /// Writes a turn's sockets in one submission; `None`: one `send` each.
    ring: Option<Ring>,
}

/// The entry of the open socket `conn` in `slots`.
fn entry(slots: &[Option<Entry>], conn: ConnId) -> Option<&Entry> {
    match slots.get(slot(conn)) {
        Some(Some(entry)) if entry.conn == conn => Some(entry),
        _ => None,
    }
}

/// Starts loading what a loop over `conns`, now at `at`, touches a few
/// sockets on: the entry in `slots` [`PREFETCH_AHEAD`] sockets beyond the
/// queue, and the queue [`PREFETCH_AHEAD`] sockets on, its entry loaded by
/// then.
fn prefetch_ahead(slots: &[Option<Entry>], conns: &[ConnId], at: usize) {
    if let Some(far) = conns
        .get(at + 2 * PREFETCH_AHEAD)
        .and_then(|&far| slots.get(slot(far)))
    {
        prefetch(far);
    }
    if let Some(near) = conns
        .get(at + PREFETCH_AHEAD)
        .and_then(|&near| entry(slots, near))
    {
        near.handle.prefetch();
    }
}

/// One open socket.
struct Entry {
    conn: ConnId,
    handle: ConnHandle,
    /// Registered with the ring under its slot.
    registered: bool,
}

impl Table {
    /// An empty table whose ids come from `ids`, writing through `ring`
    /// when there is one.
    pub(super) fn new(ids: Arc<ConnIds>, ring: Option<Ring>) -> Table {
        Table {
            ids,
            slots: Vec::new(),
            open: 0,
            ring,
        }
    }

    /// The open socket `conn`.
    pub(super) fn get(&self, conn: ConnId) -> Option<&ConnHandle> {
        entry(&self.slots, conn).map(|entry| &entry.handle)
    }

    /// Starts loading what a loop over `conns`, now at `at`, touches a few
    /// sockets on (see [`prefetch_ahead`]).
    pub(super) fn prefetch_ahead(&self, conns: &[ConnId], at: usize) {
        prefetch_ahead(&self.slots, conns, at);
    }

    /// Whether `conn` is open.
    pub(super) fn contains(&self, conn: ConnId) -> bool {
        self.get(conn).is_some()
    }

    /// Registers a socket under the id [`ConnIds::next`] gave it.
    pub(super) fn insert(&mut self, conn: ConnId, handle: ConnHandle) {
        let slot = slot(conn);
        if self.slots.len() <= slot {
            self.slots.resize_with(slot + 1, || None);
        }
        let registered = match (&self.ring, handle.raw_fd()) {
            (Some(ring), Some(fd)) => ring.register(slot, fd),
            _ => false,
        };
        let entry = Entry {
            conn,
            handle,
            registered,
        };
        if self.slots[slot].replace(entry).is_none() {
            self.open += 1;
        }
    }

    /// Takes `conn` out of the table, freeing its slot.
    pub(super) fn remove(&mut self, conn: ConnId) -> Option<ConnHandle> {
        let at = slot(conn);
        let entry = self.slots.get_mut(at)?;
        if entry.as_ref().is_none_or(|e| e.conn != conn) {
            return None;
        }
        let entry = entry.take()?;
        if let (true, Some(ring)) = (entry.registered, &self.ring) {
            ring.unregister(at);
        }
        self.open -= 1;
        self.ids.release(conn);
        Some(entry.handle)
    }

    /// A socket that never entered the table gives its id back.
    pub(super) fn forget(&self, conn: ConnId) {
        self.ids.release(conn);
    }

    /// How many sockets are open.
    pub(super) fn len(&self) -> usize {
        self.open
    }

    /// The open sockets' ids.
    pub(super) fn ids(&self) -> Vec<ConnId> {
        self.slots.iter().flatten().map(|e| e.conn).collect()
    }

    /// Writes what the engine queued to each of `due` (one `send` each, or
    /// all of the registered ones in one submission).
    pub(super) fn flush(&mut self, due: &[ConnId]) {
        let Some(ring) = self.ring.as_mut() else {
            for &conn in due {
                if let Some(handle) = self.get(conn) {
                    handle.flush();
                }
            }
            return;
        };
        let mut batch = Vec::with_capacity(due.len());
        for (i, &conn) in due.iter().enumerate() {
            prefetch_ahead(&self.slots, due, i);
            let Some(entry) = entry(&self.slots, conn) else {
                continue;
            };
            if !entry.registered {
                entry.handle.flush();
            } else if let Some(flushing) = entry.handle.begin_flush() {
                batch.push((slot(conn) as u32, flushing));
            }
        }
        if let Err((error, unsent)) = ring.send_all(batch) {
            tracing::warn!(%error, "io_uring failed: writing sockets with send from now on");
            for flushing in unsent {
                flushing.send_now();
            }
            self.ring = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bubble_core::edge::OutboundLimit;
    use std::os::fd::OwnedFd;
    use std::os::unix::net::UnixStream;

    fn handle() -> ConnHandle {
        let (ours, _peer) = UnixStream::pair().expect("socket pair");
        ConnHandle::new(OutboundLimit::frames(1), Arc::new(OwnedFd::from(ours))).0
    }

    #[test]
    fn a_freed_slot_comes_back_under_a_new_id_and_the_old_id_finds_nothing() {
        let ids = Arc::new(ConnIds::default());
        let mut table = Table::new(ids.clone(), None);
        let (a, b) = (ids.next(), ids.next());
        assert_ne!(a, b);
        table.insert(a, handle());
        table.insert(b, handle());
        assert_eq!(table.len(), 2);
        assert!(table.remove(a).is_some());
        assert!(table.remove(a).is_none(), "removed once");
        let c = ids.next();
        assert_ne!(c, a, "same slot, new generation");
        assert_eq!(slot(c), slot(a));
        table.insert(c, handle());
        assert!(!table.contains(a), "the old id names nothing");
        assert!(table.remove(a).is_none(), "nor removes the new socket");
        assert!(table.contains(c) && table.contains(b));
        assert_eq!(table.len(), 2);
        let mut open = table.ids();
        open.sort();
        let mut want = vec![b, c];
        want.sort();
        assert_eq!(open, want);
    }

    #[test]
    fn an_id_that_never_entered_the_table_is_given_back() {
        let ids = Arc::new(ConnIds::default());
        let table = Table::new(ids.clone(), None);
        let a = ids.next();
        table.forget(a);
        let b = ids.next();
        assert_eq!(slot(b), slot(a));
        assert_ne!(b, a);
    }
}
