//! The crossgen stamp: `T<µs>;`, the scheduled send time in decimal
//! microseconds since the generator started, followed by `.` padding.
//!
//! It is deliberately unlike bubble-bench's fixed-width hex stamp: a decimal
//! of varying length, found by scanning for `T`, digits, `;`. The characters
//! need no escaping inside a JSON string, so the same scan finds the stamp in
//! an nchan body and in a pubb event envelope.

/// A payload of `len` bytes carrying `sched_us`: the stamp, then `.` up to
/// `len`. If `len` is shorter than the stamp, the payload is just the stamp.
pub fn encode(sched_us: u64, len: usize) -> String {
    let mut s = format!("T{sched_us};");
    if s.len() < len {
        s.extend(std::iter::repeat_n('.', len - s.len()));
    }
    s
}

/// The scheduled send time carried by `frame`: the first `T` directly
/// followed by decimal digits and a `;`.
pub fn decode(frame: &[u8]) -> Option<u64> {
    let mut from = 0;
    while let Some(off) = frame[from..].iter().position(|&b| b == b'T') {
        let start = from + off + 1;
        if let Some(v) = digits_then_semicolon(&frame[start..]) {
            return Some(v);
        }
        from = start;
    }
    None
}

fn digits_then_semicolon(s: &[u8]) -> Option<u64> {
    let mut v: u64 = 0;
    for (i, &b) in s.iter().enumerate() {
        match b {
            b'0'..=b'9' => {
                v = v.checked_mul(10)?.checked_add(u64::from(b - b'0'))?;
            }
            b';' if i > 0 => return Some(v),
            _ => return None,
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_with_padding_to_length() {
        let p = encode(1234, 16);
        assert_eq!(p, "T1234;..........");
        assert_eq!(p.len(), 16);
        assert_eq!(encode(123_456_789, 4), "T123456789;");
        assert_eq!(encode(0, 3), "T0;");
    }

    #[test]
    fn round_trips() {
        for us in [0, 1, 999, 1_000_000, 86_400_000_000, u64::MAX] {
            assert_eq!(decode(encode(us, 64).as_bytes()), Some(us));
        }
    }

    #[test]
    fn finds_the_stamp_inside_a_pubb_envelope() {
        let frame = format!(
            r#"{{"event":"bench","channel":"xg3","data":"{}"}}"#,
            encode(42_000, 64)
        );
        assert_eq!(decode(frame.as_bytes()), Some(42_000));
        // A `T` that is not a stamp before the real one is skipped.
        assert_eq!(decode(b"{\"T\":1,\"x\":\"T7;..\"}"), Some(7));
    }

    #[test]
    fn rejects_non_stamps() {
        assert_eq!(decode(b""), None);
        assert_eq!(decode(b"T;"), None);
        assert_eq!(decode(b"T12"), None);
        assert_eq!(decode(b"T12x;"), None);
        assert_eq!(decode(b"pubb:subscription_succeeded"), None);
        // Overflow is not a stamp.
        assert_eq!(decode(b"T99999999999999999999999;"), None);
    }
}
