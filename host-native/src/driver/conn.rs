//! A socket as the engine task sees it: one outbound queue of WebSocket
//! frames, already encoded, shared by the engine task and the socket's task.
//!
//! The engine appends each frame's bytes as it decides them and, at the end
//! of its turn, writes every socket it queued to with one non-blocking
//! `send` from its own thread ([`ConnHandle::flush`], or [`Flushing`] when
//! the sends of a turn go to the kernel together, see [`super::uring`]): a
//! socket that keeps up costs one send per engine turn, however many
//! frames the turn queued for it, and no task wake-up. When the kernel does not take
//! everything (the peer reads slowly), the rest is handed to the socket's
//! task, which waits for writability and writes the queue until it is
//! empty, then hands writing back. The protocol layer's own replies (Pong,
//! Close) join the same queue, and a Close or a drain report is always the
//! task's to write. One writer at a time, decided under the queue's lock,
//! keeps the bytes in order. The queue is bounded in frames (queued or being
//! written); a full queue is a slow consumer.
//!
//! A fan-out's frame is shared, not copied: when it is the only thing an
//! idle socket has queued, the socket holds a reference to the one encoded
//! frame and the send reads it from there, so a fan-out writes no
//! per-recipient buffer and the kernel copies every recipient's bytes from
//! the same few cache lines. Anything queued behind it, or a send the
//! kernel takes only part of, copies it into the socket's own bytes first.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use bubble_core::edge::{OutboundLimit, SlowConsumer};
use parking_lot::{Mutex, MutexGuard};

use crate::ws::frame;
use crate::ws::{send_now, Sent};

/// What the writer of one socket is asked to do, in order.
#[derive(Debug, Clone, Copy)]
pub(crate) enum OutMsg<'a> {
    /// Write a serialized text frame.
    Frame(&'a str),
    /// Write a frame already encoded, header and payload: a fan-out's
    /// frame, encoded once and shared by all its recipients.
    Shared(&'a Arc<[u8]>),
    /// Write a WebSocket Ping.
    Ping,
    /// Write a Close frame with this code and stop.
    Close(u16),
    /// Report `Drained` once everything before this has been written.
    WantDrained,
}

/// Why a message could not be queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum QueueError {
    /// The queue is at capacity: a slow consumer (the edge's decision).
    Full(SlowConsumer),
    /// The socket's task is gone.
    Gone,
}

/// Whether the engine must flush the socket at the end of its turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Due {
    /// First bytes since the last flush: remember the socket.
    Flush,
    /// Already remembered, or nothing for the engine to write.
    Nothing,
}

/// The queue's state, behind one lock.
#[derive(Debug, Default)]
struct State {
    /// Encoded frames not yet written, in order.
    bytes: Vec<u8>,
    /// A shared frame queued alone: written before anything in `bytes`,
    /// which is empty while it is here.
    shared: Option<Arc<[u8]>>,
    /// Frames in `shared` and `bytes` (a frame partly sent counts until it
    /// is done).
    queued: usize,
    /// Frames the socket's task took and has not finished writing.
    writing: usize,
    /// The first bytes of `bytes` finish a frame the kernel took part of
    /// (0: `bytes` starts with a whole frame).
    head_rest: usize,
    /// The socket's task writes until the queue is empty; the engine
    /// does not.
    task_writes: bool,
    /// The engine queued frames since it last flushed this socket.
    due: bool,
    /// A `WantDrained` is in `bytes`' span.
    want_drained: bool,
    /// Close with this code once `bytes` is written.
    close: Option<u16>,
    /// Close now with this code, dropping what is queued.
    kill: Option<u16>,
    /// The engine's own descriptor of the connection; `None` once the
    /// socket's task ended (later pushes fail with `Gone`).
    fd: Option<Arc<OwnedFd>>,
    /// The socket's task, to wake when there is something to do.
    waker: Option<Waker>,
}

impl State {
    fn wake(&mut self) {
        if let Some(waker) = self.waker.take() {
            waker.wake();
        }
    }

    fn register(&mut self, cx: &Context<'_>) {
        if !self.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            self.waker = Some(cx.waker().clone());
        }
    }

    /// Hands writing to the socket's task.
    fn hand_over(&mut self) {
        self.own_bytes();
        self.task_writes = true;
        self.wake();
    }

    /// The socket's own bytes, a shared frame queued alone copied in first
    /// (before something joins it, or the task takes the queue).
    fn own_bytes(&mut self) -> &mut Vec<u8> {
        if let Some(shared) = self.shared.take() {
            self.bytes.extend_from_slice(&shared);
        }
        &mut self.bytes
    }

    /// What is queued to write: the shared frame, or the socket's bytes.
    fn queued_bytes(&self) -> &[u8] {
        self.shared.as_deref().unwrap_or(&self.bytes)
    }

    /// Drops everything queued.
    fn drop_queued(&mut self) {
        self.bytes = Vec::new();
        self.shared = None;
        self.head_rest = 0;
    }
}

/// The queue shared by the engine task and one socket's task.
#[derive(Debug)]
pub(crate) struct Outbound {
    state: Mutex<State>,
    limit: OutboundLimit,
}

/// What the socket's task does in one turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Turn {
    /// Write the queue; then report `Drained` if asked, then close with the
    /// code if any.
    Write {
        /// Report `Drained` once written.
        want_drained: bool,
        /// Close with this code once written.
        close: Option<u16>,
    },
    /// Close now with this code.
    Kill(u16),
}

impl Outbound {
    /// Resolves when the socket's task has something to do (registers it
    /// to be woken otherwise).
    pub(crate) fn poll_ready(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = self.state.lock();
        if state.kill.is_some() || state.task_writes || state.want_drained || state.close.is_some()
        {
            return Poll::Ready(());
        }
        state.register(cx);
        Poll::Pending
    }

    /// The socket task's turn, if it has one.
    pub(crate) fn turn(&self) -> Option<Turn> {
        let mut state = self.state.lock();
        if let Some(code) = state.kill {
            return Some(Turn::Kill(code));
        }
        if !state.task_writes && !state.want_drained && state.close.is_none() {
            return None;
        }
        Some(Turn::Write {
            want_drained: std::mem::take(&mut state.want_drained),
            close: state.close.take(),
        })
    }

    /// The socket's task finished writing what it took before: takes the
    /// rest of the queue into `into` (empty, kept for reuse by the queue)
    /// and keeps writing, with how many of its first bytes finish a frame
    /// the kernel took part of (frames follow them whole); `None` when the
    /// queue is empty (writing goes back to the engine). A kill drops what
    /// the engine queued, so after one the queue holds only the rest of
    /// such a frame and the task's own bytes (its Close frame).
    pub(crate) fn take(&self, into: &mut Vec<u8>) -> Option<usize> {
        into.clear();
        let mut state = self.state.lock();
        state.writing = 0;
        if state.own_bytes().is_empty() {
            state.task_writes = false;
            if into.capacity() > frame::KEEP_BUFFER {
                *into = Vec::new();
            }
            return None;
        }
        std::mem::swap(into, &mut state.bytes);
        state.writing = std::mem::take(&mut state.queued);
        state.task_writes = true;
        Some(std::mem::take(&mut state.head_rest))
    }

    /// Appends bytes of the socket's own protocol layer (a Pong or a Close
    /// reply) for the socket's task to write.
    pub(crate) fn append(&self, bytes: &[u8]) {
        let mut state = self.state.lock();
        state.own_bytes().extend_from_slice(bytes);
        state.task_writes = true;
    }

    /// Resolves once the socket is killed, with the code.
    pub(crate) fn poll_killed(&self, cx: &mut Context<'_>) -> Poll<u16> {
        let mut state = self.state.lock();
        match state.kill {
            Some(code) => Poll::Ready(code),
            None => {
                state.register(cx);
                Poll::Pending
            }
        }
    }

    /// The socket's task ended: later pushes fail with `Gone`, and the
    /// engine's descriptor is closed.
    pub(crate) fn gone(&self) {
        let mut state = self.state.lock();
        state.fd = None;
        state.drop_queued();
        state.waker = None;
    }

    fn push(&self, msg: OutMsg<'_>) -> Result<Due, QueueError> {
        let mut state = self.state.lock();
        if state.fd.is_none() {
            return Err(QueueError::Gone);
        }
        if state.close.is_some() || state.kill.is_some() {
            // Nothing follows a Close.
            return Ok(Due::Nothing);
        }
        self.limit
            .admit(state.queued + state.writing)
            .map_err(QueueError::Full)?;
        match msg {
            OutMsg::Shared(shared) if state.bytes.is_empty() && state.shared.is_none() => {
                state.shared = Some(shared.clone());
            }
            OutMsg::Shared(shared) => state.own_bytes().extend_from_slice(shared),
            OutMsg::Frame(text) => frame::encode_text(state.own_bytes(), text.as_bytes()),
            OutMsg::Ping => frame::encode_ping(state.own_bytes()),
            OutMsg::Close(code) => {
                state.close = Some(code);
                state.wake();
                return Ok(Due::Nothing);
            }
            OutMsg::WantDrained => {
                state.want_drained = true;
                state.wake();
                return Ok(Due::Nothing);
            }
        }
        state.queued += 1;
        if std::mem::replace(&mut state.due, true) {
            Ok(Due::Nothing)
        } else {
            Ok(Due::Flush)
        }
    }

    /// Writes the queue from the engine's thread unless the socket's task
    /// is writing; what the kernel does not take goes to the task.
    fn flush(&self) {
        if let Some(flushing) = self.begin_flush() {
            flushing.send_now();
        }
    }

    /// Starts a flush from the engine's thread: the locked queue, unless
    /// the socket's task is writing or nothing is queued.
    fn begin_flush(&self) -> Option<Flushing<'_>> {
        let mut state = self.state.lock();
        state.due = false;
        if state.task_writes || state.kill.is_some() || state.queued_bytes().is_empty() {
            return None;
        }
        state.fd.as_ref()?;
        Some(Flushing { state })
    }

    /// The descriptor the engine writes through, while the socket is open.
    fn raw_fd(&self) -> Option<RawFd> {
        self.state.lock().fd.as_ref().map(|fd| fd.as_raw_fd())
    }

    fn kill(&self, code: u16) {
        let mut state = self.state.lock();
        // The first code wins: a later shutdown does not relabel a slow consumer.
        if state.kill.is_none() {
            state.kill = Some(code);
        }
        // The rest of a frame the kernel took part of stays, so that the
        // Close follows whole frames.
        match state.head_rest {
            0 => state.drop_queued(),
            rest => state.bytes.truncate(rest),
        }
        state.queued = 0;
        state.wake();
    }
}

/// A flush under way: the socket's queue, locked until [`finish`]
/// applies what the kernel took, so nothing changes the bytes being sent.
///
/// [`finish`]: Flushing::finish
pub(crate) struct Flushing<'a> {
    state: MutexGuard<'a, State>,
}

impl Flushing<'_> {
    /// Starts loading the queue's state for [`finish`](Flushing::finish)
    /// (see [`prefetch`]).
    pub(crate) fn prefetch(&self) {
        prefetch(&*self.state);
    }

    /// The bytes to send.
    pub(crate) fn bytes(&self) -> &[u8] {
        self.state.queued_bytes()
    }

    /// Sends the bytes with one non-blocking `send` and finishes.
    pub(crate) fn send_now(self) {
        let sent = match self.state.fd.as_ref() {
            Some(fd) => send_now(fd.as_ref(), self.bytes()),
            None => Sent::Failed,
        };
        self.finish(sent);
    }

    /// Applies what the kernel took: the rest goes to the socket's task.
    pub(crate) fn finish(mut self, sent: Sent) {
        let state = &mut self.state;
        match sent {
            Sent::All => {
                state.shared = None;
                state.bytes.clear();
                state.queued = 0;
                if state.bytes.capacity() > frame::KEEP_BUFFER {
                    state.bytes = Vec::new();
                }
            }
            Sent::Part(n) => {
                let bytes = state.own_bytes();
                let end = frame::frame_end(bytes, 0, n);
                bytes.drain(..n);
                state.head_rest = end.saturating_sub(n);
                state.hand_over();
            }
            Sent::Failed => state.hand_over(),
        }
    }
}

/// The engine task's handle on one socket.
#[derive(Debug, Clone)]
pub(crate) struct ConnHandle {
    out: Arc<Outbound>,
}

impl ConnHandle {
    /// A handle writing through `fd` and the socket task's end of its
    /// queue, bounded by `limit`.
    pub(crate) fn new(limit: OutboundLimit, fd: Arc<OwnedFd>) -> (ConnHandle, Arc<Outbound>) {
        let out = Arc::new(Outbound {
            state: Mutex::new(State {
                fd: Some(fd),
                ..State::default()
            }),
            limit,
        });
        (ConnHandle { out: out.clone() }, out)
    }

    /// Starts loading the queue's state for a push or a flush a few sockets
    /// later (see [`prefetch`]).
    pub(crate) fn prefetch(&self) {
        prefetch(Arc::as_ptr(&self.out));
    }

    /// Queues `msg` without writing; says whether the socket is now due a
    /// [`flush`](ConnHandle::flush).
    pub(crate) fn push(&self, msg: OutMsg<'_>) -> Result<Due, QueueError> {
        self.out.push(msg)
    }

    /// Writes what is queued, at the end of the engine's turn.
    pub(crate) fn flush(&self) {
        self.out.flush();
    }

    /// Starts a flush whose send the caller makes (a batched submission):
    /// `None` when there is nothing for the engine to write.
    pub(crate) fn begin_flush(&self) -> Option<Flushing<'_>> {
        self.out.begin_flush()
    }

    /// The socket's descriptor, while it is open.
    pub(crate) fn raw_fd(&self) -> Option<RawFd> {
        self.out.raw_fd()
    }

    /// Closes the socket now, dropping whatever is queued.
    pub(crate) fn kill(&self, code: u16) {
        self.out.kill(code);
    }

    /// Closes the socket after what is queued; kills it if the queue is full.
    pub(crate) fn close(&self, code: u16) {
        if code == 1006 || self.push(OutMsg::Close(code)).is_err() {
            self.kill(code);
        }
    }
}

/// Asks the CPU to load the two cache lines at `at` (a queue's state spans
/// two) without waiting for them. A fan-out's sockets lie far apart in
/// memory and the kernel's sends of the previous turn have evicted them, so
/// each first touch is a miss to memory; started a few sockets ahead, the
/// misses overlap instead of following one another (the queue's lock is an
/// atomic instruction, which a plain load cannot run ahead of).
#[allow(unsafe_code)]
pub(super) fn prefetch<T>(at: *const T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let at = at.cast::<i8>();
        // SAFETY: a prefetch is a hint: it reads nothing the program sees,
        // writes nothing, and never faults, whatever the address.
        unsafe {
            _mm_prefetch::<_MM_HINT_T0>(at);
            _mm_prefetch::<_MM_HINT_T0>(at.wrapping_add(64));
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use std::io::Read;
    use std::os::unix::net::UnixStream;

    /// A handle writing into one end of a socket pair, and the other end.
    fn pair(frames: usize) -> (ConnHandle, Arc<Outbound>, UnixStream) {
        let (ours, peer) = UnixStream::pair().expect("socket pair");
        peer.set_nonblocking(true).expect("non-blocking");
        let (handle, out) =
            ConnHandle::new(OutboundLimit::frames(frames), Arc::new(OwnedFd::from(ours)));
        (handle, out, peer)
    }

    /// Everything the peer can read without blocking.
    pub(in crate::driver) fn read_all(peer: &mut UnixStream) -> Vec<u8> {
        let mut got = Vec::new();
        let mut buf = [0u8; 64 * 1024];
        while let Ok(n @ 1..) = peer.read(&mut buf) {
            got.extend_from_slice(&buf[..n]);
        }
        got
    }

    fn ready(out: &Outbound) -> bool {
        out.poll_ready(&mut Context::from_waker(Waker::noop()))
            .is_ready()
    }

    #[test]
    fn the_engine_writes_a_turn_of_frames_with_one_send_and_no_task() {
        let (handle, out, mut peer) = pair(8);
        assert_eq!(handle.push(OutMsg::Frame("ab")), Ok(Due::Flush));
        assert_eq!(handle.push(OutMsg::Ping), Ok(Due::Nothing));
        assert!(
            read_all(&mut peer).is_empty(),
            "nothing is sent before the flush"
        );
        handle.flush();
        assert_eq!(read_all(&mut peer), [0x81, 2, b'a', b'b', 0x89, 0]);
        assert!(!ready(&out));
        assert_eq!(out.turn(), None);
        assert_eq!(handle.push(OutMsg::Frame("c")), Ok(Due::Flush));
    }

    /// `text` as a fan-out's shared frame.
    pub(in crate::driver) fn shared(text: &str) -> Arc<[u8]> {
        let mut encoded = Vec::new();
        frame::encode_text(&mut encoded, text.as_bytes());
        Arc::from(encoded)
    }

    #[test]
    fn a_shared_frame_is_written_as_is_and_counts_as_one_frame() {
        let (handle, _out, mut peer) = pair(2);
        let fan = shared("fan");
        assert_eq!(handle.push(OutMsg::Shared(&fan)), Ok(Due::Flush));
        assert_eq!(handle.push(OutMsg::Shared(&fan)), Ok(Due::Nothing));
        assert_eq!(
            handle.push(OutMsg::Shared(&fan)),
            Err(QueueError::Full(SlowConsumer))
        );
        handle.flush();
        assert_eq!(read_all(&mut peer), [&fan[..], &fan[..]].concat());
        assert_eq!(
            Arc::strong_count(&fan),
            1,
            "no socket holds the frame once it is sent"
        );
    }

    #[test]
    fn what_follows_a_shared_frame_is_written_after_it() {
        let (handle, _out, mut peer) = pair(8);
        let fan = shared("fan");
        handle.push(OutMsg::Shared(&fan)).unwrap();
        handle.push(OutMsg::Frame("own")).unwrap();
        handle.push(OutMsg::Ping).unwrap();
        handle.push(OutMsg::Shared(&fan)).unwrap();
        handle.flush();
        let mut want = fan.to_vec();
        frame::encode_text(&mut want, b"own");
        frame::encode_ping(&mut want);
        want.extend_from_slice(&fan);
        assert_eq!(read_all(&mut peer), want);
    }

    #[test]
    fn the_task_takes_a_shared_frame_the_engine_has_not_written() {
        let (handle, out, _peer) = pair(8);
        let fan = shared("fan");
        handle.push(OutMsg::Shared(&fan)).unwrap();
        handle.push(OutMsg::WantDrained).unwrap();
        out.append(b"pong");
        let mut taken = Vec::new();
        assert!(out.take(&mut taken).is_some());
        assert_eq!(
            taken,
            [&fan[..], b"pong"].concat(),
            "the frame first, then the task's own bytes"
        );
        assert_eq!(Arc::strong_count(&fan), 1);
        handle.flush();
        assert!(out.take(&mut taken).is_none(), "nothing is written twice");
    }

    #[test]
    fn a_shared_frame_the_kernel_takes_part_of_goes_on_from_the_task() {
        let (handle, out, mut peer) = pair(8);
        let fan = shared(&"x".repeat(4 << 20));
        handle.push(OutMsg::Shared(&fan)).unwrap();
        handle.flush();
        assert!(ready(&out), "the rest is handed to the task");
        assert_eq!(
            Arc::strong_count(&fan),
            1,
            "the rest is the socket's own copy"
        );
        let mut got = read_all(&mut peer);
        let mut taken = Vec::new();
        while out.take(&mut taken).is_some() {
            got.extend_from_slice(&taken);
        }
        got.extend(read_all(&mut peer));
        assert_eq!(got.len(), fan.len());
        assert!(got[..] == fan[..], "bytes arrive whole and in order");
    }

    #[test]
    fn a_kill_drops_a_queued_shared_frame() {
        let (handle, out, _peer) = pair(8);
        let fan = shared("fan");
        handle.push(OutMsg::Shared(&fan)).unwrap();
        handle.kill(SlowConsumer.close_code());
        assert_eq!(Arc::strong_count(&fan), 1);
        assert_eq!(out.turn(), Some(Turn::Kill(1013)));
        let mut taken = Vec::new();
        assert!(
            out.take(&mut taken).is_none(),
            "nothing of the engine's is left to write"
        );
    }

    #[test]
    fn a_kill_keeps_the_rest_of_a_frame_the_kernel_took_part_of() {
        let (handle, out, mut peer) = pair(8);
        let big = "x".repeat(4 << 20);
        handle.push(OutMsg::Frame(&big)).unwrap();
        handle.flush();
        handle.push(OutMsg::Frame("dropped")).unwrap();
        handle.kill(SlowConsumer.close_code());
        let mut got = read_all(&mut peer);
        let mut taken = Vec::new();
        let rest = out.take(&mut taken).expect("the frame's rest");
        assert_eq!(rest, taken.len(), "only the frame's rest is left");
        got.extend_from_slice(&taken);
        let mut want = Vec::new();
        frame::encode_text(&mut want, big.as_bytes());
        assert_eq!(got.len(), want.len());
        assert!(got == want, "the frame arrives whole");
        assert_eq!(out.take(&mut taken), None);
    }

    #[test]
    fn what_the_kernel_does_not_take_goes_to_the_task_in_order() {
        let (handle, out, mut peer) = pair(8);
        let big = "x".repeat(4 << 20);
        handle.push(OutMsg::Frame(&big)).unwrap();
        handle.flush();
        assert!(ready(&out), "the rest is handed to the task");
        assert_eq!(
            out.turn(),
            Some(Turn::Write {
                want_drained: false,
                close: None
            })
        );
        // Frames queued meanwhile wait for the task, behind the rest.
        handle.push(OutMsg::Frame("tail")).unwrap();
        handle.flush();
        let mut got = read_all(&mut peer);
        let mut taken = Vec::new();
        while out.take(&mut taken).is_some() {
            got.extend_from_slice(&taken);
        }
        got.extend(read_all(&mut peer));
        let mut want = Vec::new();
        frame::encode_text(&mut want, big.as_bytes());
        frame::encode_text(&mut want, b"tail");
        assert_eq!(got.len(), want.len());
        assert!(got == want, "bytes arrive whole and in order");
        assert!(!ready(&out), "writing went back to the engine");
        handle.push(OutMsg::Frame("next")).unwrap();
        handle.flush();
        assert_eq!(read_all(&mut peer), [0x81, 4, b'n', b'e', b'x', b't']);
    }

    #[test]
    fn capacity_counts_frames_queued_and_being_written() {
        let (handle, out, _peer) = pair(2);
        out.append(b"pong");
        handle.push(OutMsg::Frame("a")).unwrap();
        let mut taken = Vec::new();
        assert!(out.take(&mut taken).is_some());
        handle.push(OutMsg::Frame("b")).unwrap();
        assert_eq!(
            handle.push(OutMsg::Frame("c")),
            Err(QueueError::Full(SlowConsumer))
        );
        assert!(out.take(&mut taken).is_some());
        assert!(out.take(&mut taken).is_none());
        handle.push(OutMsg::Frame("c")).unwrap();
    }

    #[test]
    fn close_and_drained_wake_the_task_and_ride_after_the_frames() {
        let (handle, out, _peer) = pair(8);
        handle.push(OutMsg::Frame("a")).unwrap();
        handle.push(OutMsg::WantDrained).unwrap();
        handle.close(1000);
        assert_eq!(handle.push(OutMsg::Frame("late")), Ok(Due::Nothing));
        assert!(ready(&out));
        assert_eq!(
            out.turn(),
            Some(Turn::Write {
                want_drained: true,
                close: Some(1000)
            })
        );
        let mut taken = Vec::new();
        assert!(out.take(&mut taken).is_some());
        assert_eq!(taken, [0x81, 1, b'a']);
    }

    #[test]
    fn kill_wins_and_keeps_the_first_code() {
        let (handle, out, _peer) = pair(8);
        handle.push(OutMsg::Frame("a")).unwrap();
        handle.kill(SlowConsumer.close_code());
        handle.close(1006);
        assert_eq!(out.turn(), Some(Turn::Kill(1013)));
        // The task's Close frame still goes out, alone.
        handle.push(OutMsg::Frame("late")).unwrap();
        let mut close = Vec::new();
        frame::encode_close(&mut close, 1013);
        out.append(&close);
        let mut taken = Vec::new();
        assert!(out.take(&mut taken).is_some());
        assert_eq!(taken, close);
        out.gone();
        assert_eq!(handle.push(OutMsg::Ping), Err(QueueError::Gone));
    }
}
