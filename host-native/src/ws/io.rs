//! The transport under a socket's protocol layer: reads come from the
//! connection; writes join the socket's outbound queue, which only
//! [`poll_flush`](AsyncWrite::poll_flush) sends from the socket's task.
//!
//! The protocol layer's own writes (Pong and Close replies) and the frames
//! the engine queued share that queue, so a frame the engine's thread sent
//! only in part is always completed before anything else goes out.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{ready, Context, Poll};

use hyper::upgrade::Upgraded;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::frame;
use crate::driver::conn::Outbound;

/// An upgraded connection writing through its outbound queue.
pub(crate) struct WsIo {
    inner: TokioIo<Upgraded>,
    queue: Arc<Outbound>,
    /// Bytes taken from the queue and being written.
    taken: Vec<u8>,
    /// Bytes of `taken` already sent.
    sent: usize,
    /// Where `taken`'s first whole frame starts (the bytes before it finish
    /// a frame the engine's thread sent part of).
    first: usize,
}

impl WsIo {
    /// Wraps an upgraded connection whose writes go through `queue`.
    pub(crate) fn new(inner: TokioIo<Upgraded>, queue: Arc<Outbound>) -> WsIo {
        WsIo {
            inner,
            queue,
            taken: Vec::new(),
            sent: 0,
            first: 0,
        }
    }

    /// Drops what was taken beyond the frame being written, once the socket
    /// is killed: its queue is dropped, and the Close written next must
    /// follow a whole frame.
    pub(crate) fn cut_after_current_frame(&mut self) {
        let end = frame::frame_end(&self.taken, self.first, self.sent);
        self.taken.truncate(end);
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
        self.queue.append(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            while this.sent < this.taken.len() {
                let n = ready!(Pin::new(&mut this.inner).poll_write(cx, &this.taken[this.sent..]))?;
                if n == 0 {
                    return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
                }
                this.sent += n;
            }
            this.sent = 0;
            match this.queue.take(&mut this.taken) {
                Some(first) => this.first = first,
                None => {
                    this.first = 0;
                    break;
                }
            }
        }
        Pin::new(&mut this.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        ready!(self.as_mut().poll_flush(cx))?;
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
