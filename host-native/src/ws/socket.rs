//! One task per WebSocket: reads client frames into the engine's inbox and
//! writes the engine's frames from the socket's bounded queue.
//!
//! Writes are coalesced: every frame already queued is fed to the socket
//! before one flush. The engine is told `Closed` exactly once (the engine
//! task ignores the report for a socket it already closed itself).

use std::sync::Arc;
use std::time::Duration;

use bubble_core::{ChannelProtocol, ConnId, SharedFrame};
use bytes::Bytes;
use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{Error as WsError, Message, Utf8Bytes};

use super::upgrade::Socket;
use crate::driver::conn::{ConnHandle, Kill, OutMsg};
use crate::driver::{Command, InFrame};
use crate::http::Host;

/// Frames written per flush at most.
const WRITE_BATCH: usize = 256;
/// How long a Close frame may take to write.
const CLOSE_WRITE_TIMEOUT: Duration = Duration::from_secs(2);
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
    /// `/socket` after an accepted handshake.
    Channels {
        app_key: String,
        protocol: ChannelProtocol,
    },
}

/// How a socket ended.
#[derive(Debug)]
enum End {
    /// The peer sent a Close frame (with this code, if any).
    Peer(Option<u16>),
    /// We close with this code; `sent` once the Close frame is written.
    Ours { code: u16, sent: bool },
    /// A client message over the size limit: close 1009.
    TooBig,
    /// The transport failed or ended without a close handshake.
    Failed(String),
}

/// Runs the socket until it closes.
pub(crate) async fn run(mut ws: Socket, host: Arc<Host>, open: Open, max_message: usize) {
    let conn = host.next_conn();
    let (handle, mut rx, kill) = ConnHandle::new(host.limits.outbound_queue_frames);
    let (kind, command) = match open {
        Open::Threads { token } => (
            "threads",
            Command::OpenThreads {
                conn,
                token,
                handle,
            },
        ),
        Open::Channels { app_key, protocol } => (
            "channels",
            Command::OpenChannels {
                conn,
                app_key,
                protocol,
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
    tracing::info!(conn = conn.0, kind, "ws open");
    let end = pump(&mut ws, &mut rx, &kill, conn, &host, max_message).await;
    // Ignored by the engine task when it closed the socket itself.
    let _ = host.inbox.send(Command::Closed { conn }).await;
    match &end {
        End::Peer(code) => tracing::info!(conn = conn.0, kind, code = ?code, "ws closed by peer"),
        End::Ours { code, .. } => tracing::info!(conn = conn.0, kind, code, "ws closed"),
        End::TooBig => tracing::info!(
            conn = conn.0,
            kind,
            code = 1009,
            "ws closed: message too big"
        ),
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

fn ours(kill: &Kill) -> End {
    match kill.code() {
        1006 => End::Failed("closed by the server without a close frame".into()),
        code => End::Ours { code, sent: false },
    }
}

async fn pump(
    ws: &mut Socket,
    rx: &mut mpsc::Receiver<OutMsg>,
    kill: &Kill,
    conn: ConnId,
    host: &Host,
    max_message: usize,
) -> End {
    let mut batch = Vec::with_capacity(WRITE_BATCH);
    // Built once: a fresh wait per turn would re-register with the token.
    let mut killed = std::pin::pin!(kill.fired());
    loop {
        tokio::select! {
            () = &mut killed => return ours(kill),
            n = rx.recv_many(&mut batch, WRITE_BATCH) => {
                if n == 0 {
                    // The engine task let go of the socket: after a kill
                    // (whose code wins) or when it stopped.
                    return match kill.code() {
                        0 => End::Ours { code: 1001, sent: false },
                        _ => ours(kill),
                    };
                }
                let written = tokio::select! {
                    biased;
                    () = &mut killed => return ours(kill),
                    written = write_batch(ws, &mut batch, conn, host) => written,
                };
                match written {
                    Ok(None) => {}
                    Ok(Some(code)) => return End::Ours { code, sent: true },
                    Err(e) => return End::Failed(e.to_string()),
                }
            }
            msg = ws.next() => {
                let command = match classify(msg, max_message) {
                    Read::Frame(frame) => Command::Frame { conn, frame },
                    Read::Pong => Command::Pong { conn },
                    Read::Nothing => continue,
                    Read::End(end) => return end,
                };
                if host.inbox.send(command).await.is_err() {
                    return End::Ours { code: 1001, sent: false };
                }
            }
        }
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
            Read::End(End::TooBig)
        }
        Some(Ok(Message::Pong(_))) => Read::Pong,
        Some(Ok(Message::Ping(_) | Message::Frame(_))) => Read::Nothing,
        Some(Ok(Message::Close(frame))) => Read::End(End::Peer(frame.map(|f| u16::from(f.code)))),
        Some(Err(e)) => Read::End(End::Failed(e.to_string())),
        None => Read::End(End::Failed("connection ended".into())),
    }
}

/// Lets a shared frame back a message without copying it.
struct FrameBytes(SharedFrame);

impl AsRef<[u8]> for FrameBytes {
    fn as_ref(&self) -> &[u8] {
        self.0.as_bytes()
    }
}

fn text(frame: SharedFrame) -> Message {
    let bytes = Bytes::from_owner(FrameBytes(frame.clone()));
    // A `str` is always valid UTF-8, so the check cannot fail.
    Message::Text(Utf8Bytes::try_from(bytes).unwrap_or_else(|_| Utf8Bytes::from(&*frame)))
}

fn close_message(code: u16) -> Message {
    Message::Close(Some(CloseFrame {
        code: CloseCode::from(code),
        reason: Utf8Bytes::default(),
    }))
}

/// Writes `batch` with one flush; `Some(code)` once a Close frame went out.
async fn write_batch(
    ws: &mut Socket,
    batch: &mut Vec<OutMsg>,
    conn: ConnId,
    host: &Host,
) -> Result<Option<u16>, WsError> {
    for msg in batch.drain(..) {
        match msg {
            OutMsg::Frame(frame) => ws.feed(text(frame)).await?,
            OutMsg::Ping => ws.feed(Message::Ping(Bytes::new())).await?,
            OutMsg::Close(code) => {
                ws.send(close_message(code)).await?;
                return Ok(Some(code));
            }
            OutMsg::WantDrained => {
                ws.flush().await?;
                let _ = host.inbox.send(Command::Drained { conn }).await;
            }
        }
    }
    ws.flush().await?;
    Ok(None)
}

/// Completes the close: answers a peer's Close, or sends ours and lingers.
async fn finish(mut ws: Socket, end: End) {
    match end {
        End::Peer(_) => {
            // Writes the protocol layer's Close reply.
            let _ = tokio::time::timeout(CLOSE_WRITE_TIMEOUT, ws.flush()).await;
        }
        End::Ours { code, sent } => {
            if !sent {
                let _ =
                    tokio::time::timeout(CLOSE_WRITE_TIMEOUT, ws.send(close_message(code))).await;
            }
            linger(ws).await;
        }
        End::TooBig => {
            let _ = tokio::time::timeout(CLOSE_WRITE_TIMEOUT, ws.send(close_message(1009))).await;
            linger(ws).await;
        }
        End::Failed(_) => {}
    }
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
