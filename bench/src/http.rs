//! Minimal HTTP/1.1 client pieces: parsing responses out of a pipelined
//! byte stream, and a blocking request for setup work.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::ws::find;

/// A complete response at the start of a buffer.
#[derive(Debug, PartialEq, Eq)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// Where the body lies (after de-chunking is not done: for chunked
    /// bodies this covers the raw chunks).
    pub body: std::ops::Range<usize>,
    /// Bytes the response occupies.
    pub len: usize,
}

/// Why a response could not be parsed.
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// The bytes are not an HTTP/1.1 response.
    #[error("malformed HTTP response: {0}")]
    Malformed(&'static str),
    /// Transport failure.
    #[error("HTTP transport: {0}")]
    Io(#[from] std::io::Error),
}

/// Parses the response at the start of `buf`; `Ok(None)` when incomplete.
pub fn parse_response(buf: &[u8]) -> Result<Option<Response>, HttpError> {
    let Some(head_end) = find(buf, b"\r\n\r\n") else {
        return Ok(None);
    };
    let head = &buf[..head_end];
    if !head.starts_with(b"HTTP/1.") || head.len() < 12 {
        return Err(HttpError::Malformed("status line"));
    }
    let status = std::str::from_utf8(&head[9..12])
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or(HttpError::Malformed("status code"))?;
    let body_start = head_end + 4;
    let mut content_length = None;
    let mut chunked = false;
    for line in head.split(|&b| b == b'\n').skip(1) {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let name = &line[..colon];
        let value = std::str::from_utf8(&line[colon + 1..]).unwrap_or("").trim();
        if name.eq_ignore_ascii_case(b"content-length") {
            content_length = Some(
                value
                    .parse::<usize>()
                    .map_err(|_| HttpError::Malformed("content-length"))?,
            );
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            chunked = value.eq_ignore_ascii_case("chunked");
        }
    }
    if chunked {
        let mut at = body_start;
        loop {
            let Some(eol) = find(&buf[at..], b"\r\n") else {
                return Ok(None);
            };
            let size_text = std::str::from_utf8(&buf[at..at + eol]).unwrap_or("");
            let size_text = size_text.split(';').next().unwrap_or("").trim();
            let size = usize::from_str_radix(size_text, 16)
                .map_err(|_| HttpError::Malformed("chunk size"))?;
            at += eol + 2;
            if size == 0 {
                if buf.len() < at + 2 {
                    return Ok(None);
                }
                return Ok(Some(Response {
                    status,
                    body: body_start..at,
                    len: at + 2,
                }));
            }
            if buf.len() < at + size + 2 {
                return Ok(None);
            }
            at += size + 2;
        }
    }
    let len = content_length.unwrap_or(0);
    if buf.len() < body_start + len {
        return Ok(None);
    }
    Ok(Some(Response {
        status,
        body: body_start..body_start + len,
        len: body_start + len,
    }))
}

/// Sends one request on a fresh connection and returns `(status, body)`.
pub fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &str,
    body: &[u8],
) -> Result<(u16, Vec<u8>), HttpError> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n{headers}\r\n",
        body.len()
    )
    .into_bytes();
    req.extend_from_slice(body);
    s.write_all(&req)?;
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16384];
    loop {
        if let Some(r) = parse_response(&buf)? {
            return Ok((r.status, buf[r.body].to_vec()));
        }
        let n = s.read(&mut chunk)?;
        if n == 0 {
            return Err(HttpError::Malformed(
                "connection closed before the response ended",
            ));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_pipelined_responses() {
        let a = b"HTTP/1.1 202 Accepted\r\nContent-Length: 2\r\n\r\n{}HTTP/1.1 201 Created\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\nHTTP/1.1 200";
        let r1 = parse_response(a).unwrap().unwrap();
        assert_eq!((r1.status, &a[r1.body.clone()]), (202, &b"{}"[..]));
        let r2 = parse_response(&a[r1.len..]).unwrap().unwrap();
        assert_eq!(r2.status, 201);
        assert!(parse_response(&a[r1.len + r2.len..]).unwrap().is_none());
    }
}
