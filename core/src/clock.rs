//! Host-supplied time: kept monotonic, and formatted as RFC 3339.

use crate::ids::Millis;

/// `now` as RFC 3339 UTC with millisecond precision, e.g.
/// `2026-11-30T09:44:10.123Z`.
pub fn rfc3339(now: Millis) -> String {
    const EPOCH: &str = "1970-01-01T00:00:00.000Z";
    let nanos = i128::from(now.0) * 1_000_000;
    let Ok(t) = time::OffsetDateTime::from_unix_timestamp_nanos(nanos) else {
        return EPOCH.to_owned();
    };
    let (year, month, day) = t.to_calendar_date();
    let Ok(year) = u16::try_from(year) else {
        return EPOCH.to_owned();
    };
    let mut out = String::with_capacity(EPOCH.len());
    for (value, width, then) in [
        (year, 4, '-'),
        (u16::from(u8::from(month)), 2, '-'),
        (u16::from(day), 2, 'T'),
        (u16::from(t.hour()), 2, ':'),
        (u16::from(t.minute()), 2, ':'),
        (u16::from(t.second()), 2, '.'),
        (t.millisecond(), 3, 'Z'),
    ] {
        push_padded(&mut out, value, width);
        out.push(then);
    }
    out
}

/// Appends `value` in decimal, zero-padded to `width` digits (more when it
/// has more).
fn push_padded(out: &mut String, value: u16, width: u32) {
    let digits = value.checked_ilog10().unwrap_or(0) + 1;
    for _ in digits..width {
        out.push('0');
    }
    for place in (0..digits).rev() {
        let digit = value / 10u16.pow(place) % 10;
        out.push(char::from(b'0' + digit as u8));
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
    }
}
