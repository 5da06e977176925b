//! CORS (the Fetch standard's CORS protocol) for the HTTP APIs: the
//! threads API, `/api/apps/…` and Pusher's `/apps/…`.
//!
//! Without a configuration no response carries a CORS header and every
//! preflight is refused: only same-origin pages (and non-browser clients)
//! can call the APIs. With one:
//! - A **preflight** (`OPTIONS` with `Origin` and
//!   `Access-Control-Request-Method`) from an allowed origin, for one of
//!   [`ALLOWED_METHODS`] and only [`ALLOWED_HEADERS`], is answered `204`
//!   with `Access-Control-Allow-Origin`, `-Allow-Methods`, `-Allow-Headers`
//!   and `-Max-Age` (the configured seconds browsers may cache it). Any
//!   other preflight is `403 forbidden` with no CORS header.
//! - An **actual response** to an allowed origin carries
//!   `Access-Control-Allow-Origin` and `Access-Control-Expose-Headers:
//!   Retry-After`. A request from another origin is still served (CORS is
//!   enforced by the browser, which then withholds the response from the
//!   page); it just gets no CORS header.
//! - `Access-Control-Allow-Origin` is `*` when any origin is allowed and
//!   credentials are off, else the request's origin, with `Vary: Origin`.
//! - Credentials (cookies, TLS client certificates) are off unless
//!   configured; then `Access-Control-Allow-Credentials: true` is sent, and
//!   `*` cannot be the allowed origins. Bearer tokens in `Authorization`
//!   need no credentials mode.

use crate::error::BubbleError;
use crate::http::HttpResponse;

use super::origins::AllowedOrigins;

/// Methods a preflight may ask for.
pub const ALLOWED_METHODS: [&str; 6] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"];
/// Request headers a preflight may ask for (compared case-insensitively).
pub const ALLOWED_HEADERS: [&str; 3] = ["Authorization", "Content-Type", "Idempotency-Key"];
/// Response headers pages may read beyond the CORS-safelisted ones.
pub const EXPOSED_HEADERS: &str = "Retry-After";
/// `Access-Control-Max-Age` when none is configured, in seconds.
pub const DEFAULT_MAX_AGE_SECS: u64 = 600;

/// A CORS configuration that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidCors {
    /// Credentials for any origin would let every site act with a user's
    /// cookies.
    #[error("cors: allow_credentials needs a list of origins, not \"*\"")]
    CredentialsWithAnyOrigin,
}

/// The CORS rules of one deployment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cors {
    origins: AllowedOrigins,
    credentials: bool,
    max_age_secs: u64,
}

/// Response headers, names in lower case.
pub type Headers = Vec<(&'static str, String)>;

impl Cors {
    /// Rules allowing `origins`, with or without credentials, preflights
    /// cached for `max_age_secs`.
    pub fn new(
        origins: AllowedOrigins,
        credentials: bool,
        max_age_secs: u64,
    ) -> Result<Cors, InvalidCors> {
        if credentials && origins == AllowedOrigins::Any {
            return Err(InvalidCors::CredentialsWithAnyOrigin);
        }
        Ok(Cors {
            origins,
            credentials,
            max_age_secs,
        })
    }

    /// The headers of an API response to a request from `origin`.
    pub(crate) fn response_headers(&self, origin: Option<&str>) -> Headers {
        let mut headers = Headers::new();
        let echoes = self.credentials || self.origins != AllowedOrigins::Any;
        if echoes {
            headers.push(("vary", "Origin".to_owned()));
        }
        let Some(origin) = origin.filter(|o| self.origins.allows(o)) else {
            return headers;
        };
        let allow = if echoes { origin } else { "*" };
        headers.push(("access-control-allow-origin", allow.to_owned()));
        if self.credentials {
            headers.push(("access-control-allow-credentials", "true".to_owned()));
        }
        headers
    }

    /// The answer to a preflight from `origin` for `method` and the
    /// comma-separated request `headers`.
    pub(crate) fn preflight(
        &self,
        origin: &str,
        method: &str,
        headers: Option<&str>,
    ) -> HttpResponse {
        if !self.origins.allows(origin) {
            return refused("Origin not allowed.");
        }
        if !ALLOWED_METHODS.contains(&method) {
            return refused(&format!("Method {method:?} is not allowed cross-origin."));
        }
        let asked = headers.unwrap_or_default().split(',').map(str::trim);
        for name in asked.filter(|n| !n.is_empty()) {
            if !ALLOWED_HEADERS.iter().any(|h| h.eq_ignore_ascii_case(name)) {
                return refused(&format!("Header {name:?} is not allowed cross-origin."));
            }
        }
        let mut response = HttpResponse::no_content();
        response.headers = self.response_headers(Some(origin));
        response.headers.extend([
            ("access-control-allow-methods", ALLOWED_METHODS.join(", ")),
            ("access-control-allow-headers", ALLOWED_HEADERS.join(", ")),
            ("access-control-max-age", self.max_age_secs.to_string()),
        ]);
        response
    }

    /// The headers of a response a page may read: allowed origin and
    /// exposed headers.
    pub(crate) fn actual_headers(&self, origin: Option<&str>) -> Headers {
        let mut headers = self.response_headers(origin);
        if headers
            .iter()
            .any(|(name, _)| *name == "access-control-allow-origin")
        {
            headers.push(("access-control-expose-headers", EXPOSED_HEADERS.to_owned()));
        }
        headers
    }
}

/// `403 forbidden`: a preflight refused.
pub(crate) fn refused(message: &str) -> HttpResponse {
    HttpResponse::error(&BubbleError::CrossOrigin(message.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cors(origins: &[&str], credentials: bool) -> Cors {
        Cors::new(AllowedOrigins::parse(origins).unwrap(), credentials, 900).unwrap()
    }

    fn header<'a>(headers: &'a Headers, name: &str) -> Option<&'a str> {
        headers
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v.as_str())
    }

    #[test]
    fn an_allowed_preflight_is_answered_204_and_cached() {
        let c = cors(&["https://app.example"], false);
        let ok = c.preflight(
            "https://app.example",
            "POST",
            Some("authorization, content-type,Idempotency-Key"),
        );
        assert_eq!(ok.status, 204);
        let h = &ok.headers;
        assert_eq!(
            header(h, "access-control-allow-origin"),
            Some("https://app.example")
        );
        assert_eq!(header(h, "access-control-max-age"), Some("900"));
        assert_eq!(
            header(h, "access-control-allow-headers"),
            Some("Authorization, Content-Type, Idempotency-Key")
        );
        assert_eq!(
            header(h, "access-control-allow-methods"),
            Some("GET, HEAD, POST, PUT, PATCH, DELETE")
        );
        assert_eq!(header(h, "vary"), Some("Origin"));
        assert_eq!(header(h, "access-control-allow-credentials"), None);
    }

    #[test]
    fn other_preflights_are_refused_without_cors_headers() {
        let c = cors(&["https://app.example"], false);
        for (origin, method, headers) in [
            ("https://evil.example", "GET", None),
            ("http://app.example", "GET", None),
            ("https://app.example", "TRACE", None),
            ("https://app.example", "get", None),
            (
                "https://app.example",
                "POST",
                Some("authorization, x-custom"),
            ),
        ] {
            let refused = c.preflight(origin, method, headers);
            assert_eq!(refused.status, 403, "{origin} {method} {headers:?}");
            assert!(
                refused.body.contains(r#""code":"forbidden""#),
                "{}",
                refused.body
            );
            assert!(refused.headers.is_empty());
        }
    }

    #[test]
    fn actual_responses_name_the_allowed_origin_only() {
        let c = cors(&["https://app.example"], false);
        let allowed = c.actual_headers(Some("https://app.example"));
        assert_eq!(
            header(&allowed, "access-control-allow-origin"),
            Some("https://app.example")
        );
        assert_eq!(
            header(&allowed, "access-control-expose-headers"),
            Some("Retry-After")
        );
        let other = c.actual_headers(Some("https://evil.example"));
        assert_eq!(other, vec![("vary", "Origin".to_owned())]);
        assert_eq!(c.actual_headers(None), vec![("vary", "Origin".to_owned())]);
    }

    #[test]
    fn any_origin_is_a_star_without_credentials() {
        let any = cors(&["*"], false);
        let h = any.actual_headers(Some("https://a.example"));
        assert_eq!(header(&h, "access-control-allow-origin"), Some("*"));
        assert_eq!(header(&h, "vary"), None);
        assert_eq!(
            Cors::new(AllowedOrigins::Any, true, 1),
            Err(InvalidCors::CredentialsWithAnyOrigin)
        );
    }

    #[test]
    fn credentials_echo_the_origin() {
        let c = cors(&["https://app.example"], true);
        let h = c.actual_headers(Some("https://app.example"));
        assert_eq!(header(&h, "access-control-allow-credentials"), Some("true"));
        assert_eq!(
            header(&h, "access-control-allow-origin"),
            Some("https://app.example")
        );
    }
}
