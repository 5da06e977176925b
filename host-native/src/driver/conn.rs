//! A socket as the engine task sees it: a bounded outbound queue drained by
//! the socket's writer, plus a kill switch that bypasses the queue.

use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;

use bubble_core::SharedFrame;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

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

/// Closes a socket without waiting behind its queue.
#[derive(Debug, Default)]
pub(crate) struct Kill {
    code: AtomicU16,
    token: CancellationToken,
}

impl Kill {
    /// Asks the writer to close with `code` (1006: drop the connection).
    pub(crate) fn fire(&self, code: u16) {
        // The first code wins: a later shutdown does not relabel a slow consumer.
        let _ = self
            .code
            .compare_exchange(0, code, Ordering::AcqRel, Ordering::Acquire);
        self.token.cancel();
    }

    /// Resolves once fired.
    pub(crate) async fn fired(&self) {
        self.token.cancelled().await;
    }

    /// The code it was fired with.
    pub(crate) fn code(&self) -> u16 {
        self.code.load(Ordering::Acquire)
    }
}

/// The engine task's handle on one socket.
#[derive(Debug, Clone)]
pub(crate) struct ConnHandle {
    tx: mpsc::Sender<OutMsg>,
    kill: Arc<Kill>,
}

/// Why a message could not be queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum QueueError {
    /// The queue is at capacity: a slow consumer.
    Full,
    /// The socket's task is gone.
    Gone,
}

impl ConnHandle {
    /// A handle and the writer's end of its queue (`capacity` frames).
    pub(crate) fn new(capacity: usize) -> (ConnHandle, mpsc::Receiver<OutMsg>, Arc<Kill>) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let kill = Arc::new(Kill::default());
        (
            ConnHandle {
                tx,
                kill: kill.clone(),
            },
            rx,
            kill,
        )
    }

    /// Queues `msg` without waiting.
    pub(crate) fn push(&self, msg: OutMsg) -> Result<(), QueueError> {
        self.tx.try_send(msg).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => QueueError::Full,
            mpsc::error::TrySendError::Closed(_) => QueueError::Gone,
        })
    }

    /// Closes the socket now, dropping whatever is queued.
    pub(crate) fn kill(&self, code: u16) {
        self.kill.fire(code);
    }

    /// Closes the socket after what is queued; kills it if the queue is full.
    pub(crate) fn close(&self, code: u16) {
        if code == 1006 || self.push(OutMsg::Close(code)).is_err() {
            self.kill(code);
        }
    }
}
