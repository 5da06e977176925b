//! Pusher webhooks: POSTs the signed batches the engine decides
//! ([`Output::Webhook`](bubble_core::Output::Webhook)), one task per
//! endpoint so that batches of one endpoint keep their order and a slow or
//! unreachable endpoint holds up nothing else. A failed POST (no answer
//! within [`POST_TIMEOUT`], or a status other than 2xx) is retried with a
//! doubling back-off up to [`MAX_BACKOFF`] until the endpoint takes it.
//! Each endpoint queues at most [`QUEUE_BATCHES`] batches; past that, new
//! batches are dropped (and logged) rather than buffered without bound.
//! Plain `http://` endpoints only.

use std::collections::HashMap;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::Uri;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use tokio::runtime::Handle;
use tokio::sync::mpsc;

/// Batches an endpoint may have waiting.
const QUEUE_BATCHES: usize = 10_000;
/// How long one POST may take.
const POST_TIMEOUT: Duration = Duration::from_secs(10);
/// The first retry's delay.
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
/// The longest delay between retries.
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// One signed batch.
struct Batch {
    key: String,
    signature: String,
    body: String,
}

/// The endpoints' delivery tasks, started on first use on the server's
/// runtime (the engine's own has no I/O).
pub(crate) struct Webhooks {
    runtime: Handle,
    endpoints: HashMap<String, mpsc::Sender<Batch>>,
}

impl Webhooks {
    /// Delivery tasks on `runtime`.
    pub(crate) fn new(runtime: Handle) -> Webhooks {
        Webhooks {
            runtime,
            endpoints: HashMap::new(),
        }
    }

    /// Queues a batch for `url` without waiting.
    pub(crate) fn send(&mut self, url: String, key: String, signature: String, body: String) {
        let sender = self.endpoints.entry(url.clone()).or_insert_with(|| {
            let (sender, batches) = mpsc::channel(QUEUE_BATCHES);
            self.runtime.spawn(deliver(url.clone(), batches));
            sender
        });
        let batch = Batch {
            key,
            signature,
            body,
        };
        if sender.try_send(batch).is_err() {
            tracing::warn!(%url, "webhook queue full: batch dropped");
        }
    }
}

/// Delivers `url`'s batches in order, each until it is taken.
async fn deliver(url: String, mut batches: mpsc::Receiver<Batch>) {
    let Ok(uri) = url.parse::<Uri>() else {
        tracing::error!(%url, "webhook url is not a valid URI: its batches are dropped");
        while batches.recv().await.is_some() {}
        return;
    };
    let client = Client::builder(TokioExecutor::new()).build_http::<Full<Bytes>>();
    while let Some(batch) = batches.recv().await {
        let mut backoff = FIRST_BACKOFF;
        loop {
            match post(&client, &uri, &batch).await {
                Ok(()) => break,
                Err(reason) => {
                    tracing::debug!(%url, %reason, ?backoff, "webhook not delivered: retrying");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }
}

async fn post(
    client: &Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>,
    uri: &Uri,
    batch: &Batch,
) -> Result<(), String> {
    let request = hyper::Request::post(uri.clone())
        .header("content-type", "application/json")
        .header("x-pusher-key", &batch.key)
        .header("x-pusher-signature", &batch.signature)
        .body(Full::new(Bytes::from(batch.body.clone())))
        .map_err(|e| e.to_string())?;
    let response = tokio::time::timeout(POST_TIMEOUT, client.request(request))
        .await
        .map_err(|_| "timed out".to_owned())?
        .map_err(|e| e.to_string())?;
    if response.status().is_success() {
        Ok(())
    } else {
        Err(format!("status {}", response.status()))
    }
}
