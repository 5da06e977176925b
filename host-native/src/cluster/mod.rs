//! Cluster mode: many nodes on one PostgreSQL store, linked by Redis.
//!
//! The engine says what other nodes must learn
//! ([`Output::Broadcast`](bubble_core::Output::Broadcast)) and asks for
//! publication keys to be claimed ([`Output::Claim`](bubble_core::Output::Claim));
//! this module carries both to Redis ([`writer`]) and brings every other
//! node's messages back ([`reader`]). A timer beats every
//! [`BEAT_INTERVAL`]; another asks the engine for a check every
//! [`CHECK_INTERVAL`]: it reads every subscribed thread again
//! ([`Input::Recheck`](bubble_core::Input::Recheck)) and reconciles
//! channel state (presence members, subscriber counts) with Redis, which
//! repairs whatever messages were lost. The
//! layout of the keys is in [`keys`]; `docs/cluster.md` has the rest.

use std::sync::Arc;
use std::time::Duration;

use bubble_core::cluster::{ClusterMessage, NodeState};
use bubble_core::ClaimId;
use tokio::sync::mpsc;

mod health;
mod keys;
mod reader;
mod writer;

pub(crate) use health::Health;
use writer::BrokerCmd;

use crate::driver::Command;
use crate::store::StoreSpec;

/// How often a node beats: refreshes its liveness, probes its pub/sub
/// connection and removes the channel state of nodes that stopped.
pub(crate) const BEAT_INTERVAL: Duration = Duration::from_secs(1);

/// How often a node on a shared store checks what it may have missed:
/// subscribed threads against the store, channel state against Redis.
pub(crate) const CHECK_INTERVAL: Duration = Duration::from_secs(2);

/// The longest wait between two connection attempts.
const BACKOFF_CAP: Duration = Duration::from_secs(5);

/// The broker setting (`--broker`, `BUBBLE_BROKER`, `broker =`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BrokerSpec {
    /// A single node: nothing to link.
    None,
    /// Redis at this URL.
    Redis(String),
}

/// A `--broker` value that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown broker {0:?}: expected \"none\" or \"redis://HOST:PORT\"")]
pub struct BrokerSpecError(String);

impl BrokerSpec {
    /// Parses `none` (or nothing) and `redis://…` / `rediss://…`.
    pub fn parse(raw: Option<&str>) -> Result<BrokerSpec, BrokerSpecError> {
        match raw.map(str::trim) {
            None | Some("" | "none") => Ok(BrokerSpec::None),
            Some(url) if url.starts_with("redis://") || url.starts_with("rediss://") => {
                redis::Client::open(url).map_err(|e| BrokerSpecError(format!("{url}: {e}")))?;
                Ok(BrokerSpec::Redis(url.to_owned()))
            }
            Some(other) => Err(BrokerSpecError(other.to_owned())),
        }
    }
}

/// The name of the deployment `store` belongs to (the PostgreSQL schema
/// every node shares), or `None` for a store nodes cannot share.
pub(crate) fn deployment(store: &StoreSpec) -> Option<String> {
    match store {
        StoreSpec::Postgres { schema, .. } => Some(schema.clone()),
        StoreSpec::Memory | StoreSpec::Sqlite(_) => None,
    }
}

/// Who this node is and where its deployment's keys live.
#[derive(Debug, Clone)]
pub struct ClusterSettings {
    /// The Redis URL.
    pub url: String,
    /// Prefix of every key and channel of the deployment.
    pub prefix: String,
    /// This node's id, unique in the deployment.
    pub node: String,
}

/// This node's identity, shared by the broker's tasks.
#[derive(Debug)]
pub(crate) struct NodeInfo {
    /// The node id.
    pub(crate) id: String,
}

/// Exponential backoff with jitter between connection attempts.
#[derive(Debug, Default)]
pub(crate) struct Backoff {
    failures: u32,
    next: Option<tokio::time::Instant>,
}

impl Backoff {
    /// The wait after `failures` failures: 100 ms doubling to
    /// [`BACKOFF_CAP`], each with up to half of it added at random.
    fn delay(failures: u32) -> Duration {
        if failures == 0 {
            return Duration::ZERO;
        }
        let base = Duration::from_millis(100)
            .saturating_mul(1 << failures.min(7).saturating_sub(1))
            .min(BACKOFF_CAP);
        let jitter = getrandom::u64().unwrap_or(0) % (base.as_millis() as u64 / 2 + 1);
        base + Duration::from_millis(jitter)
    }

    /// Records a failure.
    pub(crate) fn failed(&mut self) {
        self.failures = self.failures.saturating_add(1);
        self.next = Some(tokio::time::Instant::now() + Backoff::delay(self.failures));
    }

    /// Records a success.
    pub(crate) fn reset(&mut self) {
        *self = Backoff::default();
    }

    /// Whether the next attempt may be made now.
    pub(crate) fn due(&self) -> bool {
        self.next.is_none_or(|at| tokio::time::Instant::now() >= at)
    }

    /// Waits until the next attempt may be made.
    pub(crate) async fn wait(&self) {
        if let Some(at) = self.next {
            tokio::time::sleep_until(at).await;
        }
    }
}

/// The engine's side of the broker.
#[derive(Debug, Clone)]
pub(crate) struct Broker {
    commands: mpsc::UnboundedSender<BrokerCmd>,
}

impl Broker {
    /// Starts the writer, the reader and the check timer; they feed the
    /// engine through `inbox`.
    pub(crate) fn start(
        settings: &ClusterSettings,
        inbox: mpsc::Sender<Command>,
        health: Arc<Health>,
    ) -> Result<Broker, redis::RedisError> {
        let client = redis::Client::open(settings.url.as_str())?;
        let keys = keys::Keys::new(&settings.prefix);
        let node = Arc::new(NodeInfo {
            id: settings.node.clone(),
        });
        let (commands, queue) = mpsc::unbounded_channel();
        let writer = writer::Writer {
            client: client.clone(),
            keys: keys.clone(),
            node: node.clone(),
            health: health.clone(),
            inbox: inbox.clone(),
        };
        tokio::spawn(writer.run(queue));
        let reader = reader::Reader {
            client,
            keys,
            node,
            health,
            inbox: inbox.clone(),
        };
        tokio::spawn(reader.run());
        let broker = Broker { commands };
        tokio::spawn(tick(broker.clone()));
        Ok(broker)
    }

    fn send(&self, command: BrokerCmd) {
        // The writer outlives the engine; a send fails only at exit.
        let _ = self.commands.send(command);
    }

    /// Publishes `message` to the other nodes.
    pub(crate) fn announce(&self, message: ClusterMessage) {
        self.send(BrokerCmd::Announce(message));
    }

    /// Claims a publication key; the outcome comes back as
    /// [`Command::Claimed`].
    pub(crate) fn claim(
        &self,
        claim: ClaimId,
        app_id: String,
        key: String,
        value: String,
        ttl_ms: u64,
    ) {
        self.send(BrokerCmd::Claim {
            claim,
            app_id,
            key,
            value,
            ttl_ms,
        });
    }

    /// Makes this node's channel state `state`, then reloads the others'.
    pub(crate) fn reconcile(&self, state: NodeState) {
        self.send(BrokerCmd::Reconcile { state });
    }
}

/// Beats every [`BEAT_INTERVAL`].
async fn tick(broker: Broker) {
    let mut every = tokio::time::interval(BEAT_INTERVAL);
    loop {
        every.tick().await;
        if broker.commands.send(BrokerCmd::Beat).is_err() {
            return;
        }
    }
}

/// Asks the engine every [`CHECK_INTERVAL`] to check what it may have
/// missed of a store other nodes write too: subscribed threads are read
/// again (a change the broker lost, or a reload that failed while the store
/// was unreachable), and presence is reconciled when there is a broker.
pub(crate) async fn check_periodically(inbox: mpsc::Sender<Command>) {
    let mut every = tokio::time::interval(CHECK_INTERVAL);
    every.tick().await;
    loop {
        every.tick().await;
        if inbox.send(Command::ClusterCheck).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broker_specs() {
        assert_eq!(BrokerSpec::parse(None), Ok(BrokerSpec::None));
        assert_eq!(BrokerSpec::parse(Some("none")), Ok(BrokerSpec::None));
        assert_eq!(
            BrokerSpec::parse(Some("redis://127.0.0.1:6379")),
            Ok(BrokerSpec::Redis("redis://127.0.0.1:6379".into()))
        );
        assert!(BrokerSpec::parse(Some("nats://x")).is_err());
        assert!(BrokerSpec::parse(Some("redis://")).is_err());
    }

    #[test]
    fn backoff_grows_to_its_cap() {
        assert_eq!(Backoff::delay(0), Duration::ZERO);
        let first = Backoff::delay(1);
        assert!(first >= Duration::from_millis(100) && first <= Duration::from_millis(150));
        for n in 7..40 {
            let d = Backoff::delay(n);
            assert!(d >= BACKOFF_CAP && d <= BACKOFF_CAP * 3 / 2, "{d:?}");
        }
    }
}
