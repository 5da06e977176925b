//! Slow consumers (SPEC §5): every socket has a bounded outbound queue, and
//! a reader that cannot keep up is closed rather than buffered without
//! bound.
//!
//! The decision, for every host: a frame may be handed to a socket only
//! while fewer than `limits.outbound_queue_frames` frames are outstanding
//! on it (queued, or handed to the transport and not yet written). The
//! frame that finds the queue full is not sent, nor is anything after it;
//! frames the host still holds are dropped; and the socket is closed at
//! once with 1013 (Try Again Later). The client thus receives a gapless
//! prefix of its frames, then the Close, and resumes with `fromSeq` (or
//! resubscribes) on a new connection.

use crate::Limits;

/// The close code of a slow consumer: 1013, Try Again Later.
pub const SLOW_CONSUMER_CLOSE: u16 = 1013;

/// A socket's queue is full: close it with [`SlowConsumer::close_code`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlowConsumer;

impl SlowConsumer {
    /// The WebSocket close code to send (1013).
    pub fn close_code(self) -> u16 {
        SLOW_CONSUMER_CLOSE
    }
}

/// The bound of every socket's outbound queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutboundLimit {
    frames: usize,
}

impl OutboundLimit {
    /// The bound configured in `limits` (at least one frame).
    pub fn new(limits: &Limits) -> OutboundLimit {
        OutboundLimit::frames(limits.outbound_queue_frames)
    }

    /// A bound of `frames` (at least one).
    pub fn frames(frames: usize) -> OutboundLimit {
        OutboundLimit {
            frames: frames.max(1),
        }
    }

    /// The bound, in frames.
    pub fn capacity(self) -> usize {
        self.frames
    }

    /// Whether one more frame may go to a socket with `outstanding` frames
    /// queued or not yet written.
    pub fn admit(self, outstanding: usize) -> Result<(), SlowConsumer> {
        if outstanding < self.frames {
            Ok(())
        } else {
            Err(SlowConsumer)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_frame_that_finds_the_queue_full_is_refused() {
        let limit = OutboundLimit::frames(4);
        assert_eq!(limit.admit(0), Ok(()));
        assert_eq!(limit.admit(3), Ok(()));
        assert_eq!(limit.admit(4), Err(SlowConsumer));
        assert_eq!(limit.admit(9), Err(SlowConsumer));
        assert_eq!(SlowConsumer.close_code(), 1013);
    }

    #[test]
    fn the_bound_is_at_least_one_frame() {
        assert_eq!(OutboundLimit::frames(0).admit(0), Ok(()));
        assert_eq!(OutboundLimit::frames(0).admit(1), Err(SlowConsumer));
        let limits = Limits {
            outbound_queue_frames: 7,
            ..Limits::default()
        };
        assert_eq!(OutboundLimit::new(&limits).capacity(), 7);
    }
}
