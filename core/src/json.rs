//! JSON written by hand where the engine builds frames and rows: strings
//! quoted as `serde_json` quotes them, and the length of a value's JSON.

/// Appends `s` as a JSON string, written as `serde_json` writes it: as is
/// between quotes when nothing in it needs escaping (a channel name, an
/// id), through `serde_json` otherwise.
pub(crate) fn push_json_str(out: &mut String, s: &str) {
    if s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        out.push_str(&serde_json::to_string(s).unwrap_or_default());
    } else {
        out.push('"');
        out.push_str(s);
        out.push('"');
    }
}

/// Bytes of the compact JSON serialization of `value`, counted as it is
/// written (nothing is allocated).
pub(crate) fn json_len(value: &impl serde::Serialize) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    match serde_json::to_writer(&mut counter, value) {
        Ok(()) => counter.0,
        Err(_) => usize::MAX,
    }
}
