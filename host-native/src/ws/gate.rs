//! Polls a socket's read side only after it asked to be polled.
//!
//! A socket task is woken for writes far more often than for reads; polling
//! the protocol layer's reader on each of those wakes costs a read attempt
//! (and the reader's buffer preparation) for nothing. The gate hands the
//! reader its own waker and lets a poll through only once that waker fired.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use futures_util::task::AtomicWaker;
use futures_util::Stream;

/// The reader's waker: records the wake, then wakes the task.
#[derive(Debug)]
struct Flag {
    woken: AtomicBool,
    task: AtomicWaker,
}

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        self.task.wake();
    }
}

/// A read gate for one socket.
#[derive(Debug)]
pub(crate) struct ReadGate {
    flag: Arc<Flag>,
    waker: Waker,
}

impl ReadGate {
    /// A gate that lets the first poll through.
    pub(crate) fn new() -> ReadGate {
        let flag = Arc::new(Flag {
            woken: AtomicBool::new(true),
            task: AtomicWaker::new(),
        });
        let waker = Waker::from(flag.clone());
        ReadGate { flag, waker }
    }

    /// Polls `stream` if its waker fired since it last returned `Pending`.
    pub(crate) fn poll_next<S: Stream + Unpin>(
        &self,
        stream: &mut S,
        cx: &mut Context<'_>,
    ) -> Poll<Option<S::Item>> {
        self.flag.task.register(cx.waker());
        if !self.flag.woken.swap(false, Ordering::AcqRel) {
            return Poll::Pending;
        }
        let polled = std::pin::Pin::new(stream).poll_next(&mut Context::from_waker(&self.waker));
        if polled.is_ready() {
            // More may be buffered already: the next poll goes through.
            self.flag.woken.store(true, Ordering::Release);
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::stream;

    #[test]
    fn polls_only_after_the_reader_was_woken() {
        let gate = ReadGate::new();
        let mut cx = Context::from_waker(Waker::noop());
        let mut pending = stream::pending::<u8>();
        assert!(gate.poll_next(&mut pending, &mut cx).is_pending());
        // Not woken since: the stream is not polled (an always-ready stream
        // shows it).
        let mut ready = stream::repeat(1u8);
        assert!(gate.poll_next(&mut ready, &mut cx).is_pending());
        gate.waker.wake_by_ref();
        assert_eq!(gate.poll_next(&mut ready, &mut cx), Poll::Ready(Some(1)));
        assert_eq!(gate.poll_next(&mut ready, &mut cx), Poll::Ready(Some(1)));
    }
}
