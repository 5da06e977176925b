//! Fetches the JWKS when the engine asks
//! ([`Output::FetchKeys`](bubble_core::Output::FetchKeys)): reads its file,
//! or GETs its URL (`http://` or `https://`, checked against the system's
//! trusted roots) within [`FETCH_TIMEOUT`], taking at most
//! [`MAX_DOCUMENT_BYTES`] of a `2xx` answer. The document is parsed by the
//! core ([`KeySet::parse`]) and handed back as
//! [`Input::KeysLoaded`](bubble_core::Input::KeysLoaded); any failure is
//! logged and reported as [`Input::KeysFailed`](bubble_core::Input::KeysFailed).
//! When and how often to fetch is the engine's decision. The HTTP client,
//! with the system's trusted roots, is built once, with the fetcher.

use std::path::PathBuf;
use std::time::Duration;

use bubble_core::auth::KeySet;
use bytes::Bytes;
use http_body_util::{BodyExt as _, Empty, Limited};
use hyper::Uri;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::runtime::Handle;
use tokio::sync::mpsc;

use crate::driver::Command;

/// How long one fetch may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest JWKS document read.
const MAX_DOCUMENT_BYTES: usize = 1024 * 1024;

type HttpsClient = Client<HttpsConnector<HttpConnector>, Empty<Bytes>>;

/// Where the JWKS comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JwksSource {
    /// A URL, fetched with GET.
    Url(Uri),
    /// A file, read again at each fetch.
    File(PathBuf),
}

impl std::fmt::Display for JwksSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JwksSource::Url(uri) => write!(f, "{uri}"),
            JwksSource::File(path) => write!(f, "{}", path.display()),
        }
    }
}

/// Runs the engine's fetches on the server's runtime.
pub(crate) struct KeyFetcher {
    source: Option<JwksSource>,
    /// The client for a URL source, or why it could not be built.
    client: Result<HttpsClient, String>,
    runtime: Handle,
    inbox: mpsc::Sender<Command>,
}

impl KeyFetcher {
    /// Fetches from `source` on `runtime`, reporting to `inbox`.
    pub(crate) fn new(
        source: Option<JwksSource>,
        runtime: Handle,
        inbox: mpsc::Sender<Command>,
    ) -> KeyFetcher {
        let client = match &source {
            Some(JwksSource::Url(_)) => client(),
            _ => Err("no URL to fetch".to_owned()),
        };
        KeyFetcher {
            source,
            client,
            runtime,
            inbox,
        }
    }

    /// Starts one fetch without waiting for it.
    pub(crate) fn fetch(&self) {
        let inbox = self.inbox.clone();
        let Some(source) = self.source.clone() else {
            tracing::error!("the engine asked for a key set, and none is configured");
            self.runtime.spawn(async move {
                let _ = inbox.send(Command::KeysFailed).await;
            });
            return;
        };
        let client = self.client.clone();
        self.runtime.spawn(async move {
            let document = match tokio::time::timeout(FETCH_TIMEOUT, read(&source, client)).await {
                Ok(read) => read,
                Err(_) => Err("timed out".to_owned()),
            };
            let parsed = document.and_then(|text| KeySet::parse(&text).map_err(|e| e.to_string()));
            let command = match parsed {
                Ok(keys) => {
                    tracing::info!(%source, keys = keys.len(), "JWKS loaded");
                    Command::KeysLoaded { keys }
                }
                Err(reason) => {
                    tracing::warn!(%source, %reason, "JWKS not loaded: keeping the keys in use");
                    Command::KeysFailed
                }
            };
            let _ = inbox.send(command).await;
        });
    }
}

async fn read(source: &JwksSource, client: Result<HttpsClient, String>) -> Result<String, String> {
    match source {
        JwksSource::File(path) => {
            let path = path.clone();
            tokio::task::spawn_blocking(move || std::fs::read_to_string(path))
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())
        }
        JwksSource::Url(uri) => get(&client?, uri).await,
    }
}

/// An http/https client checking certificates against the system's roots.
fn client() -> Result<HttpsClient, String> {
    let https = hyper_rustls::HttpsConnectorBuilder::new()
        .with_native_roots()
        .map_err(|e| format!("loading the system's trusted roots: {e}"))?
        .https_or_http()
        .enable_http1()
        .build();
    Ok(Client::builder(TokioExecutor::new()).build(https))
}

async fn get(client: &HttpsClient, uri: &Uri) -> Result<String, String> {
    let request = hyper::Request::get(uri.clone())
        .header("accept", "application/json")
        .body(Empty::new())
        .map_err(|e| e.to_string())?;
    let response = client.request(request).await.map_err(|e| e.to_string())?;
    if !response.status().is_success() {
        return Err(format!("status {}", response.status()));
    }
    let body = Limited::new(response.into_body(), MAX_DOCUMENT_BYTES)
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    String::from_utf8(body.to_vec()).map_err(|_| "the document is not UTF-8".to_owned())
}
