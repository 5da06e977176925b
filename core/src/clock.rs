//! Host-supplied time: kept monotonic, and formatted as RFC 3339.

use crate::ids::Millis;

/// `now` as RFC 3339 UTC with millisecond precision, e.g.
/// `2026-11-30T09:44:10.123Z`.
pub fn rfc3339(now: Millis) -> String {
    let format = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    let nanos = i128::from(now.0) * 1_000_000;
    time::OffsetDateTime::from_unix_timestamp_nanos(nanos)
        .ok()
        .and_then(|t| t.format(format).ok())
        .unwrap_or_else(|| "1970-01-01T00:00:00.000Z".to_owned())
}

/// A host's clock as the engine must see it: never going backwards.
///
/// Hosts read a wall clock (`Date.now()`, `SystemTime::now()`), which may
/// step back (NTP, a VM resumed). The engine's timers and rate windows
/// assume time only moves forward, so every host passes each reading
/// through one `MonotonicNow` and gives the engine what it returns: the
/// reading, or the latest one seen when the reading is earlier.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MonotonicNow {
    last: Millis,
}

impl MonotonicNow {
    /// A clock that has seen no reading yet.
    pub fn new() -> MonotonicNow {
        MonotonicNow::default()
    }

    /// `wall`, clamped so that it is never earlier than a previous result.
    pub fn now(&mut self, wall: Millis) -> Millis {
        self.last = self.last.max(wall);
        self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_goes_backwards() {
        let mut clock = MonotonicNow::new();
        assert_eq!(clock.now(Millis(1_000)), Millis(1_000));
        assert_eq!(clock.now(Millis(900)), Millis(1_000));
        assert_eq!(clock.now(Millis(1_000)), Millis(1_000));
        assert_eq!(clock.now(Millis(1_250)), Millis(1_250));
        assert_eq!(clock.now(Millis(0)), Millis(1_250));
    }

    #[test]
    fn formats_milliseconds_utc() {
        assert_eq!(rfc3339(Millis(0)), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            rfc3339(Millis(1_796_031_850_123)),
            "2026-11-30T09:44:10.123Z"
        );
    }
}
