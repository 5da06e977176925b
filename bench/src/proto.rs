//! Wire shapes of the protocols under test: upgrade requests, subscribe
//! frames and publish/append requests, each with a stamp placeholder.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::pool::{ConnSpec, Ready};
use crate::publisher::Target;
use crate::servers::{APP_ID, APP_KEY, APP_SECRET, TOKEN};
use crate::stamp;

fn payload_text(len: usize) -> String {
    String::from_utf8(stamp::payload(len)).expect("stamp payloads are ASCII")
}

/// A pubb subscriber of `channel` on Bubble's `/socket`.
pub fn pubb_subscriber(addr: SocketAddr, channel: &str, sample: bool) -> ConnSpec {
    let path = format!("/socket?appKey={APP_KEY}&protocol=2");
    ConnSpec {
        addr,
        local_ip: None,
        handshake: Arc::new(crate::ws::handshake_request(&addr.to_string(), &path, "")),
        on_open: vec![format!(r#"{{"action":"subscribe","channel":"{channel}"}}"#).into_bytes()],
        ready: Ready {
            trigger: Some(b"pubb:connection_established"),
            ack: b"pubb:subscription_succeeded",
            acks: 1,
        },
        sample,
    }
}

/// A Pusher protocol 7 subscriber of `channel` on Bubble's `/app/:key`.
pub fn pusher_subscriber(addr: SocketAddr, channel: &str, sample: bool) -> ConnSpec {
    let path = format!("/app/{APP_KEY}?protocol=7&client=bubble-bench&version=1.0");
    ConnSpec {
        addr,
        local_ip: None,
        handshake: Arc::new(crate::ws::handshake_request(&addr.to_string(), &path, "")),
        on_open: vec![format!(
            r#"{{"event":"pusher:subscribe","data":{{"channel":"{channel}"}}}}"#
        )
        .into_bytes()],
        ready: Ready {
            trigger: Some(b"pusher:connection_established"),
            ack: b"pusher_internal:subscription_succeeded",
            acks: 1,
        },
        sample,
    }
}

/// An nchan websocket subscriber of `channel`.
pub fn nchan_subscriber(addr: SocketAddr, channel: &str, sample: bool) -> ConnSpec {
    ConnSpec {
        addr,
        local_ip: None,
        handshake: Arc::new(crate::ws::handshake_request(
            &addr.to_string(),
            &format!("/sub/{channel}"),
            "",
        )),
        on_open: Vec::new(),
        ready: Ready {
            trigger: None,
            ack: b"",
            acks: 0,
        },
        sample,
    }
}

/// A threads subscriber of `threads` on `/v1/ws`, from `from_seq`.
pub fn thread_subscriber(
    addr: SocketAddr,
    threads: &[String],
    from_seq: u64,
    sample: bool,
) -> ConnSpec {
    ConnSpec {
        addr,
        local_ip: None,
        handshake: Arc::new(thread_ws_handshake(addr)),
        on_open: threads
            .iter()
            .map(|t| {
                format!(r#"{{"type":"thread.subscribe","threadId":"{t}","fromSeq":{from_seq}}}"#)
                    .into_bytes()
            })
            .collect(),
        ready: Ready {
            trigger: None,
            ack: b"thread.subscription_opened",
            acks: threads.len(),
        },
        sample,
    }
}

/// The upgrade request of `/v1/ws` with the bench bearer token.
pub fn thread_ws_handshake(addr: SocketAddr) -> Vec<u8> {
    crate::ws::handshake_request(
        &addr.to_string(),
        "/v1/ws",
        &format!("Authorization: Bearer {TOKEN}\r\n"),
    )
}

/// A pubb publish of a `payload`-byte string to `channel`.
pub fn pubb_publish(addr: SocketAddr, channel: &str, payload: usize) -> Target {
    // The data is a JSON string: two quotes plus the text make `payload` bytes.
    let body = format!(
        r#"{{"channel":"{channel}","name":"bench","data":"{}"}}"#,
        payload_text(payload.saturating_sub(2))
    );
    Target::new(
        format!(
            "POST /api/apps/{APP_ID}/events HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {APP_SECRET}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

/// An nchan HTTP publish of a `payload`-byte body to `channel`.
pub fn nchan_publish(addr: SocketAddr, channel: &str, payload: usize) -> Target {
    let body = payload_text(payload);
    Target::new(
        format!(
            "POST /pub/{channel} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

/// The body of a `run_started` event whose `runId` carries a stamp padded
/// to `payload` bytes.
pub fn run_started(payload: usize) -> String {
    format!(
        r#"{{"type":"run_started","runId":"{}"}}"#,
        payload_text(payload)
    )
}

/// An HTTP append of a stamped `run_started` to `thread`.
pub fn http_append(addr: SocketAddr, thread: &str, payload: usize) -> Target {
    let body = run_started(payload);
    Target::new(
        format!(
            "POST /v1/threads/{thread}/events HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes(),
    )
}

/// A WebSocket `thread.append` of a stamped `run_started` to `thread`.
pub fn ws_append(thread: &str, payload: usize) -> Target {
    Target::new(
        format!(
            r#"{{"type":"thread.append","threadId":"{thread}","event":{}}}"#,
            run_started(payload)
        )
        .into_bytes(),
    )
}

/// Why a setup request failed.
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// Transport or parse failure.
    #[error(transparent)]
    Http(#[from] crate::http::HttpError),
    /// The server answered with an error.
    #[error("{what}: HTTP {status}: {body}")]
    Status {
        /// What was asked.
        what: String,
        /// Status code.
        status: u16,
        /// Response body.
        body: String,
    },
}

/// Creates thread `id` (idempotent).
pub fn create_thread(addr: SocketAddr, id: &str) -> Result<(), SetupError> {
    let body = format!(r#"{{"threadId":"{id}"}}"#);
    let headers = format!("Authorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\n");
    let (status, resp) =
        crate::http::request(addr, "POST", "/v1/threads", &headers, body.as_bytes())?;
    if !(200..300).contains(&status) {
        return Err(SetupError::Status {
            what: format!("create thread {id}"),
            status,
            body: String::from_utf8_lossy(&resp).into_owned(),
        });
    }
    Ok(())
}

/// The value of counter or gauge `name` on the server's `/metrics`, if it
/// has one.
pub fn metric(addr: SocketAddr, name: &str) -> Option<u64> {
    let (status, body) = crate::http::request(addr, "GET", "/metrics", "", b"").ok()?;
    if status != 200 {
        return None;
    }
    let text = String::from_utf8_lossy(&body);
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| {
            l.strip_prefix(name)?
                .strip_prefix(' ')?
                .trim()
                .parse::<f64>()
                .ok()
        })
        .map(|v| v as u64)
}
