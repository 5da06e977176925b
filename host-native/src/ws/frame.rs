//! Server-to-client WebSocket frames (RFC 6455 §5.2), written straight into
//! a socket's outbound bytes: a server's frames are never masked, so a frame
//! is a 2 to 10-byte header followed by the payload as is.

/// Outbound buffers up to this capacity are kept for reuse once written;
/// larger ones are released so an idle socket holds little.
pub(crate) const KEEP_BUFFER: usize = 64 * 1024;

const FIN: u8 = 0x80;
const OP_TEXT: u8 = 0x1;
const OP_CLOSE: u8 = 0x8;
const OP_PING: u8 = 0x9;

fn header(out: &mut Vec<u8>, opcode: u8, len: usize) {
    let first = FIN | opcode;
    match len {
        0..=125 => out.extend_from_slice(&[first, len as u8]),
        126..=0xFFFF => {
            out.extend_from_slice(&[first, 126]);
            out.extend_from_slice(&(len as u16).to_be_bytes());
        }
        _ => {
            out.extend_from_slice(&[first, 127]);
            out.extend_from_slice(&(len as u64).to_be_bytes());
        }
    }
}

/// Appends a final text frame carrying `payload` (UTF-8 by construction).
pub(crate) fn encode_text(out: &mut Vec<u8>, payload: &[u8]) {
    out.reserve(payload.len() + 10);
    header(out, OP_TEXT, payload.len());
    out.extend_from_slice(payload);
}

/// Appends an empty Ping.
pub(crate) fn encode_ping(out: &mut Vec<u8>) {
    header(out, OP_PING, 0);
}

/// Appends a Close frame with `code` and no reason.
pub(crate) fn encode_close(out: &mut Vec<u8>, code: u16) {
    header(out, OP_CLOSE, 2);
    out.extend_from_slice(&code.to_be_bytes());
}

/// Where the frame holding byte `at` of `bytes` ends, frames lying end to
/// end from offset `first`: the first frame boundary at or after `at`
/// (`first` when `at` comes before it; `bytes.len()` at most).
pub(crate) fn frame_end(bytes: &[u8], first: usize, at: usize) -> usize {
    let mut end = first;
    while end < at && end < bytes.len() {
        end = end.saturating_add(encoded_len(&bytes[end..]));
    }
    end.min(bytes.len())
}

/// The length, header included, of the frame `bytes` starts with (all of
/// `bytes` when its header is cut short).
fn encoded_len(bytes: &[u8]) -> usize {
    let Some(&second) = bytes.get(1) else {
        return bytes.len();
    };
    let (header, payload) = match second & 0x7F {
        126 => match bytes.get(2..4) {
            Some(len) => (4, u64::from(u16::from_be_bytes([len[0], len[1]]))),
            None => return bytes.len(),
        },
        127 => match bytes
            .get(2..10)
            .and_then(|len| <[u8; 8]>::try_from(len).ok())
        {
            Some(len) => (10, u64::from_be_bytes(len)),
            None => return bytes.len(),
        },
        short => (2, u64::from(short)),
    };
    let mask = if second & 0x80 == 0 { 0 } else { 4 };
    usize::try_from(payload).map_or(usize::MAX, |payload| payload.saturating_add(header + mask))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_lengths_follow_the_three_forms() {
        for (len, head) in [
            (0usize, vec![0x81, 0]),
            (125, vec![0x81, 125]),
            (126, vec![0x81, 126, 0, 126]),
            (65535, vec![0x81, 126, 0xFF, 0xFF]),
            (65536, vec![0x81, 127, 0, 0, 0, 0, 0, 1, 0, 0]),
        ] {
            let payload = vec![b'x'; len];
            let mut out = Vec::new();
            encode_text(&mut out, &payload);
            assert_eq!(out[..head.len()], head[..], "length {len}");
            assert_eq!(out.len(), head.len() + len);
        }
    }

    #[test]
    fn a_frame_ends_where_the_next_one_starts() {
        let mut bytes = vec![0xAA; 3];
        for len in [5usize, 200, 70_000] {
            encode_text(&mut bytes, &vec![b'x'; len]);
        }
        encode_close(&mut bytes, 1013);
        let ends = [3, 3 + 7, 3 + 7 + 204, 3 + 7 + 204 + 70_010, bytes.len()];
        assert_eq!(frame_end(&bytes, 3, 0), 3, "before the first frame");
        assert_eq!(frame_end(&bytes, 3, 3), 3, "on a boundary");
        assert_eq!(frame_end(&bytes, 3, 4), ends[1]);
        assert_eq!(frame_end(&bytes, 3, ends[1]), ends[1]);
        assert_eq!(frame_end(&bytes, 3, ends[1] + 1), ends[2]);
        assert_eq!(frame_end(&bytes, 3, ends[2] + 100), ends[3]);
        assert_eq!(frame_end(&bytes, 3, ends[3] + 1), ends[4]);
        assert_eq!(frame_end(&bytes, 3, bytes.len()), bytes.len());
        assert_eq!(
            frame_end(&bytes[..ends[3] - 1], 3, ends[2] + 1),
            ends[3] - 1
        );
    }

    #[test]
    fn control_frames() {
        let mut out = Vec::new();
        encode_ping(&mut out);
        encode_close(&mut out, 1013);
        assert_eq!(out, [0x89, 0, 0x88, 2, 0x03, 0xF5]);
    }
}
