//! A WebSocket client for `/v1/ws` and `/socket`.

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::{Error, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::HANG_TIMEOUT;

/// What arrived on a socket (Pings and Pongs are skipped).
#[derive(Debug, Clone, PartialEq)]
pub enum WsMessage {
    /// A text frame.
    Text(String),
    /// A binary frame.
    Binary(Vec<u8>),
    /// A Close frame: its code (None when the frame had no payload) and reason.
    Close(Option<u16>, String),
    /// The connection ended without a Close frame (reset or EOF).
    Ended(String),
}

/// A client connection. Every wait fails the test after [`HANG_TIMEOUT`].
pub struct WsClient {
    stream: WebSocketStream<MaybeTlsStream<TcpStream>>,
    ended: bool,
}

impl WsClient {
    /// Connects to `url`, sending `Authorization: Bearer <token>` when given.
    pub async fn connect(url: &str, token: Option<&str>) -> Result<WsClient, Error> {
        let bearer = token.map(|t| format!("Bearer {t}"));
        let headers: Vec<(&str, &str)> = bearer
            .iter()
            .map(|b| ("authorization", b.as_str()))
            .collect();
        WsClient::connect_with_headers(url, &headers).await
    }

    /// Connects to `url` sending these extra upgrade `headers` (e.g.
    /// `Origin`). A refused upgrade is `Err(Error::Http(response))`.
    pub async fn connect_with_headers(
        url: &str,
        headers: &[(&str, &str)],
    ) -> Result<WsClient, Error> {
        let mut request = url.into_client_request()?;
        for (name, value) in headers {
            let value = HeaderValue::from_str(value).map_err(|e| Error::HttpFormat(e.into()))?;
            let name =
                tokio_tungstenite::tungstenite::http::HeaderName::from_bytes(name.as_bytes())
                    .map_err(|e| Error::HttpFormat(e.into()))?;
            request.headers_mut().insert(name, value);
        }
        let config = WebSocketConfig::default()
            .max_message_size(Some(64 << 20))
            .max_frame_size(Some(64 << 20));
        let connect = tokio_tungstenite::connect_async_with_config(request, Some(config), false);
        let (stream, _response) = tokio::time::timeout(HANG_TIMEOUT, connect)
            .await
            .map_err(|_| Error::Io(std::io::ErrorKind::TimedOut.into()))??;
        Ok(WsClient {
            stream,
            ended: false,
        })
    }

    /// Sends `value` as a text frame.
    pub async fn send_json(&mut self, value: &Value) {
        self.send_text(&value.to_string()).await;
    }

    /// Sends a text frame.
    pub async fn send_text(&mut self, text: &str) {
        self.send(Message::text(text))
            .await
            .unwrap_or_else(|e| panic!("send text: {e}"));
    }

    /// Sends a binary frame.
    pub async fn send_binary(&mut self, bytes: Vec<u8>) {
        self.send(Message::binary(bytes))
            .await
            .unwrap_or_else(|e| panic!("send binary: {e}"));
    }

    /// Sends any message; the error is returned (the peer may have closed).
    pub async fn send(&mut self, message: Message) -> Result<(), Error> {
        match tokio::time::timeout(HANG_TIMEOUT, self.stream.send(message)).await {
            Ok(result) => result,
            Err(_) => Err(Error::Io(std::io::ErrorKind::TimedOut.into())),
        }
    }

    /// Starts the closing handshake with `code` and waits for the peer's
    /// Close: returns it, or how the connection ended without one (`None`
    /// when nothing came within [`HANG_TIMEOUT`]).
    pub async fn close(mut self, code: u16) -> Option<WsMessage> {
        let frame = tokio_tungstenite::tungstenite::protocol::CloseFrame {
            code: code.into(),
            reason: "".into(),
        };
        let _ = self.send(Message::Close(Some(frame))).await;
        loop {
            match self.next(HANG_TIMEOUT).await {
                None => return None,
                Some(end @ (WsMessage::Close(..) | WsMessage::Ended(_))) => return Some(end),
                Some(_) => {}
            }
        }
    }

    async fn next(&mut self, wait: Duration) -> Option<WsMessage> {
        if self.ended {
            return Some(WsMessage::Ended("already ended".into()));
        }
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let item = tokio::time::timeout_at(deadline, self.stream.next())
                .await
                .ok()?;
            let message = match item {
                Some(Ok(Message::Text(text))) => WsMessage::Text(text.to_string()),
                Some(Ok(Message::Binary(bytes))) => WsMessage::Binary(bytes.to_vec()),
                Some(Ok(Message::Close(frame))) => match frame {
                    Some(f) => WsMessage::Close(Some(f.code.into()), f.reason.to_string()),
                    None => WsMessage::Close(None, String::new()),
                },
                Some(Ok(Message::Ping(_) | Message::Pong(_) | Message::Frame(_))) => continue,
                Some(Err(e)) => {
                    self.ended = true;
                    WsMessage::Ended(e.to_string())
                }
                None => {
                    self.ended = true;
                    WsMessage::Ended("stream ended".into())
                }
            };
            return Some(message);
        }
    }

    /// The next message; fails the test after [`HANG_TIMEOUT`].
    pub async fn recv(&mut self) -> WsMessage {
        match self.next(HANG_TIMEOUT).await {
            Some(message) => message,
            None => panic!("no WebSocket message within {HANG_TIMEOUT:?}"),
        }
    }

    /// The next message, parsed as a JSON text frame.
    pub async fn recv_json(&mut self) -> Value {
        match self.recv().await {
            WsMessage::Text(text) => serde_json::from_str(&text).unwrap_or_else(|e| {
                panic!("server sent a text frame that is not JSON ({e}): {text}")
            }),
            other => panic!("expected a JSON text frame, got {other:?}"),
        }
    }

    /// Receives JSON frames until one satisfies `pred`; returns every frame
    /// received, the matching one last.
    pub async fn recv_until(&mut self, mut pred: impl FnMut(&Value) -> bool) -> Vec<Value> {
        let mut seen = Vec::new();
        loop {
            let frame = self.recv_json().await;
            let done = pred(&frame);
            seen.push(frame);
            if done {
                return seen;
            }
        }
    }

    /// Expects the next message to be a Close frame; returns its code.
    pub async fn recv_close(&mut self) -> Option<u16> {
        match self.recv().await {
            WsMessage::Close(code, _) => code,
            other => panic!("expected a Close frame, got {other:?}"),
        }
    }

    /// Fails the test if any data or Close frame arrives within `wait`.
    /// (A negative check: it only waits, it never measures.)
    pub async fn expect_no_frame_within(&mut self, wait: Duration) {
        if let Some(message) = self.next(wait).await {
            panic!("expected silence, got {message:?}");
        }
    }
}
