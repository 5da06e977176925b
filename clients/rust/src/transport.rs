//! The bytes: the `/v1/ws` WebSocket and the threads HTTP API over
//! HTTP/1.1, plain or TLS. Decides nothing; every answer goes back to the
//! core client.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bubble_core::ThreadId;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper::Uri;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::{Connector, MaybeTlsStream, WebSocketStream};

use crate::{tls, Error, Event, Options, Page};

/// An open `/v1/ws` connection.
pub(crate) type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A complete HTTP answer.
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) body: String,
}

/// The server, reached over HTTP and `/v1/ws`.
#[derive(Clone)]
pub(crate) struct Transport {
    /// `host:port` of the server.
    authority: String,
    /// The server is reached over TLS (`https://`, `wss://`).
    secure: bool,
    /// The TLS configuration of both the WebSocket and HTTP connections.
    tls: Arc<rustls::ClientConfig>,
    client: hyper_util::client::legacy::Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    timeout: Duration,
    /// The bearer for history reads: the token the client holds now.
    token: Arc<Mutex<Option<String>>>,
}

impl Transport {
    /// A transport to the server at `url`: its origin, `http://host:port`
    /// or `https://host:port` (`ws://`, `wss://` alike).
    pub(crate) fn new(url: &str, options: &Options) -> Result<Transport, Error> {
        let invalid = |why: &str| Error::InvalidUrl(format!("{url:?}: {why}"));
        let uri: Uri = url.parse().map_err(|_| invalid("not a URL"))?;
        let secure = match uri.scheme_str() {
            Some("http" | "ws") => false,
            Some("https" | "wss") => true,
            _ => return Err(invalid("expected http://host:port or https://host:port")),
        };
        let authority = uri.authority().ok_or_else(|| invalid("no host"))?;
        if !matches!(uri.path(), "" | "/") || uri.query().is_some() {
            return Err(invalid("expected the server's origin, without a path"));
        }
        let tls = tls::client_config(secure && options.system_roots, &options.root_certificates)?;
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(rustls::ClientConfig::clone(&tls))
            .https_or_http()
            .enable_http1()
            .build();
        Ok(Transport {
            authority: authority.as_str().to_owned(),
            secure,
            tls,
            client: hyper_util::client::legacy::Client::builder(TokioExecutor::new())
                .build(connector),
            timeout: options.request_timeout,
            token: Arc::default(),
        })
    }

    /// Remembers the token the client now holds (for history reads).
    pub(crate) fn set_token(&self, token: Option<String>) {
        *self.token.lock().unwrap_or_else(PoisonError::into_inner) = token;
    }

    fn token(&self) -> Option<String> {
        self.token
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Opens `/v1/ws`, authenticated with `Authorization: Bearer`.
    pub(crate) async fn open_socket(&self, token: Option<String>) -> Result<Socket, Error> {
        let network = |e: &dyn std::fmt::Display| Error::Network(e.to_string());
        let scheme = if self.secure { "wss" } else { "ws" };
        let mut request = format!("{scheme}://{}/v1/ws", self.authority)
            .into_client_request()
            .map_err(|e| network(&e))?;
        if let Some(token) = token {
            let bearer =
                HeaderValue::from_str(&format!("Bearer {token}")).map_err(|e| network(&e))?;
            request.headers_mut().insert("authorization", bearer);
        }
        let connect = tokio_tungstenite::connect_async_tls_with_config(
            request,
            None,
            false,
            Some(Connector::Rustls(self.tls.clone())),
        );
        match tokio::time::timeout(self.timeout, connect).await {
            Ok(Ok((socket, _response))) => Ok(socket),
            Ok(Err(e)) => Err(network(&e)),
            Err(_) => Err(Error::Network("connection timed out".into())),
        }
    }

    /// `POST /v1/threads/:thread/events` with an idempotency key.
    pub(crate) async fn post_event(
        &self,
        thread: &ThreadId,
        idempotency_key: &str,
        body: String,
        token: Option<String>,
    ) -> Result<Answer, Error> {
        let request = hyper::Request::post(self.uri(&format!("/v1/threads/{thread}/events")))
            .header("content-type", "application/json")
            .header("idempotency-key", idempotency_key);
        self.send(request, body, token).await
    }

    /// One page of `GET /v1/threads/:thread/events`.
    pub(crate) async fn history_page(
        &self,
        thread: &ThreadId,
        from_seq: u64,
        limit: u32,
    ) -> Result<Page, Error> {
        let path = format!("/v1/threads/{thread}/events?fromSeq={from_seq}&limit={limit}");
        let request = hyper::Request::get(self.uri(&path));
        let answer = self.send(request, String::new(), self.token()).await?;
        let body: Value = serde_json::from_str(&answer.body).map_err(|_| {
            Error::Protocol(format!(
                "a history page that is not JSON ({})",
                answer.status
            ))
        })?;
        if !(200..300).contains(&answer.status) {
            return Err(server_error(&body));
        }
        let events = body
            .get("events")
            .and_then(Value::as_array)
            .ok_or_else(|| Error::Protocol("a history page without events".into()))?
            .iter()
            .cloned()
            .map(Event::from_value)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Page {
            events,
            next_seq: body.get("nextSeq").and_then(Value::as_u64),
        })
    }

    fn uri(&self, path: &str) -> String {
        let scheme = if self.secure { "https" } else { "http" };
        format!("{scheme}://{}{path}", self.authority)
    }

    async fn send(
        &self,
        mut request: hyper::http::request::Builder,
        body: String,
        token: Option<String>,
    ) -> Result<Answer, Error> {
        if let Some(token) = token {
            request = request.header("authorization", format!("Bearer {token}"));
        }
        let request = request
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| Error::Network(e.to_string()))?;
        let exchange = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| Error::Network(with_causes(&e)))?;
            let status = response.status().as_u16();
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| Error::Network(e.to_string()))?
                .to_bytes();
            Ok(Answer {
                status,
                body: String::from_utf8_lossy(&body).into_owned(),
            })
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| Error::Network("no answer in time".into()))?
    }
}

/// `error` and its causes, outermost first ("client error (Connect): invalid
/// peer certificate: UnknownIssuer").
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(inner) = cause {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        cause = inner.source();
    }
    text
}

/// The error of a `{ "error": { "code", "message" } }` body.
fn server_error(body: &Value) -> Error {
    let text = |key: &str| {
        body.get("error")
            .and_then(|e| e.get(key))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    Error::Server {
        code: text("code"),
        message: text("message"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn authority(url: &str) -> Result<(String, bool), Error> {
        Transport::new(url, &Options::default()).map(|t| (t.authority, t.secure))
    }

    #[test]
    fn the_url_is_the_servers_origin() {
        for url in [
            "http://127.0.0.1:3000",
            "http://127.0.0.1:3000/",
            "ws://127.0.0.1:3000",
        ] {
            assert_eq!(
                authority(url),
                Ok(("127.0.0.1:3000".into(), false)),
                "{url}"
            );
        }
        assert_eq!(
            authority("http://bubble.internal"),
            Ok(("bubble.internal".into(), false))
        );
        for url in ["https://bubble.example.com", "wss://bubble.example.com"] {
            assert_eq!(
                authority(url),
                Ok(("bubble.example.com".into(), true)),
                "{url}"
            );
        }
        for url in [
            "ftp://host",
            "127.0.0.1:3000",
            "http://host/prefix",
            "http://host/?a=b",
            "",
        ] {
            assert!(matches!(authority(url), Err(Error::InvalidUrl(_))), "{url}");
        }
    }
}
