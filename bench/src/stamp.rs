//! The stamp each payload carries: `~SSTTTTTTTTTTTTTTTT~`, a step number and
//! the scheduled send time (nanoseconds on the generator clock) in
//! lowercase hex. The marker survives JSON string encoding untouched, so the
//! same scan finds it in an nchan body, a pubb envelope or a thread event.

/// Length of a stamp in bytes.
pub const STAMP_LEN: usize = 20;

/// Number of distinct steps a run counts (a stamp could name 256): the
/// warm-up, the fixed rates and a saturation search per publisher width.
pub const MAX_STEPS: usize = 48;

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Writes a stamp for `step` and `sched_ns` into `out` (exactly `STAMP_LEN` bytes).
pub fn write(out: &mut [u8], step: u8, sched_ns: u64) {
    out[0] = b'~';
    out[1] = HEX[(step >> 4) as usize & 0xf];
    out[2] = HEX[step as usize & 0xf];
    for i in 0..16 {
        out[3 + i] = HEX[((sched_ns >> (60 - 4 * i)) & 0xf) as usize];
    }
    out[19] = b'~';
}

/// A fresh payload of `len` bytes (at least `STAMP_LEN`): a placeholder
/// stamp followed by filler.
pub fn payload(len: usize) -> Vec<u8> {
    let mut p = vec![b'x'; len.max(STAMP_LEN)];
    write(&mut p, 0, 0);
    p
}

fn hex_val(b: u8) -> Option<u64> {
    match b {
        b'0'..=b'9' => Some((b - b'0') as u64),
        b'a'..=b'f' => Some((b - b'a' + 10) as u64),
        _ => None,
    }
}

/// Finds the first stamp in `frame`: `(step, sched_ns)`.
pub fn find(frame: &[u8]) -> Option<(u8, u64)> {
    let mut from = 0;
    while let Some(pos) = frame[from..].iter().position(|&b| b == b'~') {
        let at = from + pos;
        if let Some(s) = frame.get(at..at + STAMP_LEN) {
            if s[19] == b'~' {
                if let Some(v) = parse(&s[1..19]) {
                    return Some(((v.0) as u8, v.1));
                }
            }
        } else {
            return None;
        }
        from = at + 1;
    }
    None
}

fn parse(hex: &[u8]) -> Option<(u64, u64)> {
    let step = hex_val(hex[0])? << 4 | hex_val(hex[1])?;
    let mut t = 0u64;
    for &b in &hex[2..18] {
        t = t << 4 | hex_val(b)?;
    }
    Some((step, t))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_inside_json() {
        let mut p = payload(64);
        write(&mut p, 7, 0x0123_4567_89ab_cdef);
        let body = format!(
            "{{\"channel\":\"c1\",\"data\":\"{{\\\"name\\\":\\\"bench\\\",\\\"data\\\":\\\"{}\\\"}}\"}}",
            String::from_utf8(p).unwrap()
        );
        assert_eq!(find(body.as_bytes()), Some((7, 0x0123_4567_89ab_cdef)));
    }

    #[test]
    fn ignores_stray_markers() {
        assert_eq!(find(b"~a~ ~zz~ nothing"), None);
        let mut p = b"~~".to_vec();
        let mut s = [0u8; STAMP_LEN];
        write(&mut s, 1, 42);
        p.extend_from_slice(&s);
        assert_eq!(find(&p), Some((1, 42)));
    }
}
