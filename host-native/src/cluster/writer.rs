//! The broker's command connection: publishes this node's messages, keeps
//! its channel state (presence members, subscriber counts, and the `seq`
//! they reflect) and liveness, claims publication keys, and removes the
//! state of nodes that stopped.
//!
//! One task owns the connection and takes commands in the order the engine
//! issued them, so a node's rows and messages change in that order too.
//! Consecutive messages and claims go to Redis as one pipeline. While
//! Redis is unreachable, messages are dropped (counted; the next check
//! repairs what they carried), claims are answered `Unavailable`, and the
//! connection is tried again with backoff.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use bubble_core::cluster::{ClaimOutcome, ClusterMessage, Envelope, NodeState};
use bubble_core::ClaimId;
use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Pipeline, RedisResult};
use tokio::sync::mpsc;

use super::keys::{
    count_field, member_field, member_value, node_state, state_fields, Keys, SEQ_FIELD, SINCE_FIELD,
};
use super::{Backoff, Health, NodeInfo};
use crate::driver::Command;

/// How long a node's liveness key lives without a refresh: a node that
/// stops is declared gone this long after its last beat at most.
pub(crate) const NODE_TTL: Duration = Duration::from_secs(5);

/// How long one node holds the job of removing a gone node's state.
const REAP_CLAIM: Duration = Duration::from_secs(30);

/// Commands taken per pipeline.
const COMMANDS_PER_PIPELINE: usize = 512;

/// What the writer does.
#[derive(Debug)]
pub(crate) enum BrokerCmd {
    /// Publish a message (and keep the state it describes).
    Announce(ClusterMessage),
    /// Claim a publication key for the cluster.
    Claim {
        claim: ClaimId,
        app_id: String,
        key: String,
        value: String,
        ttl_ms: u64,
    },
    /// Make this node's state exactly `state`, then load every other
    /// node's for the engine.
    Reconcile { state: NodeState },
    /// Refresh liveness, send the probe, remove gone nodes' state.
    Beat,
}

/// The writer task's state.
pub(crate) struct Writer {
    pub(crate) client: redis::Client,
    pub(crate) keys: Keys,
    pub(crate) node: Arc<NodeInfo>,
    pub(crate) health: Arc<Health>,
    pub(crate) inbox: mpsc::Sender<Command>,
}

impl Writer {
    /// Runs until the engine drops its sender.
    pub(crate) async fn run(self, mut commands: mpsc::UnboundedReceiver<BrokerCmd>) {
        let mut conn: Option<MultiplexedConnection> = None;
        let mut backoff = Backoff::default();
        let mut ever_connected = false;
        let mut batch = Vec::with_capacity(COMMANDS_PER_PIPELINE);
        while commands.recv_many(&mut batch, COMMANDS_PER_PIPELINE).await > 0 {
            if conn.is_none() && backoff.due() {
                conn = self.connect().await;
                match &conn {
                    Some(_) => {
                        backoff.reset();
                        if ever_connected {
                            self.health.reconnected();
                        }
                        ever_connected = true;
                    }
                    None => backoff.failed(),
                }
                self.health.writer(conn.is_some());
            }
            let mut pending = std::mem::take(&mut batch).into_iter();
            if let Some(c) = conn.as_mut() {
                if let Err(e) = self.perform(c, &mut pending).await {
                    tracing::warn!(error = %e, "broker command failed: reconnecting");
                    conn = None;
                    self.health.writer(false);
                    backoff.failed();
                }
            }
            // Whatever is left could not be performed.
            for command in pending {
                self.fail(command).await;
            }
        }
    }

    async fn connect(&self) -> Option<MultiplexedConnection> {
        let config = AsyncConnectionConfig::new()
            .set_connection_timeout(Some(Duration::from_secs(2)))
            .set_response_timeout(Some(Duration::from_secs(2)));
        match self
            .client
            .get_multiplexed_async_connection_with_config(&config)
            .await
        {
            // Alive from the first command on: a node whose state others
            // read is never taken for a stopped one.
            Ok(mut conn) => self.alive(&mut conn).await.ok().map(|()| conn),
            Err(e) => {
                tracing::warn!(error = %e, "broker unreachable");
                None
            }
        }
    }

    /// Performs commands in order until they run out or one fails.
    async fn perform(
        &self,
        conn: &mut MultiplexedConnection,
        commands: &mut std::vec::IntoIter<BrokerCmd>,
    ) -> RedisResult<()> {
        let mut pipe = redis::pipe();
        let mut claims: Vec<ClaimId> = Vec::new();
        let mut published = 0;
        while let Some(command) = commands.as_slice().first() {
            match command {
                BrokerCmd::Announce(_) | BrokerCmd::Claim { .. } => {
                    let Some(command) = commands.next() else {
                        break;
                    };
                    self.pipeline(&mut pipe, &mut claims, &mut published, command);
                }
                BrokerCmd::Reconcile { .. } | BrokerCmd::Beat => {
                    self.flush(conn, &mut pipe, &mut claims, &mut published)
                        .await?;
                    match commands.next() {
                        Some(BrokerCmd::Reconcile { state }) => {
                            self.reconcile(conn, &state).await?;
                        }
                        Some(_) => self.beat(conn).await?,
                        None => break,
                    }
                }
            }
        }
        self.flush(conn, &mut pipe, &mut claims, &mut published)
            .await
    }

    /// Adds a message or a claim to the pipeline.
    fn pipeline(
        &self,
        pipe: &mut Pipeline,
        claims: &mut Vec<ClaimId>,
        published: &mut u64,
        command: BrokerCmd,
    ) {
        match command {
            BrokerCmd::Announce(message) => {
                self.keep_state(pipe, &message);
                pipe.cmd("PUBLISH")
                    .arg(self.keys.bus())
                    .arg(self.envelope(message))
                    .ignore();
                *published += 1;
            }
            BrokerCmd::Claim {
                claim,
                app_id,
                key,
                value,
                ttl_ms,
            } => {
                pipe.cmd("SET")
                    .arg(self.keys.idempotency(&app_id, &key))
                    .arg(value)
                    .arg("NX")
                    .arg("GET")
                    .arg("PX")
                    .arg(ttl_ms.max(1));
                claims.push(claim);
            }
            BrokerCmd::Reconcile { .. } | BrokerCmd::Beat => {}
        }
    }

    /// Adds to the pipeline the change `message` makes to this node's
    /// state, before the message itself is published (a node that reads
    /// the state after the message sees the change).
    fn keep_state(&self, pipe: &mut Pipeline, message: &ClusterMessage) {
        let own = self.keys.state(&self.node.id);
        if let ClusterMessage::Hello { since } = message {
            pipe.cmd("HSET")
                .arg(&own)
                .arg(SINCE_FIELD)
                .arg(since)
                .ignore();
            return;
        }
        let Some(seq) = message.seq() else {
            return;
        };
        pipe.cmd("SADD")
            .arg(self.keys.nodes())
            .arg(&self.node.id)
            .ignore();
        match message {
            ClusterMessage::MemberJoined {
                app_id,
                channel,
                user_id,
                user_info,
                ..
            } => {
                pipe.cmd("HSET")
                    .arg(&own)
                    .arg(member_field(app_id, channel, user_id))
                    .arg(member_value(user_info.as_deref()))
                    .ignore();
            }
            ClusterMessage::MemberLeft {
                app_id,
                channel,
                user_id,
                ..
            } => {
                pipe.cmd("HDEL")
                    .arg(&own)
                    .arg(member_field(app_id, channel, user_id))
                    .ignore();
            }
            ClusterMessage::Subscribers {
                app_id,
                channel,
                count: 0,
                ..
            } => {
                pipe.cmd("HDEL")
                    .arg(&own)
                    .arg(count_field(app_id, channel))
                    .ignore();
            }
            ClusterMessage::Subscribers {
                app_id,
                channel,
                count,
                ..
            } => {
                pipe.cmd("HSET")
                    .arg(&own)
                    .arg(count_field(app_id, channel))
                    .arg(count)
                    .ignore();
            }
            _ => {}
        }
        pipe.cmd("HSET").arg(&own).arg(SEQ_FIELD).arg(seq).ignore();
    }

    /// Sends the pipeline and answers its claims.
    async fn flush(
        &self,
        conn: &mut MultiplexedConnection,
        pipe: &mut Pipeline,
        claims: &mut Vec<ClaimId>,
        published: &mut u64,
    ) -> RedisResult<()> {
        if pipe.is_empty() {
            return Ok(());
        }
        let sent = std::mem::replace(pipe, redis::pipe());
        let answers: Vec<Option<String>> = match sent.query_async(conn).await {
            Ok(answers) => answers,
            Err(e) => {
                self.health.dropped(std::mem::take(published));
                for claim in claims.drain(..) {
                    self.claimed(claim, ClaimOutcome::Unavailable).await;
                }
                return Err(e);
            }
        };
        self.health.sent(std::mem::take(published));
        for (claim, earlier) in claims.drain(..).zip(answers) {
            let outcome = earlier.map_or(ClaimOutcome::Won, ClaimOutcome::Taken);
            self.claimed(claim, outcome).await;
        }
        Ok(())
    }

    fn envelope(&self, message: ClusterMessage) -> String {
        Envelope {
            node: self.node.id.clone(),
            message,
        }
        .encode()
    }

    async fn claimed(&self, claim: ClaimId, outcome: ClaimOutcome) {
        let _ = self.inbox.send(Command::Claimed { claim, outcome }).await;
    }

    /// Answers a command that could not be performed.
    async fn fail(&self, command: BrokerCmd) {
        match command {
            BrokerCmd::Announce(_) => self.health.dropped(1),
            BrokerCmd::Claim { claim, .. } => {
                self.claimed(claim, ClaimOutcome::Unavailable).await;
            }
            BrokerCmd::Reconcile { .. } | BrokerCmd::Beat => {}
        }
    }

    /// Marks this node alive for [`NODE_TTL`].
    async fn alive(&self, conn: &mut MultiplexedConnection) -> RedisResult<()> {
        let ttl_ms = u64::try_from(NODE_TTL.as_millis()).unwrap_or(u64::MAX);
        redis::cmd("SET")
            .arg(self.keys.alive(&self.node.id))
            .arg(1)
            .arg("PX")
            .arg(ttl_ms)
            .exec_async(conn)
            .await
    }

    /// Refreshes liveness, probes the pub/sub path, removes gone nodes.
    async fn beat(&self, conn: &mut MultiplexedConnection) -> RedisResult<()> {
        let ttl_ms = u64::try_from(NODE_TTL.as_millis()).unwrap_or(u64::MAX);
        redis::pipe()
            .cmd("SET")
            .arg(self.keys.alive(&self.node.id))
            .arg(1)
            .arg("PX")
            .arg(ttl_ms)
            .ignore()
            .cmd("PUBLISH")
            .arg(self.keys.probe(&self.node.id))
            .arg(1)
            .ignore()
            .exec_async(conn)
            .await?;
        let nodes: Vec<String> = redis::cmd("SMEMBERS")
            .arg(self.keys.nodes())
            .query_async(conn)
            .await?;
        for node in nodes.into_iter().filter(|n| *n != self.node.id) {
            let alive: bool = redis::cmd("EXISTS")
                .arg(self.keys.alive(&node))
                .query_async(conn)
                .await?;
            if !alive {
                self.reap(conn, &node).await?;
            }
        }
        Ok(())
    }

    /// Removes gone `node`'s state and tells every node, if this node wins
    /// the job.
    async fn reap(&self, conn: &mut MultiplexedConnection, node: &str) -> RedisResult<()> {
        let claim_ms = u64::try_from(REAP_CLAIM.as_millis()).unwrap_or(u64::MAX);
        let won: Option<String> = redis::cmd("SET")
            .arg(self.keys.reap(node))
            .arg(&self.node.id)
            .arg("NX")
            .arg("PX")
            .arg(claim_ms)
            .query_async(conn)
            .await?;
        if won.is_none() {
            return Ok(());
        }
        let rows: u64 = redis::cmd("HLEN")
            .arg(self.keys.state(node))
            .query_async(conn)
            .await?;
        let gone = ClusterMessage::NodeGone {
            node: node.to_owned(),
        };
        redis::pipe()
            .atomic()
            .cmd("DEL")
            .arg(self.keys.state(node))
            .ignore()
            .cmd("SREM")
            .arg(self.keys.nodes())
            .arg(node)
            .ignore()
            .cmd("PUBLISH")
            .arg(self.keys.bus())
            .arg(self.envelope(gone.clone()))
            .ignore()
            .exec_async(conn)
            .await?;
        tracing::info!(node, rows, "removed the channel state of a stopped node");
        self.health.expired(rows);
        self.health.sent(1);
        // The bus does not bring a node its own messages.
        let _ = self
            .inbox
            .send(Command::Remote {
                node: self.node.id.clone(),
                message: gone,
            })
            .await;
        Ok(())
    }

    /// Sets this node's state to `state`, then hands the engine every other
    /// node's (each read whole, with its `seq`, by one command).
    async fn reconcile(
        &self,
        conn: &mut MultiplexedConnection,
        state: &NodeState,
    ) -> RedisResult<()> {
        let own = self.keys.state(&self.node.id);
        let wanted: BTreeMap<String, String> = state_fields(state).into_iter().collect();
        let held: BTreeMap<String, String> =
            redis::cmd("HGETALL").arg(&own).query_async(conn).await?;
        let mut pipe = redis::pipe();
        pipe.cmd("SADD")
            .arg(self.keys.nodes())
            .arg(&self.node.id)
            .ignore();
        let stale: Vec<&String> = held.keys().filter(|f| !wanted.contains_key(*f)).collect();
        if !stale.is_empty() {
            pipe.cmd("HDEL").arg(&own).arg(stale).ignore();
        }
        for (field, value) in &wanted {
            if held.get(field) != Some(value) {
                pipe.cmd("HSET").arg(&own).arg(field).arg(value).ignore();
            }
        }
        pipe.exec_async(conn).await?;

        let nodes: BTreeSet<String> = redis::cmd("SMEMBERS")
            .arg(self.keys.nodes())
            .query_async(conn)
            .await?;
        let mut states = Vec::new();
        for node in nodes.iter().filter(|n| **n != self.node.id) {
            let fields: BTreeMap<String, String> = redis::cmd("HGETALL")
                .arg(self.keys.state(node))
                .query_async(conn)
                .await?;
            states.push(node_state(node, fields));
        }
        let _ = self
            .inbox
            .send(Command::ClusterState { nodes: states })
            .await;
        Ok(())
    }
}
