//! Batched sends through `io_uring`: the sends of one engine turn reach the
//! kernel in one submission instead of one system call each, which saves
//! the system-call entry, exit and descriptor lookup per delivery (the TCP
//! work itself stays). Where `io_uring` is unavailable (an old kernel,
//! `kernel.io_uring_disabled`, a container's seccomp profile) the engine
//! sends one socket at a time instead.
//!
//! This module is the crate's one use of `unsafe`: handing the kernel
//! pointers to buffers. [`Ring::send_all`] keeps every buffer borrowed until
//! the kernel has completed every send it was given.

#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, OwnedFd};

use io_uring::{opcode, types, IoUring};

use super::direct::Sent;

/// Submission slots: sends per system call at most.
const ENTRIES: u32 = 1024;

/// An `io_uring` instance for non-blocking sends.
pub(crate) struct Ring {
    ring: IoUring,
}

impl std::fmt::Debug for Ring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ring").finish_non_exhaustive()
    }
}

impl Ring {
    /// A ring, or `None` where `io_uring` cannot be used.
    pub(crate) fn new() -> Option<Ring> {
        IoUring::new(ENTRIES).ok().map(|ring| Ring { ring })
    }

    /// Sends each job's bytes on its socket without blocking, all in as few
    /// submissions as the ring allows, and appends what each send did to
    /// `out`, in the order of `jobs`.
    pub(crate) fn send_all(&mut self, jobs: &[(&OwnedFd, &[u8])], out: &mut Vec<Sent>) {
        let first = out.len();
        out.extend(std::iter::repeat_n(Sent::Failed, jobs.len()));
        let flags = libc_flags();
        for (chunk_at, chunk) in jobs.chunks(ENTRIES as usize).enumerate() {
            let base = chunk_at * ENTRIES as usize;
            let mut submitted = 0;
            {
                let mut queue = self.ring.submission();
                for (i, (fd, bytes)) in chunk.iter().enumerate() {
                    let len = u32::try_from(bytes.len()).unwrap_or(u32::MAX);
                    let entry = opcode::Send::new(types::Fd(fd.as_raw_fd()), bytes.as_ptr(), len)
                        .flags(flags)
                        .build()
                        .user_data((base + i) as u64);
                    // SAFETY: `bytes` and `fd` are borrowed for the whole of
                    // this call, and the call returns only once every entry
                    // pushed here has completed (below).
                    if unsafe { queue.push(&entry) }.is_ok() {
                        submitted += 1;
                    }
                }
            }
            let mut completed = 0;
            while completed < submitted {
                if let Err(e) = self.ring.submit_and_wait(submitted - completed) {
                    if e.kind() != std::io::ErrorKind::Interrupted {
                        // The kernel may still hold our buffers: returning
                        // would let them be reused under it.
                        tracing::error!(error = %e, "io_uring submission failed");
                        std::process::abort();
                    }
                }
                for cqe in self.ring.completion() {
                    completed += 1;
                    let i = usize::try_from(cqe.user_data()).unwrap_or(usize::MAX);
                    if let (Some(slot), Some((_, bytes))) = (out.get_mut(first + i), jobs.get(i)) {
                        *slot = outcome(cqe.result(), bytes.len());
                    }
                }
            }
        }
    }
}

/// `MSG_DONTWAIT | MSG_NOSIGNAL`: a full socket answers at once instead of
/// the ring waiting for room, and a closed one does not raise `SIGPIPE`.
fn libc_flags() -> i32 {
    (rustix::net::SendFlags::DONTWAIT | rustix::net::SendFlags::NOSIGNAL).bits() as i32
}

/// What one completion says about a send of `len` bytes.
fn outcome(result: i32, len: usize) -> Sent {
    match usize::try_from(result) {
        Ok(n) if n >= len => Sent::All,
        Ok(n) => Sent::Part(n),
        Err(_) if result == -(rustix::io::Errno::AGAIN.raw_os_error())
            || result == -(rustix::io::Errno::INTR.raw_os_error()) =>
        {
            Sent::Part(0)
        }
        Err(_) => Sent::Failed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::net::UnixStream;

    #[test]
    fn one_submission_sends_to_every_socket() {
        let Some(mut ring) = Ring::new() else {
            eprintln!("io_uring is unavailable here: nothing to test");
            return;
        };
        let pairs: Vec<(OwnedFd, UnixStream)> = (0..3)
            .map(|_| {
                let (ours, peer) = UnixStream::pair().expect("socket pair");
                (OwnedFd::from(ours), peer)
            })
            .collect();
        let payloads = [&b"one"[..], b"two", b"three"];
        let jobs: Vec<(&OwnedFd, &[u8])> = pairs
            .iter()
            .zip(payloads)
            .map(|((fd, _), bytes)| (fd, bytes))
            .collect();
        let mut out = Vec::new();
        ring.send_all(&jobs, &mut out);
        assert_eq!(out, [Sent::All, Sent::All, Sent::All]);
        for ((_, mut peer), want) in pairs.into_iter().zip(payloads) {
            let mut got = vec![0u8; want.len()];
            peer.read_exact(&mut got).expect("read");
            assert_eq!(got, want);
        }
    }

    #[test]
    fn completions_map_to_outcomes() {
        assert_eq!(outcome(5, 5), Sent::All);
        assert_eq!(outcome(2, 5), Sent::Part(2));
        assert_eq!(outcome(-rustix::io::Errno::AGAIN.raw_os_error(), 5), Sent::Part(0));
        assert_eq!(outcome(-rustix::io::Errno::PIPE.raw_os_error(), 5), Sent::Failed);
    }
}
