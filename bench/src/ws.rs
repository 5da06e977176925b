//! A client-side WebSocket codec that works in place: frames from the
//! server are parsed as ranges of the caller's read buffer (no copy, no
//! allocation), frames to the server are masked into a reused `Vec`.

use std::ops::Range;

/// Text frame.
pub const OP_TEXT: u8 = 0x1;
/// Close frame.
pub const OP_CLOSE: u8 = 0x8;
/// Ping frame.
pub const OP_PING: u8 = 0x9;
/// Pong frame.
pub const OP_PONG: u8 = 0xA;

/// Largest server frame accepted.
pub const MAX_FRAME: usize = 16 << 20;

/// A server frame found in a buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    /// The opcode (low four bits of the first byte).
    pub opcode: u8,
    /// Where the payload lies in the buffer that was parsed.
    pub payload: Range<usize>,
}

/// Why a server frame could not be parsed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FrameError {
    /// Servers must not mask their frames.
    #[error("server frame is masked")]
    Masked,
    /// The frame announces a payload over `MAX_FRAME`.
    #[error("server frame of {0} bytes is too large")]
    TooLarge(u64),
}

/// Parses the frame at the start of `buf`. `Ok(None)` means more bytes are
/// needed; otherwise returns the frame and the bytes it occupies.
pub fn parse(buf: &[u8]) -> Result<Option<(Frame, usize)>, FrameError> {
    if buf.len() < 2 {
        return Ok(None);
    }
    if buf[1] & 0x80 != 0 {
        return Err(FrameError::Masked);
    }
    let (len, header) = match buf[1] & 0x7f {
        126 => {
            if buf.len() < 4 {
                return Ok(None);
            }
            (u16::from_be_bytes([buf[2], buf[3]]) as u64, 4)
        }
        127 => {
            let Some(b) = buf.get(2..10) else {
                return Ok(None);
            };
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            (u64::from_be_bytes(a), 10)
        }
        n => (n as u64, 2),
    };
    if len > MAX_FRAME as u64 {
        return Err(FrameError::TooLarge(len));
    }
    let end = header + len as usize;
    if buf.len() < end {
        return Ok(None);
    }
    Ok(Some((
        Frame {
            opcode: buf[0] & 0x0f,
            payload: header..end,
        },
        end,
    )))
}

/// Appends one final client frame (masked with `mask`) to `out`.
pub fn encode(out: &mut Vec<u8>, opcode: u8, payload: &[u8], mask: [u8; 4]) {
    out.push(0x80 | opcode);
    let len = payload.len();
    if len < 126 {
        out.push(0x80 | len as u8);
    } else if len <= u16::MAX as usize {
        out.push(0x80 | 126);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(0x80 | 127);
        out.extend_from_slice(&(len as u64).to_be_bytes());
    }
    out.extend_from_slice(&mask);
    out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i & 3]));
}

/// A cheap mask source (xorshift); masks only need to vary, not be secret,
/// for a load generator on loopback.
#[derive(Debug, Clone)]
pub struct Masker(u32);

impl Masker {
    /// A masker seeded with `seed` (any value; zero is replaced).
    pub fn new(seed: u32) -> Self {
        Masker(seed | 1)
    }

    /// The next mask.
    pub fn next_mask(&mut self) -> [u8; 4] {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.0 = x;
        x.to_le_bytes()
    }
}

/// The upgrade request for `path` on `host`, with extra header lines
/// (each ending in `\r\n`).
pub fn handshake_request(host: &str, path: &str, extra_headers: &str) -> Vec<u8> {
    format!(
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n{extra_headers}\r\n"
    )
    .into_bytes()
}

/// Outcome of looking for the end of the upgrade response in `buf`.
#[derive(Debug, PartialEq, Eq)]
pub enum Handshake {
    /// The response is not complete yet.
    Incomplete,
    /// `101 Switching Protocols`; frames start at this offset.
    Accepted(usize),
    /// Any other response; its status line.
    Refused(String),
}

/// Looks for a complete upgrade response at the start of `buf`.
pub fn handshake_response(buf: &[u8]) -> Handshake {
    let Some(end) = find(buf, b"\r\n\r\n") else {
        return Handshake::Incomplete;
    };
    let status_line = buf[..end].split(|&b| b == b'\r').next().unwrap_or(&[]);
    if status_line.starts_with(b"HTTP/1.1 101") {
        Handshake::Accepted(end + 4)
    } else {
        Handshake::Refused(String::from_utf8_lossy(status_line).into_owned())
    }
}

/// Position of `needle` in `hay`.
pub fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_short_medium_and_partial_frames() {
        let mut buf = vec![0x81, 3, b'a', b'b', b'c', 0x81, 126, 0x01, 0x00];
        buf.extend(std::iter::repeat_n(b'z', 256));
        let (f, used) = parse(&buf).unwrap().unwrap();
        assert_eq!(
            (f.opcode, &buf[f.payload.clone()], used),
            (OP_TEXT, &b"abc"[..], 5)
        );
        let (f, used) = parse(&buf[5..]).unwrap().unwrap();
        assert_eq!((f.payload.len(), used), (256, 260));
        assert_eq!(parse(&buf[5..100]).unwrap(), None);
        assert_eq!(parse(&[0x81, 0x83]), Err(FrameError::Masked));
    }

    #[test]
    fn encodes_masked_frames() {
        let mut out = Vec::new();
        encode(&mut out, OP_TEXT, b"hi", [1, 2, 3, 4]);
        assert_eq!(out, vec![0x81, 0x82, 1, 2, 3, 4, b'h' ^ 1, b'i' ^ 2]);
    }

    #[test]
    fn reads_upgrade_responses() {
        let ok = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n\x81\x00";
        assert_eq!(handshake_response(ok), Handshake::Accepted(ok.len() - 2));
        assert_eq!(
            handshake_response(b"HTTP/1.1 101 Sw"),
            Handshake::Incomplete
        );
        assert_eq!(
            handshake_response(b"HTTP/1.1 404 Not Found\r\n\r\n"),
            Handshake::Refused("HTTP/1.1 404 Not Found".into())
        );
    }
}
