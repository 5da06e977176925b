//! A TCP forwarder a test can cut or freeze: stands between a server and a
//! service (PostgreSQL, Redis), or a client and a server, to make the far
//! end vanish, or hang, and come back (possibly at a new address).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What the forwarder does with traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    /// Bytes pass.
    Open,
    /// Connections stay open but no byte passes (a wedged peer).
    Frozen,
}

/// A running forwarder to one target at a time.
pub struct Proxy {
    addr: SocketAddr,
    flow: watch::Sender<Flow>,
    refusing: Arc<Mutex<bool>>,
    target: Arc<Mutex<SocketAddr>>,
    links: Arc<Mutex<Vec<JoinHandle<()>>>>,
    accept: JoinHandle<()>,
}

async fn pump(mut from: OwnedReadHalf, mut to: OwnedWriteHalf, mut flow: watch::Receiver<Flow>) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        if flow.wait_for(|f| *f == Flow::Open).await.is_err() {
            return;
        }
        tokio::select! {
            read = from.read(&mut buf) => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    // A freeze that begins now holds these bytes back too.
                    if flow.wait_for(|f| *f == Flow::Open).await.is_err()
                        || to.write_all(&buf[..n]).await.is_err()
                    {
                        return;
                    }
                }
            },
            _ = flow.changed() => {}
        }
    }
}

impl Proxy {
    /// Forwards connections on a fresh port of 127.0.0.1 to `target`.
    pub async fn start(target: SocketAddr) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind proxy");
        let addr = listener.local_addr().expect("proxy address");
        let (flow, watch_flow) = watch::channel(Flow::Open);
        let refusing = Arc::new(Mutex::new(false));
        let target = Arc::new(Mutex::new(target));
        let links: Arc<Mutex<Vec<JoinHandle<()>>>> = Arc::default();
        let (tracked, refused, current) = (links.clone(), refusing.clone(), target.clone());
        let accept = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                if *refused.lock().unwrap_or_else(PoisonError::into_inner) {
                    drop(client);
                    continue;
                }
                let flow = watch_flow.clone();
                let target = *current.lock().unwrap_or_else(PoisonError::into_inner);
                let link = tokio::spawn(async move {
                    let Ok(server) = TcpStream::connect(target).await else {
                        return;
                    };
                    let (client_read, client_write) = client.into_split();
                    let (server_read, server_write) = server.into_split();
                    tokio::join!(
                        pump(client_read, server_write, flow.clone()),
                        pump(server_read, client_write, flow)
                    );
                });
                tracked
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(link);
            }
        });
        Proxy {
            addr,
            flow,
            refusing,
            target,
            links,
            accept,
        }
    }

    /// The address clients connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Drops every connection and refuses new ones (they are accepted and
    /// closed at once) until [`Proxy::restore`].
    pub fn cut(&self) {
        *self.refusing.lock().unwrap_or_else(PoisonError::into_inner) = true;
        for link in self
            .links
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .drain(..)
        {
            link.abort();
        }
    }

    /// Forwards new connections to `target` from now on (a server restarted
    /// on another port); open connections keep their old target.
    pub fn retarget(&self, target: SocketAddr) {
        *self.target.lock().unwrap_or_else(PoisonError::into_inner) = target;
    }

    /// Keeps every connection open but lets no byte through, until
    /// [`Proxy::restore`].
    pub fn freeze(&self) {
        let _ = self.flow.send(Flow::Frozen);
    }

    /// Forwards again: new connections are accepted and bytes flow.
    pub fn restore(&self) {
        *self.refusing.lock().unwrap_or_else(PoisonError::into_inner) = false;
        let _ = self.flow.send(Flow::Open);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.accept.abort();
        self.cut();
    }
}
