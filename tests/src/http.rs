//! A small HTTP/1.1 client returning `(status, JSON)`.

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::header::HeaderMap;
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
