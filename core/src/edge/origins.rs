//! Allowed origins (RFC 6454): the list a deployment configures for CORS
//! and for WebSocket upgrades.
//!
//! An entry is `*` (any origin) or an exact origin `scheme://host[:port]`
//! with an `http` or `https` scheme and no path, query or user. Entries are
//! normalised as browsers serialise an `Origin` header: lower case, the
//! default port (80 for `http`, 443 for `https`) left out, no trailing
//! `/`. A request's `Origin` is then compared to them byte for byte (after
//! lower-casing, which browsers already do), so `https://app.example`
//! allows neither `http://app.example` nor `https://app.example:8443` nor
//! `https://sub.app.example`. The opaque origin `null` (sandboxed frames,
//! `file:` pages) is allowed only by `*`.

/// An entry that is neither `*` nor an exact `http(s)` origin.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "origin {0:?} must be \"*\" or scheme://host[:port] with scheme http or https, \
     and no path, query or user"
)]
pub struct InvalidOrigin(pub String);

/// Which origins are allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowedOrigins {
    /// Any origin (`*`).
    Any,
    /// These exact origins, normalised.
    List(Vec<String>),
}

impl AllowedOrigins {
    /// The origins of config `entries`; `*` among them allows any.
    pub fn parse<S: AsRef<str>>(entries: &[S]) -> Result<AllowedOrigins, InvalidOrigin> {
        let mut list = Vec::with_capacity(entries.len());
        for entry in entries {
            let entry = entry.as_ref();
            if entry == "*" {
                return Ok(AllowedOrigins::Any);
            }
            list.push(normalise(entry).ok_or_else(|| InvalidOrigin(entry.to_owned()))?);
        }
        Ok(AllowedOrigins::List(list))
    }

    /// Whether a request with this `Origin` header is allowed.
    pub fn allows(&self, origin: &str) -> bool {
        match self {
            AllowedOrigins::Any => true,
            AllowedOrigins::List(list) => list.iter().any(|o| o.eq_ignore_ascii_case(origin)),
        }
    }
}

/// `entry` as a browser serialises the same origin, if it is one.
fn normalise(entry: &str) -> Option<String> {
    let lower = entry.to_ascii_lowercase();
    let (scheme, rest) = lower.split_once("://")?;
    let default_port = match scheme {
        "http" => "80",
        "https" => "443",
        _ => return None,
    };
    let authority = rest.strip_suffix('/').unwrap_or(rest);
    if authority.is_empty() || authority.contains(['/', '?', '#', '@', ' ']) {
        return None;
    }
    let host = match authority.rsplit_once(':') {
        // An IPv6 literal's colons are inside its brackets.
        Some((host, port)) if !port.contains(']') => {
            if port.is_empty() || !port.bytes().all(|b| b.is_ascii_digit()) || host.is_empty() {
                return None;
            }
            if port == default_port {
                host.to_owned()
            } else {
                authority.to_owned()
            }
        }
        _ => authority.to_owned(),
    };
    Some(format!("{scheme}://{host}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_normalised_like_browser_origins() {
        let allowed = AllowedOrigins::parse(&[
            "https://App.Example/",
            "http://localhost:8080",
            "https://x.example:443",
            "http://y.example:80",
            "http://[::1]:3000",
        ])
        .unwrap();
        for origin in [
            "https://app.example",
            "http://localhost:8080",
            "https://x.example",
            "http://y.example",
            "http://[::1]:3000",
        ] {
            assert!(allowed.allows(origin), "{origin}");
        }
        for origin in [
            "http://app.example",
            "https://app.example:8443",
            "https://sub.app.example",
            "https://app.example.evil",
            "http://localhost:8081",
            "null",
            "",
        ] {
            assert!(!allowed.allows(origin), "{origin}");
        }
    }

    #[test]
    fn a_star_allows_any_origin() {
        let any = AllowedOrigins::parse(&["https://a.example", "*"]).unwrap();
        assert_eq!(any, AllowedOrigins::Any);
        assert!(any.allows("null") && any.allows("https://b.example"));
    }

    #[test]
    fn anything_but_an_origin_is_refused() {
        for bad in [
            "app.example",
            "ftp://app.example",
            "https://",
            "https://app.example/path",
            "https://app.example?q",
            "https://user@app.example",
            "https://app.example:",
            "https://app.example:12a",
            "https://:443",
            "*.example.com",
            "null",
        ] {
            assert!(AllowedOrigins::parse(&[bad]).is_err(), "{bad}");
        }
    }
}
