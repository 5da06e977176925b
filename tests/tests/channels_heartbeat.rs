//! Heartbeat: the server Pings; a socket that never Pongs is closed once the
//! Pong deadline passes, even while it keeps sending application messages,
//! and a socket that Pongs on the same server is unaffected.

mod channels_common;

use std::time::Duration;

use bubble_tests::{Server, APP_KEY, HANG_TIMEOUT};
use channels_common::*;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const FAST_HEARTBEAT: &str = "[heartbeat]\nping_interval_ms = 100\npong_timeout_ms = 600\n";

/// A WebSocket client written by hand so that it never answers a Ping.
struct Silent {
    tcp: TcpStream,
    buf: Vec<u8>,
}

/// What the silent client read.
#[derive(Debug, PartialEq)]
enum Read {
    Text(String),
    Ping,
    Close(Option<u16>),
    Other(u8),
    Eof,
}

impl Silent {
    async fn connect(server: &Server) -> Silent {
        let mut tcp = TcpStream::connect(server.addr()).await.unwrap();
        let request = format!(
            "GET /socket?appKey={APP_KEY}&protocol=2 HTTP/1.1\r\nHost: {}\r\nUpgrade: websocket\r\n\
             Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
             Sec-WebSocket-Version: 13\r\n\r\n",
            server.addr()
        );
        tcp.write_all(request.as_bytes()).await.unwrap();
        let mut silent = Silent {
            tcp,
            buf: Vec::new(),
        };
        let end = loop {
            if let Some(at) = silent.buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
            assert!(
                silent.fill().await,
                "connection closed during the handshake"
            );
        };
        let head = String::from_utf8_lossy(&silent.buf[..end]).into_owned();
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        silent.buf.drain(..end);
        silent
    }

    async fn fill(&mut self) -> bool {
        let mut chunk = [0u8; 4096];
        let n = tokio::time::timeout(HANG_TIMEOUT, self.tcp.read(&mut chunk))
            .await
            .expect("the server neither sent nor closed")
            .unwrap_or(0);
        self.buf.extend_from_slice(&chunk[..n]);
        n > 0
    }

    async fn need(&mut self, n: usize) -> bool {
        while self.buf.len() < n {
            if !self.fill().await {
                return false;
            }
        }
        true
    }

    /// The next frame from the server (unmasked, unfragmented).
    async fn read(&mut self) -> Read {
        if !self.need(2).await {
            return Read::Eof;
        }
        let opcode = self.buf[0] & 0x0f;
        let (len, header) = match self.buf[1] & 0x7f {
            126 => {
                if !self.need(4).await {
                    return Read::Eof;
                }
                (
                    usize::from(u16::from_be_bytes([self.buf[2], self.buf[3]])),
                    4,
                )
            }
            127 => panic!("unexpectedly large frame"),
            n => (usize::from(n), 2),
        };
        if !self.need(header + len).await {
            return Read::Eof;
        }
        let payload: Vec<u8> = self.buf.drain(..header + len).skip(header).collect();
        match opcode {
            1 => Read::Text(String::from_utf8(payload).unwrap()),
            8 => Read::Close(
                (payload.len() >= 2).then(|| u16::from_be_bytes([payload[0], payload[1]])),
            ),
            9 => Read::Ping,
            other => Read::Other(other),
        }
    }

    /// Sends a masked text frame; false once the server is gone.
    async fn send_text(&mut self, text: &str) -> bool {
        let mask = [0x12u8, 0x34, 0x56, 0x78];
        let mut frame = vec![0x81];
        let len = text.len();
        assert!(len < 126);
        frame.push(0x80 | u8::try_from(len).unwrap());
        frame.extend_from_slice(&mask);
        frame.extend(text.bytes().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        self.tcp.write_all(&frame).await.is_ok()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_that_never_pongs_is_closed_and_others_are_not() {
    let server = std::sync::Arc::new(Server::start(&config_with(FAST_HEARTBEAT)));

    let mut healthy = connect(&server).await;
    subscribe(&mut healthy.ws, "news").await;

    let mut silent = Silent::connect(&server).await;
    let Read::Text(established) = silent.read().await else {
        panic!("no connection event")
    };
    let established: Value = serde_json::from_str(&established).unwrap();
    assert_eq!(established["event"], "pubb:connection_established");
    let data: Value = serde_json::from_str(established["data"].as_str().unwrap()).unwrap();
    assert_eq!(
        data["activity_timeout"], 1,
        "the Pong deadline in whole seconds, rounded up"
    );

    // Read the silent socket to its end without ever answering a Ping, and
    // answer each Ping with application traffic, which must not count.
    let silent_task = tokio::spawn(async move {
        let mut pings = 0;
        loop {
            match silent.read().await {
                Read::Ping => {
                    pings += 1;
                    // Not heartbeats: {"action":"ping"}, an event named pubb:ping, a command.
                    let message = match pings % 3 {
                        0 => json!({"action": "ping"}),
                        1 => json!({"event": "pubb:ping"}),
                        _ => json!({"action": "subscribe", "channel": format!("p{pings}")}),
                    };
                    silent.send_text(&message.to_string()).await;
                }
                Read::Text(text) => {
                    assert!(
                        !text.contains(r#""event":"error""#),
                        "closed for another reason: {text}"
                    );
                }
                Read::Other(_) => {}
                Read::Close(_) | Read::Eof => return pings,
            }
        }
    });
    // Meanwhile keep reading the healthy socket (its client answers Pings).
    while !silent_task.is_finished() {
        healthy
            .ws
            .expect_no_frame_within(Duration::from_millis(100))
            .await;
    }
    let pings = silent_task.await.unwrap();
    assert!(
        pings >= 1,
        "the server sent WebSocket Pings before giving up"
    );

    // The healthy socket lives through several more deadlines and still receives.
    for _ in 0..20 {
        healthy
            .ws
            .expect_no_frame_within(Duration::from_millis(100))
            .await;
    }
    publish(&server, &json!({"channel": "news", "name": "still-here"})).await;
    assert_eq!(
        healthy.ws.recv_json().await,
        envelope("news", "still-here", &json!(null))
    );
}
