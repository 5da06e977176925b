//! What lets the engine's thread write a socket itself: the connection's
//! file descriptor, captured when the connection is accepted, and one
//! non-blocking `send`.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use axum::extract::Request;
use axum::serve::Listener;
use rustix::io::Errno;
use rustix::net::SendFlags;
use tokio::net::{TcpListener, TcpStream};

/// The listener the server accepts on. Every connection gets `TCP_NODELAY`
/// (frames are small and latency-bound; coalescing happens above TCP) and
/// a descriptor of our own, a duplicate closed when its last holder drops
/// it, so that writing through it never depends on how long hyper keeps
/// its own.
#[derive(Debug)]
pub(crate) struct Accepting(pub(crate) TcpListener);

/// What the server knows of an accepted connection (its connection info).
#[derive(Debug, Clone)]
pub(crate) struct Peer {
    fd: Option<Arc<OwnedFd>>,
}

impl Listener for Accepting {
    type Io = TcpStream;
    type Addr = Peer;

    async fn accept(&mut self) -> (TcpStream, Peer) {
        let (tcp, _) = Listener::accept(&mut self.0).await;
        let _ = tcp.set_nodelay(true);
        let fd = tcp.as_fd().try_clone_to_owned().ok().map(Arc::new);
        (tcp, Peer { fd })
    }

    fn local_addr(&self) -> io::Result<Peer> {
        self.0.local_addr()?;
        Ok(Peer { fd: None })
    }
}

/// The descriptor of the connection `req` arrived on, for the engine's
/// writes; `None` when it could not be duplicated (out of descriptors).
pub(crate) fn own_fd(req: &Request) -> Option<Arc<OwnedFd>> {
    req.extensions().get::<Peer>()?.fd.clone()
}

/// How much of a non-blocking send the kernel took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sent {
    /// Everything.
    All,
    /// This many bytes (possibly none): the socket's buffer is full.
    Part(usize),
    /// The connection failed; the socket's task meets the error on its own
    /// write and ends the socket.
    Failed,
}

/// Sends `bytes` on `fd` without blocking and without `SIGPIPE`.
pub(crate) fn send_now(fd: &impl AsFd, bytes: &[u8]) -> Sent {
    let mut sent = 0;
    while sent < bytes.len() {
        match rustix::net::send(
            fd,
            &bytes[sent..],
            SendFlags::DONTWAIT | SendFlags::NOSIGNAL,
        ) {
            Ok(0) => return Sent::Failed,
            Ok(n) => sent += n,
            Err(Errno::INTR) => {}
            Err(Errno::AGAIN) => return Sent::Part(sent),
            Err(_) => return Sent::Failed,
        }
    }
    Sent::All
}
