//! The broker's pub/sub connection: takes every other node's messages off
//! the bus and feeds them to the engine, and sees this node's probes come
//! back.
//!
//! After every (re)subscription the engine is asked for a full check
//! (threads read again, presence reloaded): Redis pub/sub keeps nothing
//! for a disconnected subscriber. A connection whose probes stop coming
//! back is treated as wedged and replaced.

use std::sync::Arc;
use std::time::Duration;

use bubble_core::cluster::Envelope;
use futures_util::StreamExt as _;
use tokio::sync::mpsc;

use super::health::PROBE_STALE;
use super::keys::Keys;
use super::{Backoff, Health, NodeInfo};
use crate::driver::Command;

/// How often a subscribed reader checks that its probes come back.
const WEDGE_CHECK: Duration = Duration::from_secs(1);

/// The reader task's state.
pub(crate) struct Reader {
    pub(crate) client: redis::Client,
    pub(crate) keys: Keys,
    pub(crate) node: Arc<NodeInfo>,
    pub(crate) health: Arc<Health>,
    pub(crate) inbox: mpsc::Sender<Command>,
}

impl Reader {
    /// Runs until the engine's inbox closes.
    pub(crate) async fn run(self) {
        let mut backoff = Backoff::default();
        let mut ever_subscribed = false;
        loop {
            backoff.wait().await;
            match self.subscribe().await {
                Ok(stream) => {
                    if ever_subscribed {
                        self.health.reconnected();
                    }
                    ever_subscribed = true;
                    backoff.reset();
                    self.health.subscribed(true);
                    if self.inbox.send(Command::ClusterCheck).await.is_err() {
                        return;
                    }
                    let engine_alive = self.listen(stream).await;
                    self.health.subscribed(false);
                    if !engine_alive {
                        return;
                    }
                    tracing::warn!("broker subscription lost: resubscribing");
                }
                Err(e) => {
                    tracing::warn!(error = %e, "broker subscription failed");
                }
            }
            backoff.failed();
        }
    }

    async fn subscribe(&self) -> redis::RedisResult<redis::aio::PubSubStream> {
        let connect = self.client.get_async_pubsub();
        let mut pubsub = tokio::time::timeout(Duration::from_secs(2), connect)
            .await
            .map_err(|_| {
                redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::TimedOut))
            })??;
        pubsub.subscribe(self.keys.bus()).await?;
        pubsub.subscribe(self.keys.probe(&self.node.id)).await?;
        Ok(pubsub.into_on_message())
    }

    /// Feeds messages until the connection ends or wedges (`true`), or the
    /// engine is gone (`false`).
    async fn listen(&self, mut stream: redis::aio::PubSubStream) -> bool {
        let probe = self.keys.probe(&self.node.id);
        let subscribed_at = tokio::time::Instant::now();
        let mut check = tokio::time::interval(WEDGE_CHECK);
        loop {
            tokio::select! {
                message = stream.next() => {
                    let Some(message) = message else {
                        return true;
                    };
                    if message.get_channel_name() == probe {
                        self.health.probe_seen();
                        continue;
                    }
                    let Some(envelope) = Envelope::decode(message.get_payload_bytes()) else {
                        tracing::warn!("unreadable message on the broker's bus");
                        continue;
                    };
                    if envelope.node == self.node.id {
                        continue;
                    }
                    self.health.received();
                    let command = Command::Remote {
                        node: envelope.node,
                        message: envelope.message,
                    };
                    if self.inbox.send(command).await.is_err() {
                        return false;
                    }
                }
                _ = check.tick() => {
                    let settled = subscribed_at.elapsed() > PROBE_STALE;
                    if settled && self.health.probe_age() > PROBE_STALE {
                        tracing::warn!("broker probes stopped coming back: resubscribing");
                        return true;
                    }
                }
            }
        }
    }
}
