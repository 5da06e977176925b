//! One task per WebSocket: reads client frames into the engine's inbox and
//! writes what the engine's thread handed over.
//!
//! The engine writes a socket that keeps up itself (see
//! [`crate::driver::conn`]); this task writes only when the kernel did not
//! take everything, when the protocol layer replied to a Ping or a Close,
//! and to close. The engine is told `Closed` exactly once (the engine task
//! ignores the report for a socket it already closed itself).

use std::future::poll_fn;
use std::sync::Arc;
use std::time::Duration;

use bubble_core::edge::AcceptedHandshake;
use bubble_core::ConnId;
use futures_util::SinkExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_tungstenite::tungstenite::error::ProtocolError;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{Error as WsError, Message, Utf8Bytes};

use super::frame;
use super::gate::ReadGate;
use super::upgrade::Socket;
use crate::driver::conn::{ConnHandle, Outbound, Turn};
use crate::driver::{Command, InFrame};
use crate::http::Host;

/// How long a Close frame may take to write.
const CLOSE_WRITE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the peer of a killed socket (a slow consumer, mostly) gets to
/// read up to our Close frame: its queue was dropped, so what waits is the
/// rest of one frame and the Close, but behind what the kernel holds for a
/// peer that reads slowly.
const KILLED_CLOSE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long to drain a peer after our Close, so it reads the Close frame
/// rather than a reset.
const LINGER: Duration = Duration::from_secs(3);
/// Bytes drained after our Close at most.
const LINGER_BYTES: usize = 8 * 1024 * 1024;

/// Which protocol a socket speaks, with what its open input needs.
#[derive(Debug)]
pub(crate) enum Open {
    /// `/v1/ws` with the bearer, if any.
    Threads { token: Option<String> },
    /// `/socket` after the engine accepted its handshake.
    Channels { handshake: AcceptedHandshake },
}

/// How a socket ended.
#[derive(Debug)]
enum End {
    /// The peer sent a Close frame (with this code, if any).
    Peer(Option<u16>),
    /// We close with this code; `sent` once the Close frame is written.
    Ours { code: u16, sent: bool },
    /// The engine killed the socket with this code: its queue is dropped
    /// and the Close follows the frame being written.
    Killed(u16),
    /// The client broke the protocol: close with this code (1009 for a
    /// message over the size limit, 1007 for a text message that is not
    /// UTF-8, 1002 for a malformed frame).
    Refused(u16),
    /// The transport failed or ended without a close handshake.
    Failed(String),
}

/// Runs the socket until it closes; `handle` is the engine's end of the
/// socket's queue `out`.
pub(crate) async fn run(
    mut ws: Socket,
    host: Arc<Host>,
    open: Open,
    max_message: usize,
    handle: ConnHandle,
    out: Arc<Outbound>,
) {
    let conn = host.next_conn();
    let (kind, command) = match open {
        Open::Threads { token } => (
            "threads",
            Command::OpenThreads {
                conn,
                token,
                handle,
            },
        ),
        Open::Channels { handshake } => (
            "channels",
            Command::OpenChannels {
                conn,
                handshake,
                handle,
            },
        ),
    };
    if host.inbox.send(command).await.is_err() {
        finish(
            ws,
            End::Ours {
                code: 1001,
                sent: false,
            },
        )
        .await;
        return;
    }
    tracing::debug!(conn = conn.0, kind, "ws open");
    let end = pump(&mut ws, &out, conn, &host, max_message).await;
    out.gone();
    // Ignored by the engine task when it closed the socket itself.
    let _ = host.inbox.send(Command::Closed { conn }).await;
    match &end {
        End::Peer(code) => tracing::debug!(conn = conn.0, kind, code = ?code, "ws closed by peer"),
        End::Ours { code, .. } | End::Killed(code) => {
            tracing::debug!(conn = conn.0, kind, code, "ws closed");
        }
        End::Refused(code) => tracing::info!(conn = conn.0, kind, code, "ws closed: bad input"),
        End::Failed(why) => tracing::info!(
            conn = conn.0,
            kind,
            code = 1006,
            why,
            "ws closed abnormally"
        ),
    }
    finish(ws, end).await;
}

/// How a socket killed with `code` ends.
fn ours(code: u16) -> End {
    match code {
        1006 => End::Failed("closed by the server without a close frame".into()),
        code => End::Killed(code),
    }
}

async fn pump(
    ws: &mut Socket,
    out: &Outbound,
    conn: ConnId,
    host: &Host,
    max_message: usize,
) -> End {
    let gate = ReadGate::new();
    loop {
        tokio::select! {
            () = ready(out) => {}
            msg = poll_fn(|cx| gate.poll_next(ws, cx)) => {
                let command = match classify(msg, max_message) {
                    Read::Frame(frame) => Command::Frame { conn, frame },
                    Read::Pong => Command::Pong { conn },
                    Read::Nothing => continue,
                    Read::End(end) => return end,
                };
                if host.inbox.send(command).await.is_err() {
                    return End::Ours { code: 1001, sent: false };
                }
                continue;
            }
        }
        let (want_drained, close) = match out.turn() {
            None => continue,
            Some(Turn::Kill(code)) => return ours(code),
            Some(Turn::Write {
                want_drained,
                close,
            }) => (want_drained, close),
        };
        if let Some(code) = close {
            // Behind everything queued, so one flush writes both.
            let mut bytes = Vec::new();
            frame::encode_close(&mut bytes, code);
            out.append(&bytes);
        }
        if let Err(end) = flush(ws, out).await {
            return end;
        }
        if want_drained {
            let _ = host.inbox.send(Command::Drained { conn }).await;
        }
        if let Some(code) = close {
            return End::Ours { code, sent: true };
        }
    }
}

/// Resolves when the task has something to do, after letting the engine
/// finish its turn (and the runtime gather what else arrived), so that one
/// write carries everything queued by then: a socket that falls behind
/// catches up in fewer writes.
async fn ready(out: &Outbound) {
    poll_fn(|cx| out.poll_ready(cx)).await;
    tokio::task::yield_now().await;
}

/// Writes the queue until it is empty, unless the socket is killed first.
async fn flush(ws: &mut Socket, out: &Outbound) -> Result<(), End> {
    let io = ws.get_mut();
    tokio::select! {
        biased;
        code = poll_fn(|cx| out.poll_killed(cx)) => Err(ours(code)),
        flushed = io.flush() => flushed.map_err(|e| End::Failed(e.to_string())),
    }
}

/// What one read from the socket means.
enum Read {
    /// A data frame for the engine.
    Frame(InFrame),
    /// A Pong for the engine.
    Pong,
    /// Nothing for the engine (Pings are answered by the protocol layer).
    Nothing,
    /// The socket ends.
    End(End),
}

fn classify(msg: Option<Result<Message, WsError>>, max_message: usize) -> Read {
    match msg {
        Some(Ok(Message::Text(text))) if text.len() <= max_message => {
            Read::Frame(InFrame::Text(text))
        }
        Some(Ok(Message::Binary(bytes))) if bytes.len() <= max_message => {
            Read::Frame(InFrame::Binary(bytes))
        }
        Some(Ok(Message::Text(_) | Message::Binary(_)) | Err(WsError::Capacity(_))) => {
            Read::End(End::Refused(1009))
        }
        Some(Err(WsError::Utf8(_))) => Read::End(End::Refused(1007)),
        Some(Err(WsError::Protocol(e))) if broken_frame(&e) => Read::End(End::Refused(1002)),
        Some(Ok(Message::Pong(_))) => Read::Pong,
        Some(Ok(Message::Ping(_) | Message::Frame(_))) => Read::Nothing,
        Some(Ok(Message::Close(frame))) => Read::End(End::Peer(frame.map(|f| u16::from(f.code)))),
        Some(Err(e)) => Read::End(End::Failed(e.to_string())),
        None => Read::End(End::Failed("connection ended".into())),
    }
}

/// Whether `e` is a frame the client should not have sent (rather than the
/// connection failing).
fn broken_frame(e: &ProtocolError) -> bool {
    matches!(
        e,
        ProtocolError::NonZeroReservedBits
            | ProtocolError::UnmaskedFrameFromClient
            | ProtocolError::FragmentedControlFrame
            | ProtocolError::ControlFrameTooBig
            | ProtocolError::UnknownControlFrameType(_)
            | ProtocolError::UnknownDataFrameType(_)
            | ProtocolError::UnexpectedContinueFrame
            | ProtocolError::ExpectedFragment(_)
            | ProtocolError::InvalidOpcode(_)
            | ProtocolError::InvalidCloseSequence
    )
}

fn close_message(code: u16) -> Message {
    Message::Close(Some(CloseFrame {
        code: CloseCode::from(code),
        reason: Utf8Bytes::default(),
    }))
}

/// Completes the close: answers a peer's Close, or sends ours and lingers.
async fn finish(mut ws: Socket, end: End) {
    match end {
        End::Peer(_) => {
            // The protocol layer queues its Close reply and reports the
            // connection closed without flushing the transport, which
            // then writes it.
            let _ = tokio::time::timeout(CLOSE_WRITE_TIMEOUT, async {
                let _ = ws.flush().await;
                let _ = ws.get_mut().flush().await;
            })
            .await;
        }
        End::Ours { sent: true, .. } => linger(ws).await,
        End::Ours { code, sent: false } | End::Refused(code) => {
            close_then_linger(ws, code, CLOSE_WRITE_TIMEOUT).await;
        }
        End::Killed(code) => {
            ws.get_mut().cut_after_current_frame();
            close_then_linger(ws, code, KILLED_CLOSE_TIMEOUT).await;
        }
        End::Failed(_) => {}
    }
}

/// Sends a Close with `code`, waiting at most `wait` for the peer to take
/// it, then lingers.
async fn close_then_linger(mut ws: Socket, code: u16, wait: Duration) {
    let _ = tokio::time::timeout(wait, ws.send(close_message(code))).await;
    linger(ws).await;
}

/// Half-closes and reads until the peer closes, so that unread input does
/// not turn our close into a reset that could discard the Close frame.
async fn linger(mut ws: Socket) {
    let io = ws.get_mut();
    let _ = tokio::time::timeout(LINGER, async {
        let _ = io.shutdown().await;
        let mut buf = vec![0u8; 16 * 1024];
        let mut total = 0;
        while let Ok(n @ 1..) = io.read(&mut buf).await {
            total += n;
            if total > LINGER_BYTES {
                break;
            }
        }
    })
    .await;
}
