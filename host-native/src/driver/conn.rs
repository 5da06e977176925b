//! A socket as the engine task sees it: an outbound queue of WebSocket
//! frames, already encoded, shared with the socket's task.
//!
//! The engine task appends each frame's bytes to the queue; the socket's task
//! takes everything queued at once and writes it with one write, so a socket
//! that fell behind catches up with one system call per turn instead of one
//! per frame. The task is woken only when the queue goes from empty to not
//! empty. The queue is bounded in frames (queued or being written); a full
//! queue is a slow consumer.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use bubble_core::edge::{OutboundLimit, SlowConsumer};
use bubble_core::SharedFrame;

use crate::ws::frame;

/// What the writer of one socket is asked to do, in order.
#[derive(Debug)]
pub(crate) enum OutMsg {
    /// Write a serialized text frame.
    Frame(SharedFrame),
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

/// The queue's state, behind one lock.
#[derive(Debug, Default)]
struct State {
    /// Encoded frames not yet taken by the writer.
    bytes: Vec<u8>,
    /// Frames in `bytes`.
    queued: usize,
    /// Frames taken by the writer and not yet written.
    writing: usize,
    /// A `WantDrained` is in `bytes`' span.
    want_drained: bool,
    /// Close with this code once `bytes` is written.
    close: Option<u16>,
    /// Close now with this code, dropping what is queued.
    kill: Option<u16>,
    /// The socket's task ended.
    gone: bool,
    /// The socket's task, to wake when there is something to do.
    waker: Option<Waker>,
}

impl State {
    fn wake(&mut self) {
        if let Some(waker) = self.waker.take() {
            waker.wake();
        }
    }
}

/// The queue shared by the engine task and one socket's task.
#[derive(Debug)]
pub(crate) struct Outbound {
    state: Mutex<State>,
    limit: OutboundLimit,
}

/// What the socket's task takes from the queue in one turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Turn {
    /// Write the bytes taken; then report `Drained` if asked, then close
    /// with the code if any.
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
    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays consistent whatever panicked while it was held.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Resolves when there is something to do (registers the socket task
    /// to be woken otherwise).
    pub(crate) fn poll_ready(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = self.lock();
        if state.kill.is_some() || state.queued > 0 || state.want_drained || state.close.is_some() {
            return Poll::Ready(());
        }
        if !state
            .waker
            .as_ref()
            .is_some_and(|w| w.will_wake(cx.waker()))
        {
            state.waker = Some(cx.waker().clone());
        }
        Poll::Pending
    }

    /// Takes what there is to do: the queued bytes are appended to `into`
    /// and counted as being written until [`Outbound::written`]. `None`
    /// when there is nothing.
    pub(crate) fn take(&self, into: &mut Vec<u8>) -> Option<Turn> {
        let mut state = self.lock();
        if let Some(code) = state.kill {
            return Some(Turn::Kill(code));
        }
        if state.queued == 0 && !state.want_drained && state.close.is_none() {
            return None;
        }
        if into.is_empty() {
            // Hand the buffer over instead of copying it.
            std::mem::swap(into, &mut state.bytes);
        } else {
            into.extend_from_slice(&state.bytes);
            state.bytes.clear();
        }
        state.writing += state.queued;
        state.queued = 0;
        Some(Turn::Write {
            want_drained: std::mem::take(&mut state.want_drained),
            close: state.close.take(),
        })
    }

    /// Resolves once the socket is killed, with the code.
    pub(crate) fn poll_killed(&self, cx: &mut Context<'_>) -> Poll<u16> {
        let mut state = self.lock();
        match state.kill {
            Some(code) => Poll::Ready(code),
            None => {
                if !state
                    .waker
                    .as_ref()
                    .is_some_and(|w| w.will_wake(cx.waker()))
                {
                    state.waker = Some(cx.waker().clone());
                }
                Poll::Pending
            }
        }
    }

    /// Everything taken so far has been written; `spare` is an empty buffer
    /// the queue may reuse.
    pub(crate) fn written(&self, spare: &mut Vec<u8>) {
        let mut state = self.lock();
        state.writing = 0;
        if state.bytes.capacity() == 0 && spare.capacity() <= frame::KEEP_BUFFER {
            spare.clear();
            std::mem::swap(&mut state.bytes, spare);
        }
    }

    /// The socket's task ended: later pushes fail with `Gone`.
    pub(crate) fn gone(&self) {
        let mut state = self.lock();
        state.gone = true;
        state.bytes = Vec::new();
        state.waker = None;
    }

    fn push(&self, msg: &OutMsg) -> Result<(), QueueError> {
        let mut state = self.lock();
        if state.gone {
            return Err(QueueError::Gone);
        }
        if state.close.is_some() || state.kill.is_some() {
            // Nothing follows a Close.
            return Ok(());
        }
        self.limit
            .admit(state.queued + state.writing)
            .map_err(QueueError::Full)?;
        let was_idle = state.queued == 0 && !state.want_drained;
        match msg {
            OutMsg::Frame(text) => {
                frame::encode_text(&mut state.bytes, text.as_bytes());
                state.queued += 1;
            }
            OutMsg::Ping => {
                frame::encode_ping(&mut state.bytes);
                state.queued += 1;
            }
            OutMsg::Close(code) => state.close = Some(*code),
            OutMsg::WantDrained => state.want_drained = true,
        }
        if was_idle {
            state.wake();
        }
        Ok(())
    }

    fn kill(&self, code: u16) {
        let mut state = self.lock();
        // The first code wins: a later shutdown does not relabel a slow consumer.
        if state.kill.is_none() {
            state.kill = Some(code);
        }
        state.bytes = Vec::new();
        state.queued = 0;
        state.wake();
    }
}

/// The engine task's handle on one socket.
#[derive(Debug, Clone)]
pub(crate) struct ConnHandle {
    out: Arc<Outbound>,
}

impl ConnHandle {
    /// A handle and the socket task's end of its queue, bounded by `limit`.
    pub(crate) fn new(limit: OutboundLimit) -> (ConnHandle, Arc<Outbound>) {
        let out = Arc::new(Outbound {
            state: Mutex::new(State::default()),
            limit,
        });
        (ConnHandle { out: out.clone() }, out)
    }

    /// Queues `msg` without waiting.
    pub(crate) fn push(&self, msg: OutMsg) -> Result<(), QueueError> {
        self.out.push(&msg)
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;

    fn take(out: &Outbound, into: &mut Vec<u8>) -> Poll<Turn> {
        match out.poll_ready(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(()) => Poll::Ready(out.take(into).expect("something to take")),
            Poll::Pending => {
                assert_eq!(out.take(into), None);
                Poll::Pending
            }
        }
    }

    #[test]
    fn frames_queue_encoded_and_are_taken_at_once() {
        let (handle, out) = ConnHandle::new(OutboundLimit::frames(8));
        let mut into = Vec::new();
        assert_eq!(take(&out, &mut into), Poll::Pending);
        handle.push(OutMsg::Frame("ab".into())).unwrap();
        handle.push(OutMsg::Ping).unwrap();
        assert_eq!(
            take(&out, &mut into),
            Poll::Ready(Turn::Write {
                want_drained: false,
                close: None
            })
        );
        assert_eq!(into, [0x81, 2, b'a', b'b', 0x89, 0]);
        assert_eq!(take(&out, &mut Vec::new()), Poll::Pending);
    }

    #[test]
    fn capacity_counts_frames_being_written() {
        let (handle, out) = ConnHandle::new(OutboundLimit::frames(2));
        handle.push(OutMsg::Frame("a".into())).unwrap();
        let mut into = Vec::new();
        assert!(take(&out, &mut into).is_ready());
        handle.push(OutMsg::Frame("b".into())).unwrap();
        assert_eq!(
            handle.push(OutMsg::Frame("c".into())),
            Err(QueueError::Full(SlowConsumer))
        );
        into.clear();
        out.written(&mut into);
        handle.push(OutMsg::Frame("c".into())).unwrap();
    }

    #[test]
    fn close_and_drained_ride_after_the_frames() {
        let (handle, out) = ConnHandle::new(OutboundLimit::frames(8));
        handle.push(OutMsg::WantDrained).unwrap();
        handle.close(1000);
        handle.push(OutMsg::Frame("late".into())).unwrap();
        let mut into = Vec::new();
        assert_eq!(
            take(&out, &mut into),
            Poll::Ready(Turn::Write {
                want_drained: true,
                close: Some(1000)
            })
        );
        assert!(into.is_empty());
    }

    #[test]
    fn kill_wins_and_keeps_the_first_code() {
        let (handle, out) = ConnHandle::new(OutboundLimit::frames(8));
        handle.push(OutMsg::Frame("a".into())).unwrap();
        handle.kill(SlowConsumer.close_code());
        handle.close(1006);
        assert_eq!(take(&out, &mut Vec::new()), Poll::Ready(Turn::Kill(1013)));
        out.gone();
        assert_eq!(handle.push(OutMsg::Ping), Err(QueueError::Gone));
    }
}
