//! HTTP requests and responses as the engine sees them: the host parses the
//! transport, [`crate::edge`] decides which requests are the engine's, and
//! the engine routes `/v1/threads…` and `/api/apps/…` and decides every
//! status and body.

/// An HTTP method the engine routes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// GET
    Get,
    /// POST
    Post,
    /// PUT
    Put,
    /// PATCH
    Patch,
    /// DELETE
    Delete,
    /// Any other method (answered with 405).
    Other,
}

impl Method {
    /// Maps a method name (`"GET"`…) to a [`Method`].
    pub fn parse(name: &str) -> Method {
        match name {
            "GET" => Method::Get,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "PATCH" => Method::Patch,
            "DELETE" => Method::Delete,
            _ => Method::Other,
        }
    }
}

/// A request for an engine route. Borrowed from the host's buffers.
#[derive(Debug, Clone, Copy)]
pub struct HttpRequest<'a> {
    /// The method.
    pub method: Method,
    /// The path as it arrived, still percent-encoded, e.g.
    /// `/v1/threads/thread-1/events` (the engine decodes each segment with
    /// the edge's rules).
    pub path: &'a str,
    /// The raw query string without `?` (may be empty).
    pub query: &'a str,
    /// The `Authorization` header, if any.
    pub authorization: Option<&'a str>,
    /// The `Idempotency-Key` header, if any.
    pub idempotency_key: Option<&'a str>,
    /// The body bytes.
    pub body: &'a [u8],
}

/// An HTTP request, owned while it waits (for a read, for a key set).
#[derive(Debug, Clone)]
pub(crate) struct OwnedRequest {
    method: Method,
    path: String,
    query: String,
    authorization: Option<String>,
    idempotency_key: Option<String>,
    body: Vec<u8>,
}

impl OwnedRequest {
    /// The request, borrowed again.
    pub(crate) fn borrow(&self) -> HttpRequest<'_> {
        HttpRequest {
            method: self.method,
            path: &self.path,
            query: &self.query,
            authorization: self.authorization.as_deref(),
            idempotency_key: self.idempotency_key.as_deref(),
            body: &self.body,
        }
    }
}

impl From<&HttpRequest<'_>> for OwnedRequest {
    fn from(request: &HttpRequest<'_>) -> OwnedRequest {
        OwnedRequest {
            method: request.method,
            path: request.path.to_owned(),
            query: request.query.to_owned(),
            authorization: request.authorization.map(str::to_owned),
            idempotency_key: request.idempotency_key.map(str::to_owned),
            body: request.body.to_vec(),
        }
    }
}

/// The body's media type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContentType {
    /// `application/json`
    Json,
    /// `text/plain; charset=utf-8`
    Text,
    /// `text/plain; version=0.0.4; charset=utf-8` (Prometheus text exposition)
    Metrics,
}

impl ContentType {
    /// The header value.
    pub fn as_str(self) -> &'static str {
        match self {
            ContentType::Json => "application/json",
            ContentType::Text => "text/plain; charset=utf-8",
            ContentType::Metrics => "text/plain; version=0.0.4; charset=utf-8",
        }
    }
}

/// A complete response for the host to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    /// The status code.
    pub status: u16,
    /// The body's media type.
    pub content_type: ContentType,
    /// The body (empty for 204).
    pub body: String,
    /// `Retry-After` seconds, when set.
    pub retry_after: Option<u64>,
    /// Further headers (CORS), names in lower case.
    pub headers: Vec<(&'static str, String)>,
}

impl HttpResponse {
    /// A JSON response.
    pub fn json(status: u16, body: String) -> HttpResponse {
        HttpResponse {
            status,
            content_type: ContentType::Json,
            body,
            retry_after: None,
            headers: Vec::new(),
        }
    }

    /// A plain-text response.
    pub fn text(status: u16, body: impl Into<String>) -> HttpResponse {
        HttpResponse {
            status,
            content_type: ContentType::Text,
            body: body.into(),
            retry_after: None,
            headers: Vec::new(),
        }
    }

    /// `204 No Content`.
    pub fn no_content() -> HttpResponse {
        HttpResponse::json(204, String::new())
    }

    /// The error body and status of `err`.
    pub fn error(err: &crate::BubbleError) -> HttpResponse {
        HttpResponse::json(err.code().http_status(), err.to_http_body())
    }
}
