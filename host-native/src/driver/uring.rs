//! The engine's socket writes as one `io_uring` submission per turn: every
//! socket a turn queued frames to gets one `send`, and all of them reach
//! the kernel in one system call instead of one call each.
//!
//! The sockets are registered with the ring when they enter the engine's
//! table (slot `i` of the table is registered descriptor `i`), so a send
//! does not look its descriptor up and take a reference on it. Each send
//! carries `MSG_DONTWAIT`: it completes inside the submission, with what
//! the kernel took or `EAGAIN`, exactly as a non-blocking `send` would, and
//! the queue it sends from stays locked until its completion is read (see
//! [`Flushing`]). What the kernel does not take goes to the socket's task.
//! The ring is created on the engine's thread, the only one that submits.

use std::io;
use std::os::fd::RawFd;

use io_uring::{opcode, types, IoUring};

use super::conn::Flushing;
use crate::ws::Sent;

/// Sends in flight at most (the submission queue's size); a turn with more
/// due sockets submits in several batches. Small on purpose: on loopback
/// each send also runs the receiver's side in a softirq on this core, and
/// past a few dozen sends per `io_uring_enter` the kernel defers that work
/// to `ksoftirqd`; in batches of 32 less of it goes there, and the total
/// per send measured no higher than in batches of 1024 (`BENCHMARKS.md`).
const ENTRIES: u32 = 32;
/// Registered descriptors at most (the kernel also caps them at the
/// process's descriptor limit): 256k slots of 8 bytes in the kernel. Sockets
/// in slots beyond are written with plain `send`s.
const MAX_SLOTS: u64 = 1 << 18;
/// `MSG_DONTWAIT | MSG_NOSIGNAL`: complete at once, never raise `SIGPIPE`.
const SEND_FLAGS: i32 = rustix::net::SendFlags::DONTWAIT
    .union(rustix::net::SendFlags::NOSIGNAL)
    .bits() as i32;

/// A ring and its table of registered sockets.
pub(crate) struct Ring {
    ring: IoUring,
    /// Registered descriptor slots; table slots beyond are written with
    /// plain `send`s.
    slots: u32,
}

impl Ring {
    /// A ring on the calling thread, with as many registered slots as the
    /// process may open descriptors; an error when the kernel offers no
    /// `io_uring` (or not these features).
    pub(crate) fn new() -> io::Result<Ring> {
        let ring = IoUring::builder()
            .setup_single_issuer()
            .setup_defer_taskrun()
            .build(ENTRIES)?;
        let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile);
        let slots = limit.current.unwrap_or(MAX_SLOTS).min(MAX_SLOTS);
        let slots = u32::try_from(slots).unwrap_or(u32::MAX);
        ring.submitter().register_files_sparse(slots)?;
        Ok(Ring { ring, slots })
    }

    /// Registers `fd` as slot `slot`; false when it cannot be (the socket
    /// is then written with plain `send`s).
    pub(crate) fn register(&self, slot: usize, fd: RawFd) -> bool {
        match u32::try_from(slot) {
            Ok(slot) if slot < self.slots => self
                .ring
                .submitter()
                .register_files_update(slot, &[fd])
                .is_ok(),
            _ => false,
        }
    }

    /// Drops slot `slot`'s registration (the ring's reference would keep
    /// the socket open).
    pub(crate) fn unregister(&self, slot: usize) {
        if let Ok(slot) = u32::try_from(slot) {
            let _ = self.ring.submitter().register_files_update(slot, &[-1]);
        }
    }

    /// Sends each flush's bytes on its registered slot, [`ENTRIES`] at a
    /// time, and finishes each with what the kernel took. An error of the
    /// ring itself is returned with every flush it did not send, later
    /// batches' included.
    pub(crate) fn send_all<'a>(
        &mut self,
        mut flushes: Vec<(u32, Flushing<'a>)>,
    ) -> Result<(), (io::Error, Vec<Flushing<'a>>)> {
        while !flushes.is_empty() {
            let rest = flushes.split_off(flushes.len().min(ENTRIES as usize));
            if let Err((error, mut unsent)) = self.send_batch(flushes) {
                unsent.extend(rest.into_iter().map(|(_, flushing)| flushing));
                return Err((error, unsent));
            }
            flushes = rest;
        }
        Ok(())
    }

    /// One submission: every send of `batch`, then their completions.
    #[allow(unsafe_code)]
    fn send_batch<'a>(
        &mut self,
        batch: Vec<(u32, Flushing<'a>)>,
    ) -> Result<(), (io::Error, Vec<Flushing<'a>>)> {
        let mut pending = 0;
        {
            let mut queue = self.ring.submission();
            for (i, (slot, flushing)) in batch.iter().enumerate() {
                let bytes = flushing.bytes();
                let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
                let send = opcode::Send::new(types::Fixed(*slot), bytes.as_ptr(), len)
                    .flags(SEND_FLAGS)
                    .build()
                    .user_data(i as u64);
                // SAFETY: the bytes stay where they are, unchanged, until
                // the send completes: their queue is locked by `flushing`,
                // which lives until its completion is read below, and every
                // send completes within the submission (`MSG_DONTWAIT`).
                // The batch is no larger than the queue, which is empty.
                if unsafe { queue.push(&send) }.is_ok() {
                    pending += 1;
                }
            }
        }
        let mut flushes: Vec<Option<Flushing<'a>>> =
            batch.into_iter().map(|(_, f)| Some(f)).collect();
        loop {
            match self.ring.submit_and_wait(pending) {
                Ok(_) => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    self.reap(&mut flushes);
                    return Err((e, flushes.into_iter().flatten().collect()));
                }
            }
        }
        self.reap(&mut flushes);
        // A send the ring did not take (it cannot happen with an empty
        // queue) is left to the socket's task.
        for flushing in flushes.into_iter().flatten() {
            flushing.finish(Sent::Part(0));
        }
        Ok(())
    }

    /// Finishes every flush whose completion is in the ring.
    fn reap(&mut self, flushes: &mut [Option<Flushing<'_>>]) {
        // The sends since the flushes began have evicted their queues.
        for flushing in flushes.iter().flatten() {
            flushing.prefetch();
        }
        for done in self.ring.completion() {
            let Some(flushing) = usize::try_from(done.user_data())
                .ok()
                .and_then(|i| flushes.get_mut(i))
                .and_then(Option::take)
            else {
                continue;
            };
            let len = flushing.bytes().len();
            let sent = match done.result() {
                n if n >= 0 && n as usize >= len => Sent::All,
                n if n >= 0 => Sent::Part(n as usize),
                n if n == -(rustix::io::Errno::AGAIN.raw_os_error()) => Sent::Part(0),
                _ => Sent::Failed,
            };
            flushing.finish(sent);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::conn::tests::{read_all, shared};
    use super::super::conn::{ConnHandle, OutMsg, Outbound, Turn};
    use super::super::table::{ConnIds, Table};
    use super::*;
    use bubble_core::edge::OutboundLimit;
    use std::io::Read;
    use std::os::fd::OwnedFd;
    use std::os::unix::net::UnixStream;
    use std::sync::Arc;

    /// A table writing through a ring (this machine's kernel has one).
    fn table() -> (Arc<ConnIds>, Table) {
        let ids = Arc::new(ConnIds::default());
        let ring = Ring::new().expect("io_uring on this kernel");
        (ids.clone(), Table::new(ids, Some(ring)))
    }

    /// A socket in `table`: its id, its queue's far end, and the peer.
    fn open(ids: &ConnIds, table: &mut Table) -> (bubble_core::ConnId, Arc<Outbound>, UnixStream) {
        let (ours, peer) = UnixStream::pair().expect("socket pair");
        peer.set_nonblocking(true).expect("non-blocking");
        let (handle, out) =
            ConnHandle::new(OutboundLimit::frames(64), Arc::new(OwnedFd::from(ours)));
        let conn = ids.next();
        table.insert(conn, handle);
        (conn, out, peer)
    }

    #[test]
    fn a_turn_of_sockets_is_written_in_one_submission_in_order() {
        let (ids, mut table) = table();
        let mut sockets: Vec<_> = (0..5).map(|_| open(&ids, &mut table)).collect();
        for turn in 0..3 {
            let mut due = Vec::new();
            for (i, (conn, _, _)) in sockets.iter().enumerate() {
                let handle = table.get(*conn).expect("open");
                for frame in 0..=i {
                    handle
                        .push(OutMsg::Frame(&format!("{turn}.{frame}")))
                        .expect("room");
                }
                due.push(*conn);
            }
            table.flush(&due);
        }
        for (i, (_, out, peer)) in sockets.iter_mut().enumerate() {
            let mut want = Vec::new();
            for turn in 0..3 {
                for frame in 0..=i {
                    crate::ws::frame::encode_text(&mut want, format!("{turn}.{frame}").as_bytes());
                }
            }
            assert_eq!(read_all(peer), want, "socket {i}");
            assert_eq!(out.turn(), None, "the engine wrote everything");
        }
    }

    #[test]
    fn a_shared_frame_reaches_every_socket_of_a_submission() {
        let (ids, mut table) = table();
        let mut sockets: Vec<_> = (0..40).map(|_| open(&ids, &mut table)).collect();
        let fan = shared("fan");
        let due: Vec<_> = sockets.iter().map(|(conn, _, _)| *conn).collect();
        for conn in &due {
            let handle = table.get(*conn).expect("open");
            handle.push(OutMsg::Shared(&fan)).expect("room");
        }
        table.flush(&due);
        assert_eq!(Arc::strong_count(&fan), 1, "every send completed");
        for (i, (_, out, peer)) in sockets.iter_mut().enumerate() {
            assert_eq!(read_all(peer), fan[..], "socket {i}");
            assert_eq!(out.turn(), None, "the engine wrote everything");
        }
    }

    #[test]
    fn what_the_kernel_does_not_take_goes_to_the_task() {
        let (ids, mut table) = table();
        let (conn, out, mut peer) = open(&ids, &mut table);
        let big = "x".repeat(4 << 20);
        let handle = table.get(conn).expect("open");
        handle.push(OutMsg::Frame(&big)).expect("room");
        table.flush(&[conn]);
        assert_eq!(
            out.turn(),
            Some(Turn::Write {
                want_drained: false,
                close: None
            }),
            "the rest is the task's to write"
        );
        let mut got = read_all(&mut peer);
        let mut rest = Vec::new();
        while out.take(&mut rest).is_some() {
            got.extend_from_slice(&rest);
        }
        let mut want = Vec::new();
        crate::ws::frame::encode_text(&mut want, big.as_bytes());
        assert_eq!(got.len(), want.len());
        assert!(got == want, "bytes arrive whole and in order");
    }

    #[test]
    fn a_socket_that_left_the_table_is_not_held_open_by_the_ring() {
        let (ids, mut table) = table();
        let (conn, out, mut peer) = open(&ids, &mut table);
        let handle = table.remove(conn).expect("open");
        out.gone();
        drop((handle, out));
        peer.set_nonblocking(false).expect("blocking");
        // A bound on the wait, so that a socket held open fails the test.
        peer.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .expect("timeout");
        let mut buf = [0u8; 8];
        assert_eq!(peer.read(&mut buf).expect("end of stream"), 0);
        let (again, _out, mut peer) = open(&ids, &mut table);
        table
            .get(again)
            .expect("open")
            .push(OutMsg::Ping)
            .expect("room");
        table.flush(&[again]);
        assert_eq!(
            read_all(&mut peer),
            [0x89, 0],
            "the slot serves its next socket"
        );
    }
}
