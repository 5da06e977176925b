//! How sockets close, on every WebSocket endpoint: a client's Close is
//! answered with the same code (RFC 6455 §5.5.1); a text message that is
//! not UTF-8 closes with 1007 and a malformed frame with 1002, while other
//! connections keep working; and a subscriber closed as a slow consumer
//! that reads again gets whole frames, then Close 1013.

mod channels_common;

use std::time::Duration;

use bubble_tests::pusher::connect_pusher;
use bubble_tests::threads::{create_thread, subscribe};
use bubble_tests::{Server, WsClient, WsMessage, ALICE, APP_KEY, HANG_TIMEOUT, TEST_CONFIG};
use channels_common::connect;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::frame::coding::{Data, OpCode};
use tokio_tungstenite::tungstenite::protocol::frame::Frame;
use tokio_tungstenite::tungstenite::Message;

/// One socket of each endpoint, open and past its greeting.
async fn one_of_each(server: &Server) -> Vec<(&'static str, WsClient)> {
    vec![
        ("/v1/ws", server.ws(ALICE).await),
        ("/socket", connect(server).await.ws),
        ("/app/:key", connect_pusher(server, APP_KEY).await.ws),
    ]
}

#[tokio::test]
async fn a_client_close_is_answered_with_its_code_on_every_endpoint() {
    let server = Server::start(TEST_CONFIG);
    for code in [1000, 4001] {
        for (endpoint, ws) in one_of_each(&server).await {
            assert_eq!(
                ws.close(code).await,
                Some(WsMessage::Close(Some(code), String::new())),
                "{endpoint}"
            );
        }
    }
}

/// A text frame carrying `payload` as is, valid UTF-8 or not.
fn text_frame(payload: &[u8]) -> Message {
    Message::Frame(Frame::message(
        payload.to_vec(),
        OpCode::Data(Data::Text),
        true,
    ))
}

#[tokio::test]
async fn bad_frames_close_1007_and_1002_and_other_sockets_keep_working() {
    let server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);
    create_thread(&alice, "kept").await;
    let mut bystander = server.ws(ALICE).await;
    subscribe(&mut bystander, "kept", None).await;

    let not_utf8 = text_frame(b"{\"action\":\"subscribe\",\"channel\":\"\xff\xfe\"}");
    let mut reserved_bits = Frame::message(b"{}".to_vec(), OpCode::Data(Data::Text), true);
    reserved_bits.header_mut().rsv1 = true;
    let reserved_bits = Message::Frame(reserved_bits);
    for (message, code) in [(not_utf8, 1007), (reserved_bits, 1002)] {
        for (endpoint, mut ws) in one_of_each(&server).await {
            ws.send(message.clone()).await.expect("send");
            assert_eq!(ws.recv_close().await, Some(code), "{endpoint}");
        }
    }

    let (status, body) = alice
        .post(
            "/v1/threads/kept/events",
            &json!({"type": "run_started", "runId": "r1"}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let frame = bystander.recv_json().await;
    assert_eq!(frame["event"]["seq"], 1, "{frame}");
}

/// A `/v1/ws` client of its own: it reads only when told, so the server's
/// frames wait in the kernel's buffers, and it checks the bytes it gets
/// frame by frame.
struct RawSocket {
    stream: TcpStream,
}

impl RawSocket {
    async fn open(server: &Server, token: &str) -> RawSocket {
        let mut stream = TcpStream::connect(server.addr()).await.expect("connect");
        let request = format!(
            "GET /v1/ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n\
             Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\
             Sec-WebSocket-Version: 13\r\nAuthorization: Bearer {token}\r\n\r\n"
        );
        stream.write_all(request.as_bytes()).await.expect("upgrade");
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            let byte = stream.read_u8().await.expect("upgrade answer");
            head.push(byte);
        }
        let head = String::from_utf8_lossy(&head);
        assert!(head.starts_with("HTTP/1.1 101"), "{head}");
        RawSocket { stream }
    }

    /// Sends `value` as one masked text frame.
    async fn send_json(&mut self, value: &Value) {
        let payload = value.to_string().into_bytes();
        assert!(payload.len() < 126, "short frames only");
        let mask = [7u8, 1, 3, 9];
        let mut frame = vec![0x81, 0x80 | payload.len() as u8];
        frame.extend_from_slice(&mask);
        frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        self.stream.write_all(&frame).await.expect("send");
    }

    /// Everything until the server ends the connection.
    async fn read_to_end(&mut self) -> Vec<u8> {
        let mut bytes = Vec::new();
        tokio::time::timeout(HANG_TIMEOUT, self.stream.read_to_end(&mut bytes))
            .await
            .expect("the server ends the connection")
            .expect("read");
        bytes
    }
}

/// Splits server frames (unmasked): (opcode, payload) each; fails on a
/// frame cut short.
fn frames(mut bytes: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        assert!(bytes.len() >= 2, "a frame header cut short");
        let (header, len) = match bytes[1] & 0x7F {
            126 => (4, usize::from(u16::from_be_bytes([bytes[2], bytes[3]]))),
            127 => {
                let len = u64::from_be_bytes(bytes[2..10].try_into().expect("8 bytes"));
                (10, usize::try_from(len).expect("length"))
            }
            short => (2, usize::from(short)),
        };
        assert!(
            bytes.len() >= header + len,
            "a frame cut short: {} of {} payload bytes, after {} whole frames",
            bytes.len() - header,
            len,
            out.len()
        );
        out.push((bytes[0] & 0x0F, bytes[header..header + len].to_vec()));
        bytes = &bytes[header + len..];
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_consumer_that_reads_again_gets_whole_frames_then_1013() {
    let server = Server::start(&format!(
        "{TEST_CONFIG}\n[limits]\noutbound_queue_frames = 4\n"
    ));
    let alice = server.http(ALICE);
    create_thread(&alice, "big").await;
    let mut stalled = RawSocket::open(&server, ALICE).await;
    stalled
        .send_json(&json!({"type": "thread.subscribe", "threadId": "big"}))
        .await;

    // Events far larger than what the kernel buffers for the socket, while
    // it reads nothing: its queue overflows and the server closes it.
    let delta = "x".repeat(60 * 1024);
    let mut appended = 0u64;
    while server.metric("bubble_slow_consumer_closes_total").await == 0 {
        assert!(appended < 4000, "no slow consumer after {appended} events");
        for _ in 0..10 {
            let event = json!({"type": "message_part", "runId": "r", "version": "ai-sdk-v6",
                               "part": {"type": "text-delta", "id": "m", "delta": delta}});
            let (status, body) = alice.post("/v1/threads/big/events", &event).await;
            assert_eq!(status, 201, "{body}");
            appended += 1;
        }
    }
    // It reads again only after a while: what reached it must still be
    // whole frames, then the Close.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let bytes = stalled.read_to_end().await;
    let frames = frames(&bytes);
    let (close, events) = frames.split_last().expect("frames");
    assert_eq!(close.0, 0x8, "the last frame is a Close");
    assert_eq!(close.1[..2], 1013u16.to_be_bytes(), "slow consumer");
    let mut seq = 0;
    for (opcode, payload) in events {
        assert_eq!(*opcode, 0x1, "text frames before the Close");
        let frame: Value = serde_json::from_slice(payload).expect("JSON");
        if frame["type"] == "thread.event" {
            seq += 1;
            assert_eq!(frame["event"]["seq"], seq, "a gapless prefix");
        }
    }
    assert!(seq > 0 && seq < appended, "{seq} of {appended} events");
}
