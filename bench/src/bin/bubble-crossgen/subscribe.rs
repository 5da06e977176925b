//! Subscribers: one tokio task per tokio-tungstenite client connection,
//! which opens, subscribes, reports ready and then counts every frame into
//! the shared [`Tally`].

use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio::sync::Semaphore;
use tokio::time::timeout;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

use crate::cli::Proto;
use crate::tally::Tally;

/// App key of the pubb app in the bench config.
pub const APP_KEY: &str = "bench-key";

/// How long one subscriber may take to connect and subscribe.
const SETUP_TIMEOUT: Duration = Duration::from_secs(20);

type Ws = WebSocketStream<TcpStream>;

/// One subscriber to start.
#[derive(Debug, Clone)]
pub struct Sub {
    /// Server address.
    pub addr: SocketAddr,
    /// Protocol.
    pub proto: Proto,
    /// Channel to subscribe to.
    pub channel: String,
}

/// The bytes of a data frame; control frames have none.
fn data(msg: &Message) -> Option<&[u8]> {
    match msg {
        Message::Text(t) => Some(t.as_str().as_bytes()),
        Message::Binary(b) => Some(b),
        _ => None,
    }
}

/// Reads frames until one contains `needle`.
async fn wait_for(ws: &mut Ws, needle: &str) -> Result<(), String> {
    while let Some(msg) = ws.next().await {
        let msg = msg.map_err(|e| format!("waiting for {needle}: {e}"))?;
        if let Some(d) = data(&msg) {
            if d.windows(needle.len()).any(|w| w == needle.as_bytes()) {
                return Ok(());
            }
        }
    }
    Err(format!("closed while waiting for {needle}"))
}

/// Connects, upgrades and subscribes.
async fn open(sub: &Sub) -> Result<Ws, String> {
    let tcp = TcpStream::connect(sub.addr)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    tcp.set_nodelay(true).map_err(|e| format!("nodelay: {e}"))?;
    let url = match sub.proto {
        Proto::Nchan => format!("ws://{}/sub/{}", sub.addr, sub.channel),
        Proto::Pubb => format!("ws://{}/socket?appKey={APP_KEY}&protocol=2", sub.addr),
    };
    // Small buffers: the generator holds thousands of sockets that each see
    // little traffic.
    let config = WebSocketConfig::default()
        .read_buffer_size(16 * 1024)
        .write_buffer_size(0);
    let (mut ws, _) = tokio_tungstenite::client_async_with_config(url, tcp, Some(config))
        .await
        .map_err(|e| format!("upgrade: {e}"))?;
    if sub.proto == Proto::Pubb {
        wait_for(&mut ws, "pubb:connection_established").await?;
        let frame = format!(r#"{{"action":"subscribe","channel":"{}"}}"#, sub.channel);
        ws.send(Message::text(frame))
            .await
            .map_err(|e| format!("send subscribe: {e}"))?;
        wait_for(&mut ws, "pubb:subscription_succeeded").await?;
    }
    Ok(ws)
}

/// Runs one subscriber for the life of the generator. At most as many
/// subscribers as `gate` has permits set up at once.
pub async fn run(sub: Sub, tally: Rc<Tally>, gate: Rc<Semaphore>) {
    let permit = gate.acquire().await;
    let mut ws = match timeout(SETUP_TIMEOUT, open(&sub)).await {
        Ok(Ok(ws)) => ws,
        Ok(Err(e)) => {
            eprintln!("crossgen: subscriber on {}: {e}", sub.channel);
            tally.mark_failed();
            return;
        }
        Err(_) => {
            eprintln!("crossgen: subscriber on {}: setup timed out", sub.channel);
            tally.mark_failed();
            return;
        }
    };
    drop(permit);
    tally.mark_ready();
    while let Some(msg) = ws.next().await {
        match msg {
            Ok(msg) => {
                if let Some(d) = data(&msg) {
                    tally.frame(d);
                }
            }
            Err(e) => {
                eprintln!("crossgen: subscriber on {} lost: {e}", sub.channel);
                break;
            }
        }
    }
    tally.mark_lost();
}
