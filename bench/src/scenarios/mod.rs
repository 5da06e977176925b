//! The benchmark scenarios, one module each.

pub mod appends;
pub mod catchup;
pub mod cluster;
pub mod fanout;
pub mod fanout_history;
pub mod fanout_pusher;
pub mod idle;
pub mod paired;
pub mod thread_fanout;

/// Concurrent HTTP appenders of the thread scenarios (3 and 4): one
/// keep-alive connection each, one append in flight per connection.
pub const HTTP_APPENDERS: usize = 64;

/// Milliseconds with two decimals, for result lines.
pub fn ms(v: f64) -> String {
    format!("{v:.2} ms")
}

/// A count per second in thousands, for result lines.
pub fn kps(v: f64) -> String {
    format!("{:.1}k/s", v / 1000.0)
}
