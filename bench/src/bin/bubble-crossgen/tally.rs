//! What the subscribers saw, shared by every task on the one runtime thread
//! (`Rc` + `Cell`, no atomics or locks), and the generator clock.

use std::cell::{Cell, RefCell};
use std::time::Instant;

use hdrhistogram::Histogram;

/// Microseconds since the generator started, the time base of stamps.
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    origin: Instant,
}

impl Clock {
    /// A clock starting now.
    pub fn start() -> Self {
        Clock {
            origin: Instant::now(),
        }
    }

    /// `t` in microseconds since the origin.
    pub fn us_at(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.origin).as_micros() as u64
    }

    /// Now in microseconds since the origin.
    pub fn now_us(&self) -> u64 {
        self.us_at(Instant::now())
    }
}

/// Counters of one measurement phase plus the connection state of the
/// subscribers.
pub struct Tally {
    clock: Clock,
    /// Stamps before this belong to an earlier phase.
    phase_start_us: Cell<u64>,
    delivered: Cell<u64>,
    stale: Cell<u64>,
    other: Cell<u64>,
    /// Latency in µs from scheduled send to receipt.
    latency: RefCell<Histogram<u64>>,
    ready: Cell<usize>,
    failed: Cell<usize>,
    lost: Cell<usize>,
}

impl Tally {
    /// An empty tally on `clock`.
    pub fn new(clock: Clock) -> Self {
        Tally {
            clock,
            phase_start_us: Cell::new(0),
            delivered: Cell::new(0),
            stale: Cell::new(0),
            other: Cell::new(0),
            latency: RefCell::new(
                Histogram::new_with_bounds(1, 120_000_000, 3)
                    .expect("static histogram bounds are valid"),
            ),
            ready: Cell::new(0),
            failed: Cell::new(0),
            lost: Cell::new(0),
        }
    }

    /// Starts a phase whose first send is scheduled at `start_us`.
    pub fn begin_phase(&self, start_us: u64) {
        self.phase_start_us.set(start_us);
        self.delivered.set(0);
        self.stale.set(0);
        self.other.set(0);
        self.latency.borrow_mut().reset();
    }

    /// Accounts one received frame.
    pub fn frame(&self, bytes: &[u8]) {
        let now = self.clock.now_us();
        match crate::stamp::decode(bytes) {
            Some(sched) if sched >= self.phase_start_us.get() => {
                self.delivered.set(self.delivered.get() + 1);
                self.latency
                    .borrow_mut()
                    .saturating_record(now.saturating_sub(sched).max(1));
            }
            Some(_) => self.stale.set(self.stale.get() + 1),
            None => self.other.set(self.other.get() + 1),
        }
    }

    /// Deliveries of the current phase.
    pub fn delivered(&self) -> u64 {
        self.delivered.get()
    }

    /// Deliveries stamped before the current phase.
    pub fn stale(&self) -> u64 {
        self.stale.get()
    }

    /// Frames without a stamp.
    pub fn other(&self) -> u64 {
        self.other.get()
    }

    /// Latency quantile `q` of the current phase, in milliseconds.
    pub fn latency_ms(&self, q: f64) -> Option<f64> {
        let h = self.latency.borrow();
        (!h.is_empty()).then(|| h.value_at_quantile(q) as f64 / 1000.0)
    }

    /// A subscriber is ready to receive.
    pub fn mark_ready(&self) {
        self.ready.set(self.ready.get() + 1);
    }

    /// A subscriber could not connect or subscribe.
    pub fn mark_failed(&self) {
        self.failed.set(self.failed.get() + 1);
    }

    /// A ready subscriber lost its connection.
    pub fn mark_lost(&self) {
        self.lost.set(self.lost.get() + 1);
    }

    /// (ready, failed, lost) subscribers.
    pub fn subscribers(&self) -> (usize, usize, usize) {
        (self.ready.get(), self.failed.get(), self.lost.get())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stamp;

    #[test]
    fn counts_by_phase() {
        let clock = Clock::start();
        let t = Tally::new(clock);
        t.begin_phase(0);
        t.frame(stamp::encode(0, 64).as_bytes());
        t.frame(b"pubb:ping");
        assert_eq!((t.delivered(), t.stale(), t.other()), (1, 0, 1));
        let later = clock.now_us() + 1_000_000;
        t.begin_phase(later);
        t.frame(stamp::encode(later - 1, 64).as_bytes());
        assert_eq!((t.delivered(), t.stale(), t.other()), (0, 1, 0));
        assert_eq!(t.latency_ms(0.5), None);
        t.frame(stamp::encode(later, 64).as_bytes());
        assert_eq!(t.delivered(), 1);
        // Received "before" it was scheduled: clamped to 1 µs.
        assert_eq!(t.latency_ms(0.5), Some(0.001));
    }
}
