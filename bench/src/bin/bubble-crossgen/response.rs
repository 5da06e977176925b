//! A minimal HTTP/1.1 response framer for the publish connections: finds
//! where each response ends (Content-Length or chunked) and its status, and
//! nothing more. Responses delimited by closing the connection are refused,
//! since the connections are kept alive.

/// One complete response at the front of a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Framed {
    /// Status code.
    pub status: u16,
    /// Bytes of the buffer it occupies, head and body.
    pub len: usize,
}

/// Why a response could not be framed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadResponse(pub String);

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn bad(what: impl Into<String>) -> BadResponse {
    BadResponse(what.into())
}

/// Frames the response at the start of `buf`: `Ok(None)` if more bytes are
/// needed.
pub fn frame(buf: &[u8]) -> Result<Option<Framed>, BadResponse> {
    let Some(head_end) = find(buf, b"\r\n\r\n") else {
        if buf.len() > 64 * 1024 {
            return Err(bad("response head over 64 KiB"));
        }
        return Ok(None);
    };
    let head = std::str::from_utf8(&buf[..head_end]).map_err(|_| bad("non-UTF-8 head"))?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut parts = status_line.split(' ');
    let version = parts.next().unwrap_or_default();
    if !version.starts_with("HTTP/1.") {
        return Err(bad(format!("bad status line {status_line:?}")));
    }
    let status: u16 = parts
        .next()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad(format!("bad status line {status_line:?}")))?;
    let mut content_length = None;
    let mut chunked = false;
    for line in lines {
        let Some((name, value)) = line.split_once(':') else {
            return Err(bad(format!("bad header line {line:?}")));
        };
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            content_length = Some(
                value
                    .parse::<usize>()
                    .map_err(|_| bad(format!("bad content-length {value:?}")))?,
            );
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            chunked = value
                .rsplit(',')
                .next()
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("chunked"));
        }
    }
    let body_start = head_end + 4;
    let body = &buf[body_start..];
    let body_len = if chunked {
        match chunked_len(body)? {
            Some(n) => n,
            None => return Ok(None),
        }
    } else if let Some(n) = content_length {
        if body.len() < n {
            return Ok(None);
        }
        n
    } else if (100..200).contains(&status) || status == 204 || status == 304 {
        0
    } else {
        return Err(bad(format!(
            "HTTP {status} without length on a kept-alive connection"
        )));
    };
    Ok(Some(Framed {
        status,
        len: body_start + body_len,
    }))
}

/// Length of a complete chunked body at the start of `body`, trailers
/// included; `Ok(None)` if incomplete.
fn chunked_len(body: &[u8]) -> Result<Option<usize>, BadResponse> {
    let mut at = 0;
    loop {
        let Some(eol) = find(&body[at..], b"\r\n") else {
            return Ok(None);
        };
        let line = std::str::from_utf8(&body[at..at + eol]).map_err(|_| bad("bad chunk size"))?;
        let hex = line.split(';').next().unwrap_or_default().trim();
        let size =
            usize::from_str_radix(hex, 16).map_err(|_| bad(format!("bad chunk size {line:?}")))?;
        at += eol + 2;
        if size == 0 {
            // Trailers, each ending in CRLF, then an empty line.
            loop {
                let Some(eol) = find(&body[at..], b"\r\n") else {
                    return Ok(None);
                };
                at += eol + 2;
                if eol == 0 {
                    return Ok(Some(at));
                }
            }
        }
        let end = at
            .checked_add(size)
            .and_then(|e| e.checked_add(2))
            .ok_or_else(|| bad("chunk size overflow"))?;
        if body.len() < end {
            return Ok(None);
        }
        if &body[end - 2..end] != b"\r\n" {
            return Err(bad("chunk not followed by CRLF"));
        }
        at = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_length() {
        let r = b"HTTP/1.1 202 Accepted\r\nServer: nginx\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1";
        assert_eq!(
            frame(r),
            Ok(Some(Framed {
                status: 202,
                len: r.len() - 8
            }))
        );
        assert_eq!(frame(&r[..r.len() - 10]), Ok(None));
        assert_eq!(frame(b"HTTP/1.1 200 OK\r\nContent-Le"), Ok(None));
    }

    #[test]
    fn chunked() {
        let r = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3;x=1\r\nabc\r\n0\r\n\r\n";
        assert_eq!(
            frame(r),
            Ok(Some(Framed {
                status: 200,
                len: r.len()
            }))
        );
        for cut in 1..r.len() - 45 {
            assert_eq!(frame(&r[..r.len() - cut]), Ok(None), "cut {cut}");
        }
        let trailer = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-T: 1\r\n\r\n";
        assert_eq!(
            frame(trailer).map(|f| f.map(|f| f.len)),
            Ok(Some(trailer.len()))
        );
    }

    #[test]
    fn no_body_statuses_and_errors() {
        assert_eq!(
            frame(b"HTTP/1.1 204 No Content\r\n\r\n"),
            Ok(Some(Framed {
                status: 204,
                len: 27
            }))
        );
        assert!(frame(b"HTTP/1.1 200 OK\r\n\r\n").is_err());
        assert!(frame(b"SSH-2.0\r\n\r\n").is_err());
        assert!(frame(b"HTTP/1.1 abc OK\r\n\r\n").is_err());
        assert!(frame(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n").is_err());
        assert!(frame(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n").is_err());
    }
}
