//! Writer threads: on a machine with cores to spare, the sockets an engine
//! turn queued frames to are written by these threads instead of the
//! engine's, so a fan-out's system calls spread over several cores while
//! the engine stays one state machine on one thread.
//!
//! A socket always goes to the same writer (by connection id), and each
//! writer flushes the sockets handed to it in the order it got them. A flush
//! takes the socket's queue lock and writes everything queued at that
//! moment, so frames the engine queues while a flush is pending go out with
//! it, and bytes never interleave with the socket task's own writes: the
//! ordering rules are the queue's ([`super::conn`]), whichever thread
//! flushes.

use std::sync::mpsc;
use std::thread::JoinHandle;

use bubble_core::ConnId;

use super::conn::ConnHandle;

/// The writer threads, and this turn's sockets for each.
pub(crate) struct Writers {
    queues: Vec<mpsc::Sender<Vec<ConnHandle>>>,
    staged: Vec<Vec<ConnHandle>>,
    threads: Vec<JoinHandle<()>>,
}

impl Writers {
    /// Starts `count` (≥ 1) writer threads.
    pub(crate) fn start(count: usize) -> std::io::Result<Writers> {
        let mut writers = Writers {
            queues: Vec::with_capacity(count),
            staged: Vec::with_capacity(count),
            threads: Vec::with_capacity(count),
        };
        for i in 0..count.max(1) {
            let (tx, rx) = mpsc::channel::<Vec<ConnHandle>>();
            let thread = std::thread::Builder::new()
                .name(format!("bubble-writer-{i}"))
                .spawn(move || {
                    while let Ok(batch) = rx.recv() {
                        for handle in &batch {
                            handle.flush();
                        }
                    }
                })?;
            writers.queues.push(tx);
            writers.staged.push(Vec::new());
            writers.threads.push(thread);
        }
        Ok(writers)
    }

    /// Puts `handle` in this turn's batch of its writer.
    pub(crate) fn stage(&mut self, conn: ConnId, handle: &ConnHandle) {
        let n = self.staged.len() as u64;
        let writer = usize::try_from(conn.0 % n).unwrap_or(0);
        self.staged[writer].push(handle.clone());
    }

    /// Hands each writer its batch of this turn: one wake-up per writer
    /// per turn, however many sockets it writes.
    pub(crate) fn submit(&mut self) {
        for (staged, queue) in self.staged.iter_mut().zip(&self.queues) {
            if !staged.is_empty() {
                // A writer ends only when this sender is dropped.
                let _ = queue.send(std::mem::take(staged));
            }
        }
    }
}

impl Drop for Writers {
    /// Lets every writer finish what it was handed, then joins it.
    fn drop(&mut self) {
        self.submit();
        self.queues.clear();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::conn::OutMsg;
    use bubble_core::edge::OutboundLimit;
    use std::io::Read;
    use std::os::fd::OwnedFd;
    use std::os::unix::net::UnixStream;
    use std::sync::Arc;

    #[test]
    fn every_socket_gets_its_frames_whole_and_in_order_across_writers() {
        let mut writers = Writers::start(3).expect("writer threads");
        let mut sockets = Vec::new();
        for i in 0..8u64 {
            let (ours, peer) = UnixStream::pair().expect("socket pair");
            let (handle, _out) =
                ConnHandle::new(OutboundLimit::frames(10_000), Arc::new(OwnedFd::from(ours)));
            sockets.push((ConnId(i), handle, peer));
        }
        let turns = 200;
        for turn in 0..turns {
            for (conn, handle, _) in &sockets {
                let frame = format!("{}:{turn}", conn.0);
                if handle.push(OutMsg::Frame(&frame)) == Ok(super::super::conn::Due::Flush) {
                    writers.stage(*conn, handle);
                }
            }
            writers.submit();
        }
        drop(writers);
        for (conn, _, mut peer) in sockets {
            let mut want = Vec::new();
            for turn in 0..turns {
                crate::ws::frame::encode_text(&mut want, format!("{}:{turn}", conn.0).as_bytes());
            }
            let mut got = vec![0u8; want.len()];
            peer.read_exact(&mut got).expect("every byte arrives");
            assert!(got == want, "socket {} got its frames in order", conn.0);
        }
    }
}
