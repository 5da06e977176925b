//! How a client authenticates ([`TokenSource`]) and behaves ([`Options`]).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

type Refresh = Arc<dyn Fn() -> Pin<Box<dyn Future<Output = Option<String>> + Send>> + Send + Sync>;

/// Where the client's bearer token comes from.
///
/// A fixed token (`"dev-alice".into()`) is sent as it is. A refreshing
/// source is asked for a token when the client connects, before every
/// reconnection, and once more when an append is answered `401`; its
/// `None` keeps the token the client has.
#[derive(Clone, Default)]
pub struct TokenSource {
    pub(crate) token: Option<String>,
    pub(crate) refresh: Option<Refresh>,
}

impl TokenSource {
    /// No token: the server sees an anonymous caller.
    pub fn none() -> TokenSource {
        TokenSource::default()
    }

    /// The same token for the client's whole life.
    pub fn fixed(token: impl Into<String>) -> TokenSource {
        TokenSource {
            token: Some(token.into()),
            refresh: None,
        }
    }

    /// A token fetched by `refresh` (from an identity provider, a file, a
    /// secret store) at connection and before every reconnection.
    pub fn refreshing<F, Fut>(refresh: F) -> TokenSource
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Option<String>> + Send + 'static,
    {
        TokenSource {
            token: None,
            refresh: Some(Arc::new(move || Box::pin(refresh()))),
        }
    }
}

impl From<&str> for TokenSource {
    fn from(token: &str) -> TokenSource {
        TokenSource::fixed(token)
    }
}

impl From<String> for TokenSource {
    fn from(token: String) -> TokenSource {
        TokenSource::fixed(token)
    }
}

impl fmt::Debug for TokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenSource")
            .field("token", &self.token.as_ref().map(|_| "…"))
            .field("refreshing", &self.refresh.is_some())
            .finish()
    }
}

/// Tuning for [`crate::Client::connect_with`]; the defaults suit most
/// deployments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Options {
    /// The ceiling of the first reconnection delay (default 500 ms); each
    /// further attempt doubles it, the upper half of it random jitter.
    pub backoff_base: Duration,
    /// The longest reconnection delay (default 30 s).
    pub backoff_cap: Duration,
    /// How long a connection attempt or an HTTP request may take before it
    /// counts as failed (default 30 s).
    pub request_timeout: Duration,
    /// The seed of the jitter and the idempotency keys (default: drawn from
    /// the operating system). Give every client a different one.
    pub seed: Option<u64>,
    /// For `https://` servers: trust the operating system's root
    /// certificates (default true).
    pub system_roots: bool,
    /// For `https://` servers: more root certificates to trust (DER), for
    /// a private certificate authority or a self-signed server.
    pub root_certificates: Vec<Vec<u8>>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            backoff_base: Duration::from_millis(500),
            backoff_cap: Duration::from_secs(30),
            request_timeout: Duration::from_secs(30),
            seed: None,
            system_roots: true,
            root_certificates: Vec::new(),
        }
    }
}
