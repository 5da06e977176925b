//! The transport under a socket's protocol layer: reads come from the
//! connection, writes gather in one outbound buffer that only
//! [`poll_flush`](AsyncWrite::poll_flush) sends.
//!
//! The protocol layer's own writes (Pong and Close replies) and the frames
//! the engine queued share that buffer, so a partly written frame is always
//! completed before anything else goes out.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::frame::KEEP_BUFFER;

/// An upgraded connection with a write-behind buffer.
pub(crate) struct WsIo {
    inner: TokioIo<Upgraded>,
    out: Vec<u8>,
    /// Bytes of `out` already sent.
    sent: usize,
}

impl WsIo {
    /// Wraps an upgraded connection.
    pub(crate) fn new(inner: TokioIo<Upgraded>) -> WsIo {
        WsIo {
            inner,
            out: Vec::new(),
            sent: 0,
        }
    }

    /// True when bytes wait to be sent.
    pub(crate) fn has_pending(&self) -> bool {
        self.sent < self.out.len()
    }

    /// The outbound buffer, to append encoded frames to (or, when nothing
    /// is pending, to swap a filled buffer in).
    pub(crate) fn out(&mut self) -> &mut Vec<u8> {
        if !self.has_pending() {
            self.out.clear();
            self.sent = 0;
        }
        &mut self.out
    }
}

impl AsyncRead for WsIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for WsIo {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.get_mut().out().extend_from_slice(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        while this.sent < this.out.len() {
            let n = ready!(Pin::new(&mut this.inner).poll_write(cx, &this.out[this.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            this.sent += n;
        }
        this.out.clear();
        this.sent = 0;
        if this.out.capacity() > KEEP_BUFFER {
            this.out = Vec::new();
        }
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.as_mut().poll_flush(cx))?;
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
