//! Host-supplied time: kept monotonic, and formatted as RFC 3339.

use crate::ids::Millis;

/// `now` as RFC 3339 UTC with millisecond precision, e.g.
/// `2026-11-30T09:44:10.123Z`. A time past the year 9999 reads as the
/// epoch.
pub fn rfc3339(now: Millis) -> String {
    const EPOCH: &str = "1970-01-01T00:00:00.000Z";
    let Some(t) = i64::try_from(now.0 / 1000)
        .ok()
        .and_then(|secs| time::OffsetDateTime::from_unix_timestamp(secs).ok())
    else {
        return EPOCH.to_owned();
    };
    let (year, month, day) = t.to_calendar_date();
    let Some(year) = u32::try_from(year).ok().filter(|y| *y <= 9999) else {
        return EPOCH.to_owned();
    };
    let mut out = *b"0000-00-00T00:00:00.000Z";
    for (at, width, value) in [
        (0, 4, year),
        (5, 2, u32::from(u8::from(month))),
        (8, 2, u32::from(day)),
        (11, 2, u32::from(t.hour())),
        (14, 2, u32::from(t.minute())),
        (17, 2, u32::from(t.second())),
        // Below 1000: the remainder of a division by 1000.
        (20, 3, (now.0 % 1000) as u32),
    ] {
        put_digits(&mut out[at..at + width], value);
    }
    out.iter().copied().map(char::from).collect()
}

/// Writes the last `digits.len()` decimal digits of `value` into `digits`.
fn put_digits(digits: &mut [u8], mut value: u32) {
    for digit in digits.iter_mut().rev() {
        *digit = b'0' + (value % 10) as u8;
        value /= 10;
    }
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
        assert_eq!(rfc3339(Millis(951_782_400_007)), "2000-02-29T00:00:00.007Z");
        assert_eq!(
            rfc3339(Millis(1_000_000_000_000_000)),
            "1970-01-01T00:00:00.000Z"
        );
        assert_eq!(
            rfc3339(Millis(253_402_300_799_999)),
            "9999-12-31T23:59:59.999Z"
        );
        assert_eq!(
            rfc3339(Millis(253_402_300_800_000)),
            "1970-01-01T00:00:00.000Z"
        );
        assert_eq!(rfc3339(Millis(u64::MAX)), "1970-01-01T00:00:00.000Z");
    }
}
