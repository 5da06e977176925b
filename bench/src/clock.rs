//! One monotonic clock for every thread of the generator: nanoseconds since
//! the first call, so stamps written by the publisher and read by the
//! workers share an origin.

use std::sync::OnceLock;
use std::time::Instant;

static EPOCH: OnceLock<Instant> = OnceLock::new();

/// Nanoseconds elapsed since the generator's epoch.
pub fn now_ns() -> u64 {
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
}
