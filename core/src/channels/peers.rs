//! The other nodes of a cluster as this node knows them: since when they
//! report webhooks, how far their state messages have been applied, and so
//! which node reports each channel's webhooks.
//!
//! Every node computes the reporter of a channel's event from the same
//! facts, so each event is reported once: the event's time (a local
//! event's `now`; a remote one's origin time, which its message carries)
//! and each node's `since`, the time it becomes a reporter
//! ([`REPORTER_GRACE_MS`] after it loaded the cluster's state and said
//! hello). Among the nodes whose `since` is at or before the event, the
//! one with the highest [`owner_score`] for the channel reports it
//! (rendezvous hashing: a node that joins or leaves moves only the
//! channels it wins or held); when none is yet, the one with the earliest
//! `since` does. Because a node's `since` is known to the others (its hello,
//! its rows on the broker) long before it arrives, they agree on the
//! reporter of an event even when they learn of it at different moments.
//! A clustered engine reports nothing before its first
//! [`Input::ClusterState`](crate::Input::ClusterState): until then it does
//! not know what the cluster holds, and nobody counts it.

use std::collections::{BTreeMap, BTreeSet};

use crate::cluster::owner_score;
use crate::ids::Millis;

/// How long after a node loaded the cluster's state it becomes a reporter:
/// far longer than a message takes to reach the other nodes, and than the
/// periodic reload that repairs a lost hello.
pub(crate) const REPORTER_GRACE_MS: u64 = 3_000;

/// Snapshots in a row a node may be missing from before it counts as gone.
const MISSING_SNAPSHOTS: u8 = 2;

/// What this node knows of another node.
#[derive(Debug, Clone, Copy, Default)]
struct Peer {
    /// The `seq` of the newest state of it applied here.
    seq: u64,
    /// When it becomes a reporter (`None`: not known yet).
    since: Option<u64>,
    /// Consecutive snapshots it was missing from.
    missing: u8,
}

/// This node and the others.
#[derive(Debug, Default)]
pub(crate) struct Peers {
    clustered: bool,
    me: String,
    /// When this node becomes a reporter (`None` until its first snapshot).
    since: Option<u64>,
    /// The `seq` of this node's last state message.
    seq: u64,
    nodes: BTreeMap<String, Peer>,
    /// Nodes that stopped, with the `seq` applied of them then: a snapshot
    /// read before their state was removed does not bring them back.
    gone: BTreeMap<String, u64>,
}

impl Peers {
    /// Node `me`, alone (`clustered` false: it reports every channel).
    pub(crate) fn new(clustered: bool, me: &str) -> Peers {
        Peers {
            clustered,
            me: me.to_owned(),
            ..Peers::default()
        }
    }

    /// This node's id.
    pub(crate) fn me(&self) -> &str {
        &self.me
    }

    /// When this node becomes a reporter, once it is settled.
    pub(crate) fn since(&self) -> Option<u64> {
        self.since
    }

    /// The `seq` for this node's next state message: above every earlier
    /// one, and above any this node sent before it restarted (it starts
    /// from the clock, in microseconds, so a message's origin time is its
    /// `seq` in milliseconds).
    pub(crate) fn next_seq(&mut self, now: Millis) -> u64 {
        self.seq = (self.seq + 1).max(now.0.saturating_mul(1000));
        self.seq
    }

    /// A message from `node` arrived. For a state message (`seq`), whether
    /// it is newer than what is applied of `node` (and it is recorded as
    /// applied). A node that was gone is back with nothing applied: the bus
    /// brings nothing of a node after its `NodeGone`, so this is a new run
    /// of it (whatever its seqs).
    pub(crate) fn heard(&mut self, node: &str, seq: Option<u64>) -> bool {
        if node == self.me {
            return false;
        }
        let peer = self.nodes.entry(node.to_owned()).or_default();
        peer.missing = 0;
        match seq {
            Some(seq) if seq > peer.seq => {
                peer.seq = seq;
                true
            }
            Some(_) => false,
            None => true,
        }
    }

    /// `node` said hello: it reports from `since` on.
    pub(crate) fn hello(&mut self, node: &str, since: u64) {
        if let Some(peer) = self.nodes.get_mut(node) {
            peer.since = Some(since);
        }
    }

    /// `node` stopped; whether it was known.
    pub(crate) fn gone(&mut self, node: &str) -> bool {
        match self.nodes.remove(node) {
            Some(peer) => {
                let buried = self.gone.entry(node.to_owned()).or_default();
                *buried = (*buried).max(peer.seq);
                true
            }
            None => false,
        }
    }

    /// A snapshot holds `node`'s rows as of `seq` (and when it reports,
    /// `since`): whether they are at least as new as what is applied of it
    /// (and so replace it). The rows of a node that stopped count only if
    /// written after it stopped.
    pub(crate) fn snapshot(&mut self, node: &str, seq: u64, since: Option<u64>) -> bool {
        if node == self.me {
            return false;
        }
        if let Some(&buried) = self.gone.get(node) {
            if seq <= buried {
                return false;
            }
            self.gone.remove(node);
        }
        let peer = self.nodes.entry(node.to_owned()).or_default();
        peer.missing = 0;
        if since.is_some() {
            peer.since = since;
        }
        if seq < peer.seq {
            return false;
        }
        peer.seq = seq;
        true
    }

    /// The known nodes a snapshot did not hold [`MISSING_SNAPSHOTS`] times
    /// in a row are gone: forgotten and returned (their rows were removed
    /// without a `NodeGone` reaching this node).
    pub(crate) fn missing_from(&mut self, present: &BTreeSet<String>) -> Vec<String> {
        let mut gone = Vec::new();
        for (node, peer) in &mut self.nodes {
            if present.contains(node) {
                continue;
            }
            peer.missing += 1;
            if peer.missing >= MISSING_SNAPSHOTS {
                gone.push(node.clone());
            }
        }
        for node in &gone {
            self.gone(node);
        }
        gone
    }

    /// The first snapshot is applied at `now`: this node reports from
    /// [`REPORTER_GRACE_MS`] later on (and before, while no node does yet).
    /// Returns that time the first time (the node then says hello).
    pub(crate) fn settle(&mut self, now: Millis) -> Option<u64> {
        if self.since.is_some() {
            return None;
        }
        let since = now.0.saturating_add(REPORTER_GRACE_MS);
        self.since = Some(since);
        Some(since)
    }

    /// Whether this node reports the event at time `at` of `channel` of
    /// `app_id`.
    pub(crate) fn owns(&self, app_id: &str, channel: &str, at: Millis) -> bool {
        if !self.clustered {
            return true;
        }
        let Some(mine) = self.since else {
            return false;
        };
        let others = self
            .nodes
            .iter()
            .filter_map(|(node, peer)| Some((node.as_str(), peer.since?)));
        let candidates: Vec<(&str, u64)> = std::iter::once((self.me.as_str(), mine))
            .chain(others)
            .collect();
        let reporting = candidates.iter().filter(|(_, since)| *since <= at.0);
        let owner = reporting
            .max_by_key(|(node, _)| (owner_score(node, app_id, channel), *node))
            .or_else(|| {
                candidates
                    .iter()
                    .min_by_key(|(node, since)| (*since, *node))
            });
        owner.is_some_and(|(node, _)| *node == self.me)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Millis = Millis(1_000_000);

    /// Node `me` settled at [`T`], knowing `others` who report from `T`.
    fn settled(me: &str, others: &[&str]) -> Peers {
        let mut peers = Peers::new(true, me);
        for node in others {
            peers.snapshot(node, 0, Some(T.0));
        }
        assert_eq!(peers.settle(T), Some(T.0 + REPORTER_GRACE_MS));
        peers
    }

    /// Once everyone reports: time enough after [`T`].
    const LATER: Millis = Millis(T.0 + REPORTER_GRACE_MS);

    #[test]
    fn exactly_one_node_reports_each_channel() {
        let names = ["n1", "n2", "n3"];
        let nodes: Vec<Peers> = names
            .iter()
            .map(|me| {
                let others: Vec<&str> = names.iter().copied().filter(|n| n != me).collect();
                let mut peers = settled(me, &others);
                for other in others {
                    peers.hello(other, T.0 + REPORTER_GRACE_MS);
                }
                peers
            })
            .collect();
        let mut owned = [0; 3];
        for i in 0..300 {
            let channel = format!("channel-{i}");
            let owners: Vec<usize> = (0..3)
                .filter(|&n| nodes[n].owns("app-1", &channel, LATER))
                .collect();
            assert_eq!(owners.len(), 1, "{channel}");
            owned[owners[0]] += 1;
        }
        assert!(owned.iter().all(|&n| n > 50), "spread: {owned:?}");
    }

    #[test]
    fn before_any_node_reports_the_earliest_does() {
        // n1 settled at T, n2 a little later: until T + grace nobody is a
        // reporter, and n1 (the earliest) reports everything, as both agree.
        let mut n1 = settled("n1", &[]);
        let mut n2 = Peers::new(true, "n2");
        n2.snapshot("n1", 0, Some(T.0 + REPORTER_GRACE_MS));
        let since = n2.settle(Millis(T.0 + 300)).unwrap();
        n1.heard("n2", None);
        n1.hello("n2", since);
        let early = Millis(T.0 + 500);
        for i in 0..50 {
            let c = format!("c{i}");
            assert!(n1.owns("a", &c, early) && !n2.owns("a", &c, early), "{c}");
        }
        let both = Millis(since);
        let n2s: Vec<String> = (0..50)
            .map(|i| format!("c{i}"))
            .filter(|c| n2.owns("a", c, both))
            .collect();
        assert!(!n2s.is_empty());
        assert!(n2s.iter().all(|c| !n1.owns("a", c, both)));
    }

    #[test]
    fn unsettled_nodes_report_nothing_and_single_nodes_everything() {
        let mut peers = Peers::new(true, "n1");
        assert!(!peers.owns("a", "c", T));
        assert!(peers.settle(T).is_some(), "the first snapshot");
        assert!(peers.settle(T).is_none());
        assert!(peers.owns("a", "c", T), "alone in the cluster, at once");
        assert!(Peers::new(false, "").owns("a", "c", T));
    }

    #[test]
    fn a_gone_node_reports_nothing() {
        let mut peers = settled("n1", &["n2"]);
        let theirs: Vec<String> = (0..50)
            .map(|i| format!("c{i}"))
            .filter(|c| !peers.owns("a", c, LATER))
            .collect();
        assert!(!theirs.is_empty());
        assert!(peers.gone("n2"));
        assert!(theirs.iter().all(|c| peers.owns("a", c, LATER)));
        peers.heard("n2", None);
        assert!(
            theirs.iter().all(|c| peers.owns("a", c, LATER)),
            "back, but it has not said when it reports"
        );
        peers.hello("n2", T.0);
        assert!(theirs.iter().all(|c| !peers.owns("a", c, LATER)));
    }

    #[test]
    fn newer_state_wins_in_either_order() {
        let mut peers = settled("n1", &[]);
        assert!(peers.heard("n2", Some(10)));
        assert!(!peers.heard("n2", Some(10)), "a repeat");
        assert!(!peers.snapshot("n2", 9, None), "a snapshot read before it");
        assert!(peers.snapshot("n2", 12, None));
        assert!(!peers.heard("n2", Some(11)), "the snapshot holds it");
        assert!(peers.heard("n2", Some(13)));
        assert!(!peers.heard("n1", Some(99)), "never a peer of itself");
    }

    #[test]
    fn a_gone_node_stays_gone_until_it_speaks() {
        let mut peers = settled("n1", &[]);
        assert!(peers.heard("n2", Some(10)));
        assert!(peers.gone("n2"));
        assert!(
            !peers.snapshot("n2", 10, None),
            "read before its state was removed"
        );
        assert!(!peers.gone("n2"), "not known any more");
        assert!(peers.heard("n2", Some(11)), "it came back");
        assert!(peers.gone("n2"));
        assert!(peers.snapshot("n2", 12, None), "written after it stopped");
        assert!(peers.gone("n2"));
        assert!(
            peers.heard("n2", Some(3)),
            "a new run, whatever its seq (it restarted within the same millisecond)"
        );
        assert!(!peers.snapshot("n2", 12, None), "its last run's rows");
        assert!(peers.snapshot("n2", 13, None));
    }

    #[test]
    fn missing_twice_is_gone() {
        let mut peers = settled("n1", &["n2", "n3"]);
        let present: BTreeSet<String> = ["n3".to_owned()].into();
        assert!(peers.missing_from(&present).is_empty());
        assert_eq!(peers.missing_from(&present), ["n2"]);
        assert!(!peers.gone("n2"));
    }

    #[test]
    fn seqs_grow_across_restarts() {
        let mut peers = Peers::new(true, "n1");
        let first = peers.next_seq(Millis(5));
        assert_eq!(first, 5_000);
        let last = peers.next_seq(Millis(5));
        assert_eq!(last, 5_001);
        let restarted = Peers::new(true, "n1").next_seq(Millis(6));
        assert!(restarted > last);
    }
}
