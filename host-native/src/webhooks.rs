//! Pusher webhooks: POSTs the signed batches the engine decides
//! ([`Output::Webhook`](bubble_core::Output::Webhook)), one task per
//! endpoint so that batches of one endpoint keep their order and a slow or
//! unreachable endpoint holds up nothing else. A failed POST (no answer
//! within [`POST_TIMEOUT`], or a status other than 2xx) is retried with a
//! doubling back-off up to [`MAX_BACKOFF`] until the endpoint takes it.
//! Each endpoint queues at most `[webhooks] queue_batches` batches; past
//! that, new batches are dropped (logged, and counted in
//! `bubble_webhook_batches_dropped_total`) rather than buffered without
//! bound. `http://` and `https://` endpoints: TLS by rustls, trusting the
//! bundled Mozilla roots and the certificates of `[webhooks] ca_file`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::Uri;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;
use tokio::runtime::Handle;
use tokio::sync::mpsc;

use crate::config::WebhookSettings;

/// How long one POST may take.
const POST_TIMEOUT: Duration = Duration::from_secs(10);
/// The first retry's delay.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// The longest delay between retries.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

type HttpsClient = Client<HttpsConnector<HttpConnector>, Full<Bytes>>;

/// One signed batch.
struct Batch {
    key: String,
    signature: String,
    body: String,
}

/// Webhook delivery counters, for `/metrics`.
#[derive(Debug, Default)]
struct WebhookStats {
    delivered: AtomicU64,
    retried: AtomicU64,
    dropped: AtomicU64,
}

impl WebhookStats {
    /// Appends the counters in Prometheus text format.
    fn render(&self, out: &mut String) {
        use std::fmt::Write as _;
        for (name, help, value) in [
            (
                "bubble_webhook_batches_delivered_total",
                "Webhook batches an endpoint took (2xx).",
                &self.delivered,
            ),
            (
                "bubble_webhook_posts_failed_total",
                "Webhook POSTs that failed and were retried.",
                &self.retried,
            ),
            (
                "bubble_webhook_batches_dropped_total",
                "Webhook batches dropped because their endpoint's queue was full.",
                &self.dropped,
            ),
        ] {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
                value.load(Ordering::Relaxed)
            );
        }
    }
}

/// Why the webhook client could not be built.
#[derive(Debug, thiserror::Error)]
pub(crate) enum WebhookSetupError {
    /// `ca_file` could not be read or holds no certificate.
    #[error("webhooks.ca_file {path}: {reason}")]
    CaFile {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// rustls refused its configuration.
    #[error("webhook TLS: {0}")]
    Tls(String),
}

/// The endpoints' delivery tasks, started on first use on the server's
/// runtime (the engine's own has no I/O).
pub(crate) struct Webhooks {
    runtime: Handle,
    client: HttpsClient,
    queue_batches: usize,
    stats: Arc<WebhookStats>,
    endpoints: HashMap<String, mpsc::Sender<Batch>>,
}

impl Webhooks {
    /// Delivery tasks on `runtime`, as `settings` say.
    pub(crate) fn new(
        runtime: Handle,
        settings: &WebhookSettings,
    ) -> Result<Webhooks, WebhookSetupError> {
        Ok(Webhooks {
            runtime,
            client: client(settings)?,
            queue_batches: settings.queue_batches,
            stats: Arc::default(),
            endpoints: HashMap::new(),
        })
    }

    /// Appends the delivery counters in Prometheus text format.
    pub(crate) fn render(&self, out: &mut String) {
        self.stats.render(out);
    }

    /// Queues a batch for `url` without waiting.
    pub(crate) fn send(&mut self, url: String, key: String, signature: String, body: String) {
        let sender = self.endpoints.entry(url.clone()).or_insert_with(|| {
            let (sender, batches) = mpsc::channel(self.queue_batches);
            let endpoint = Endpoint {
                url: url.clone(),
                client: self.client.clone(),
                stats: self.stats.clone(),
            };
            self.runtime.spawn(endpoint.deliver(batches));
            sender
        });
        let batch = Batch {
            key,
            signature,
            body,
        };
        if sender.try_send(batch).is_err() {
            self.stats.dropped.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(%url, "webhook queue full: batch dropped");
        }
    }
}

/// An HTTP/1.1 client for `http://` and `https://` endpoints.
fn client(settings: &WebhookSettings) -> Result<HttpsClient, WebhookSetupError> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = &settings.ca_file {
        let failed = |reason: String| WebhookSetupError::CaFile {
            path: path.display().to_string(),
            reason,
        };
        let certs = CertificateDer::pem_file_iter(path)
            .map_err(|e| failed(e.to_string()))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| failed(e.to_string()))?;
        if certs.is_empty() {
            return Err(failed("no certificate in it".into()));
        }
        for cert in certs {
            roots.add(cert).map_err(|e| failed(e.to_string()))?;
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| WebhookSetupError::Tls(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(tls)
        .https_or_http()
        .enable_http1()
        .build();
    Ok(Client::builder(TokioExecutor::new()).build(connector))
}

/// One endpoint's delivery task.
struct Endpoint {
    url: String,
    client: HttpsClient,
    stats: Arc<WebhookStats>,
}

impl Endpoint {
    /// Delivers the batches in order, each until it is taken.
    async fn deliver(self, mut batches: mpsc::Receiver<Batch>) {
        let url = &self.url;
        let Ok(uri) = url.parse::<Uri>() else {
            tracing::error!(%url, "webhook url is not a valid URI: its batches are dropped");
            while batches.recv().await.is_some() {}
            return;
        };
        while let Some(batch) = batches.recv().await {
            let mut backoff = FIRST_BACKOFF;
            loop {
                match self.post(&uri, &batch).await {
                    Ok(()) => {
                        self.stats.delivered.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                    Err(reason) => {
                        self.stats.retried.fetch_add(1, Ordering::Relaxed);
                        tracing::debug!(%url, %reason, ?backoff, "webhook not delivered: retrying");
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(MAX_BACKOFF);
                    }
                }
            }
        }
    }

    async fn post(&self, uri: &Uri, batch: &Batch) -> Result<(), String> {
        let request = hyper::Request::post(uri.clone())
            .header("content-type", "application/json")
            .header("x-pusher-key", &batch.key)
            .header("x-pusher-signature", &batch.signature)
            .body(Full::new(Bytes::from(batch.body.clone())))
            .map_err(|e| e.to_string())?;
        let response = tokio::time::timeout(POST_TIMEOUT, self.client.request(request))
            .await
            .map_err(|_| "timed out".to_owned())?
            .map_err(|e| e.to_string())?;
        if response.status().is_success() {
            Ok(())
        } else {
            Err(format!("status {}", response.status()))
        }
    }
}
