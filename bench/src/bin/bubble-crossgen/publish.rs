//! The publisher: N keep-alive HTTP/1.1 connections on plain tokio
//! `TcpStream`s with hand-formatted requests, and an open-loop schedule that
//! hands each publish to the next connection's queue at its scheduled time.
//!
//! Each connection has a writer task (drains its queue, pipelining requests)
//! and a reader task (frames responses and counts 2xx against the rest), so
//! a slow answer never delays the schedule: a late publish is still stamped
//! with its *scheduled* time, and the delay shows up as latency.

use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::mpsc;

use crate::cli::Proto;
use crate::response;
use crate::stamp;
use crate::tally::Clock;

/// App id of the pubb app in the bench config.
pub const APP_ID: &str = "bench-app";
/// Secret of the pubb app, sent as a bearer token.
pub const APP_SECRET: &str = "bench-secret";

/// Builds the publish request for a channel and stamp.
#[derive(Debug, Clone)]
pub struct Requests {
    /// Server address (for `Host`).
    pub addr: SocketAddr,
    /// Protocol.
    pub proto: Proto,
    /// Payload bytes.
    pub payload: usize,
}

impl Requests {
    /// The request publishing a payload stamped `sched_us` to `channel`.
    pub fn build(&self, channel: &str, sched_us: u64) -> Vec<u8> {
        let payload = stamp::encode(sched_us, self.payload);
        let (path, ctype, auth, body) = match self.proto {
            Proto::Nchan => (
                format!("/pub/{channel}"),
                "text/plain",
                String::new(),
                payload,
            ),
            Proto::Pubb => (
                format!("/api/apps/{APP_ID}/events"),
                "application/json",
                format!("Authorization: Bearer {APP_SECRET}\r\n"),
                format!(r#"{{"channel":"{channel}","name":"bench","data":"{payload}"}}"#),
            ),
        };
        format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\n{auth}Content-Type: {ctype}\r\nContent-Length: {}\r\n\r\n{body}",
            self.addr,
            body.len()
        )
        .into_bytes()
    }
}

/// Response counters of all connections.
#[derive(Debug, Default)]
pub struct PubStats {
    ok: Cell<u64>,
    failed: Cell<u64>,
    broken: Cell<u64>,
}

impl PubStats {
    /// Responses with a 2xx status.
    pub fn ok(&self) -> u64 {
        self.ok.get()
    }

    /// Responses with another status, plus publishes that could not be
    /// queued on a broken connection.
    pub fn failed(&self) -> u64 {
        self.failed.get()
    }

    /// Connections that broke.
    pub fn broken(&self) -> u64 {
        self.broken.get()
    }

    /// Zeroes the response counters for a new phase.
    pub fn reset(&self) {
        self.ok.set(0);
        self.failed.set(0);
    }

    fn bump(c: &Cell<u64>) {
        c.set(c.get() + 1);
    }
}

async fn writer(
    mut w: OwnedWriteHalf,
    mut queue: mpsc::UnboundedReceiver<Vec<u8>>,
    stats: Rc<PubStats>,
) {
    while let Some(mut batch) = queue.recv().await {
        // Whatever queued up while the last write was in flight goes in one
        // write (HTTP/1.1 pipelining).
        while batch.len() < 64 * 1024 {
            match queue.try_recv() {
                Ok(more) => batch.extend_from_slice(&more),
                Err(_) => break,
            }
        }
        if let Err(e) = w.write_all(&batch).await {
            eprintln!("crossgen: publish connection write: {e}");
            PubStats::bump(&stats.broken);
            return;
        }
    }
}

async fn reader(mut r: OwnedReadHalf, stats: Rc<PubStats>) {
    let mut buf: Vec<u8> = Vec::with_capacity(16 * 1024);
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let n = match r.read(&mut chunk).await {
            Ok(0) => {
                eprintln!("crossgen: publish connection closed by the server");
                break;
            }
            Ok(n) => n,
            Err(e) => {
                eprintln!("crossgen: publish connection read: {e}");
                break;
            }
        };
        buf.extend_from_slice(&chunk[..n]);
        let mut used = 0;
        loop {
            match response::frame(&buf[used..]) {
                Ok(Some(f)) => {
                    if (200..300).contains(&f.status) {
                        PubStats::bump(&stats.ok);
                    } else {
                        if stats.failed.get() < 5 {
                            let end = (used + f.len).min(buf.len());
                            eprintln!(
                                "crossgen: publish answered {}: {}",
                                f.status,
                                String::from_utf8_lossy(&buf[used..end]).trim()
                            );
                        }
                        PubStats::bump(&stats.failed);
                    }
                    used += f.len;
                }
                Ok(None) => break,
                Err(e) => {
                    eprintln!("crossgen: publish response: {}", e.0);
                    PubStats::bump(&stats.broken);
                    return;
                }
            }
        }
        buf.drain(..used);
    }
    PubStats::bump(&stats.broken);
}

/// The publish connections.
pub struct Publisher {
    queues: Vec<mpsc::UnboundedSender<Vec<u8>>>,
    requests: Requests,
    channels: Vec<String>,
    stats: Rc<PubStats>,
}

/// What one schedule sent.
#[derive(Debug, Clone)]
pub struct Sent {
    /// Publishes per channel index.
    pub per_channel: Vec<u64>,
    /// When the last publish was handed over.
    pub last: Instant,
}

impl Publisher {
    /// Opens `conns` connections and starts their tasks on the local set.
    pub async fn open(
        requests: Requests,
        channels: Vec<String>,
        conns: usize,
    ) -> std::io::Result<Self> {
        let stats = Rc::new(PubStats::default());
        let mut queues = Vec::with_capacity(conns);
        for _ in 0..conns {
            let tcp = TcpStream::connect(requests.addr).await?;
            tcp.set_nodelay(true)?;
            let (r, w) = tcp.into_split();
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::task::spawn_local(writer(w, rx, stats.clone()));
            tokio::task::spawn_local(reader(r, stats.clone()));
            queues.push(tx);
        }
        Ok(Publisher {
            queues,
            requests,
            channels,
            stats,
        })
    }

    /// The response counters.
    pub fn stats(&self) -> &PubStats {
        &self.stats
    }

    /// Sends `count` publishes at `per_sec`, the first at `start`: publish
    /// `k` is due at `start + k / per_sec`, goes to channel `k % channels`
    /// over connection `k % conns`, and is stamped with its due time. When
    /// the task wakes late, every publish already due goes out at once.
    pub async fn schedule(&self, clock: Clock, start: Instant, per_sec: f64, count: u64) -> Sent {
        let step_ns = 1e9 / per_sec;
        let due = |k: u64| start + Duration::from_nanos((k as f64 * step_ns) as u64);
        let mut per_channel = vec![0u64; self.channels.len()];
        let mut k = 0u64;
        while k < count {
            tokio::time::sleep_until(due(k).into()).await;
            let now = Instant::now();
            while k < count && due(k) <= now {
                let c = (k % self.channels.len() as u64) as usize;
                let req = self.requests.build(&self.channels[c], clock.us_at(due(k)));
                let q = &self.queues[(k % self.queues.len() as u64) as usize];
                if q.send(req).is_err() {
                    PubStats::bump(&self.stats.failed);
                }
                per_channel[c] += 1;
                k += 1;
            }
        }
        Sent {
            per_channel,
            last: Instant::now(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(r: &Requests, ch: &str, us: u64) -> String {
        String::from_utf8(r.build(ch, us)).expect("ASCII request")
    }

    #[test]
    fn nchan_request() {
        let r = Requests {
            addr: "127.0.0.1:8090".parse().expect("addr"),
            proto: Proto::Nchan,
            payload: 16,
        };
        assert_eq!(
            text(&r, "xg1", 77),
            "POST /pub/xg1 HTTP/1.1\r\nHost: 127.0.0.1:8090\r\nContent-Type: text/plain\r\n\
             Content-Length: 16\r\n\r\nT77;............"
        );
    }

    #[test]
    fn pubb_request() {
        let r = Requests {
            addr: "127.0.0.1:9".parse().expect("addr"),
            proto: Proto::Pubb,
            payload: 8,
        };
        let body = r#"{"channel":"xg0","name":"bench","data":"T5;....."}"#;
        assert_eq!(
            text(&r, "xg0", 5),
            format!(
                "POST /api/apps/bench-app/events HTTP/1.1\r\nHost: 127.0.0.1:9\r\n\
                 Authorization: Bearer {APP_SECRET}\r\nContent-Type: application/json\r\n\
                 Content-Length: {}\r\n\r\n{body}",
                body.len()
            )
        );
    }
}
