//! A small HTTP/1.1 client returning `(status, JSON)`, and raw requests.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::header::{HeaderMap, HeaderName, HeaderValue};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

use crate::HANG_TIMEOUT;

/// A complete response.
#[derive(Debug, Clone)]
pub struct HttpResponse {
    /// The status code.
    pub status: u16,
    /// The response headers.
    pub headers: HeaderMap,
    /// The body bytes.
    pub body: Vec<u8>,
}

impl HttpResponse {
    /// The body as text (lossy UTF-8).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON: `Null` when empty, a JSON string of the text when
    /// it is not JSON.
    pub fn json(&self) -> Value {
        if self.body.is_empty() {
            return Value::Null;
        }
        serde_json::from_slice(&self.body).unwrap_or_else(|_| Value::String(self.text()))
    }

    /// A header's value as text.
    pub fn header(&self, name: &str) -> Option<String> {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    }
}

/// An HTTP client bound to the server's base URL and, optionally, a bearer.
#[derive(Clone)]
pub struct HttpClient {
    base: String,
    token: Option<String>,
    client: Client<HttpConnector, Full<Bytes>>,
}

impl HttpClient {
    /// A client for `base` (`http://host:port`), sending `token` as bearer.
    pub fn new(base: &str, token: Option<&str>) -> HttpClient {
        HttpClient {
            base: base.trim_end_matches('/').to_owned(),
            token: token.map(str::to_owned),
            client: Client::builder(TokioExecutor::new()).build_http(),
        }
    }

    /// The same client with another bearer (`None`: no `Authorization`).
    pub fn with_token(&self, token: Option<&str>) -> HttpClient {
        HttpClient {
            token: token.map(str::to_owned),
            ..self.clone()
        }
    }

    /// `GET path`.
    pub async fn get(&self, path: &str) -> (u16, Value) {
        self.call("GET", path, None, &[]).await
    }

    /// `POST path` with a JSON body.
    pub async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.call("POST", path, Some(body), &[]).await
    }

    /// `POST path` with a JSON body and an `Idempotency-Key` header.
    pub async fn post_idempotent(&self, path: &str, body: &Value, key: &str) -> (u16, Value) {
        self.call("POST", path, Some(body), &[("idempotency-key", key)])
            .await
    }

    /// `PUT path` with a JSON body.
    pub async fn put(&self, path: &str, body: &Value) -> (u16, Value) {
        self.call("PUT", path, Some(body), &[]).await
    }

    /// `PATCH path` with a JSON body.
    pub async fn patch(&self, path: &str, body: &Value) -> (u16, Value) {
        self.call("PATCH", path, Some(body), &[]).await
    }

    /// `DELETE path`.
    pub async fn delete(&self, path: &str) -> (u16, Value) {
        self.call("DELETE", path, None, &[]).await
    }

    async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        headers: &[(&str, &str)],
    ) -> (u16, Value) {
        let mut all = vec![("content-type", "application/json")];
        all.extend_from_slice(headers);
        let bytes = body.map(|b| b.to_string().into_bytes()).unwrap_or_default();
        let res = self.request(method, path, &all, bytes).await;
        (res.status, res.json())
    }

    /// Any request: raw body bytes and extra headers (the bearer is added
    /// unless `headers` sets `authorization` itself). Panics on a transport
    /// failure or a hang.
    pub async fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
    ) -> HttpResponse {
        self.try_request(method, path, headers, body)
            .await
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"))
    }

    /// Like [`HttpClient::request`], but a transport failure is an `Err`
    /// (for requests racing a server that is being killed).
    pub async fn try_request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Vec<u8>,
    ) -> Result<HttpResponse, String> {
        let mut builder = hyper::Request::builder()
            .method(method)
            .uri(format!("{}{path}", self.base));
        let sets_auth = headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("authorization"));
        if let (Some(token), false) = (&self.token, sets_auth) {
            builder = builder.header("authorization", format!("Bearer {token}"));
        }
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        let request = builder
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| e.to_string())?;
        let fut = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| e.to_string())?;
            let status = response.status().as_u16();
            let headers = response.headers().clone();
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| e.to_string())?;
            Ok(HttpResponse {
                status,
                headers,
                body: body.to_bytes().to_vec(),
            })
        };
        tokio::time::timeout(HANG_TIMEOUT, fut)
            .await
            .map_err(|_| format!("no response within {HANG_TIMEOUT:?}"))?
    }
}

/// Sends `request` byte for byte on a fresh connection to `addr` and reads
/// the response, for requests an HTTP client refuses to write (header values
/// that are not visible ASCII). The request should carry `Connection: close`;
/// the body is read up to its `Content-Length`, or to the end of the stream.
/// Blocking: call it from `spawn_blocking` in async tests.
pub fn raw_request(addr: SocketAddr, request: &[u8]) -> HttpResponse {
    let mut stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    stream
        .set_read_timeout(Some(HANG_TIMEOUT))
        .expect("set read timeout");
    stream.write_all(request).expect("write the raw request");
    let mut raw = Vec::new();
    let mut buf = [0u8; 4096];
    let head_end = loop {
        if let Some(end) = find(&raw, b"\r\n\r\n") {
            break end;
        }
        match stream.read(&mut buf) {
            Ok(0) => panic!(
                "the connection closed before a response head: {:?}",
                String::from_utf8_lossy(&raw)
            ),
            Ok(n) => raw.extend_from_slice(&buf[..n]),
            Err(e) => panic!("read the response: {e}"),
        }
    };
    let head = String::from_utf8_lossy(&raw[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse::<u16>().ok())
        .unwrap_or_else(|| panic!("no status line in {head:?}"));
    let mut headers = HeaderMap::new();
    for line in lines {
        if let Some((name, value)) = line.split_once(':') {
            if let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name.trim().as_bytes()),
                HeaderValue::from_str(value.trim()),
            ) {
                headers.append(name, value);
            }
        }
    }
    let length = headers
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    let mut body = raw.split_off(head_end + 4);
    loop {
        if length.is_some_and(|n| body.len() >= n) {
            break;
        }
        match stream.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => body.extend_from_slice(&buf[..n]),
            Err(e) => panic!("read the response body: {e}"),
        }
    }
    if let Some(n) = length {
        body.truncate(n);
    }
    HttpResponse {
        status,
        headers,
        body,
    }
}

/// The bytes of `POST path` with a bearer `token`, JSON `body`, the extra
/// `headers` written verbatim (any bytes) and `Connection: close`, for
/// [`raw_request`].
pub fn raw_post(path: &str, token: &str, headers: &[(&str, &[u8])], body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    )
    .into_bytes();
    for (name, value) in headers {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    out
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
