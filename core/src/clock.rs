//! Formatting host-supplied time as RFC 3339.

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_milliseconds_utc() {
        assert_eq!(rfc3339(Millis(0)), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            rfc3339(Millis(1_796_031_850_123)),
            "2026-11-30T09:44:10.123Z"
        );
    }
}
