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

/// Whether subscriber `i` records latency, when subscriber `i` is on
/// channel (or thread) `i % groups` and one in `every` is sampled: whole
/// rounds of the groups at a time, so that every group has as many
/// samples. (`i % every == 0` samples one group only when `every` is
/// `groups`, and that group's frames can all meet the same phase of a
/// timer, such as a write delay's.)
pub fn sampled(i: usize, groups: usize, every: usize) -> bool {
    (i / groups.max(1)).is_multiple_of(every.max(1))
}

/// Milliseconds with two decimals, for result lines.
pub fn ms(v: f64) -> String {
    format!("{v:.2} ms")
}

/// A count per second in thousands, for result lines.
pub fn kps(v: f64) -> String {
    format!("{:.1}k/s", v / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::sampled;

    #[test]
    fn samples_spread_over_every_group() {
        let (subs, groups, every) = (1000, 10, 10);
        let picked: Vec<usize> = (0..subs).filter(|&i| sampled(i, groups, every)).collect();
        assert_eq!(picked.len(), subs / every);
        for group in 0..groups {
            let in_group = picked.iter().filter(|&&i| i % groups == group).count();
            assert_eq!(in_group, subs / every / groups, "group {group}");
        }
        assert!((0..7).all(|i| sampled(i, 4, 1)));
        assert_eq!((0..40).filter(|&i| sampled(i, 4, 2)).count(), 20);
    }
}
