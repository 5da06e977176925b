//! The other nodes of a cluster as this node knows them: whether they are
//! alive, how far their state messages have been applied, and so which
//! node reports each channel's webhooks.
//!
//! A channel's reporter is the live node with the highest
//! [`owner_score`] for it (rendezvous hashing): every node computes the
//! same one from the same view, and a node that joins or leaves moves only
//! the channels it wins or held. A clustered engine reports nothing before
//! its first [`Input::ClusterState`](crate::Input::ClusterState): until then
//! it does not know what the cluster holds, and the other nodes report.

use std::collections::{BTreeMap, BTreeSet};

use crate::cluster::owner_score;
use crate::ids::Millis;

/// Snapshots in a row a node may be missing from before it counts as gone.
const MISSING_SNAPSHOTS: u8 = 2;

/// What this node knows of another node.
#[derive(Debug, Clone, Copy, Default)]
struct Peer {
    /// The `seq` of the newest state of it applied here.
    seq: u64,
    /// It refreshes its liveness (it may report webhooks).
    live: bool,
    /// Consecutive snapshots it was missing from.
    missing: u8,
}

/// This node and the others.
#[derive(Debug, Default)]
pub(crate) struct Peers {
    clustered: bool,
    me: String,
    /// The first cluster snapshot was applied.
    settled: bool,
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

    /// The `seq` for this node's next state message: above every earlier
    /// one, and above any this node sent before it restarted (it starts
    /// from the clock, in microseconds).
    pub(crate) fn next_seq(&mut self, now: Millis) -> u64 {
        self.seq = (self.seq + 1).max(now.0.saturating_mul(1000));
        self.seq
    }

    /// A message from `node` arrived: it is alive (again, if it was gone).
    /// For a state message (`seq`), whether it is newer than what is applied
    /// of `node` (and it is recorded as applied).
    pub(crate) fn heard(&mut self, node: &str, seq: Option<u64>) -> bool {
        if node == self.me {
            return false;
        }
        let buried = self.gone.remove(node).unwrap_or(0);
        let peer = self.nodes.entry(node.to_owned()).or_insert(Peer {
            seq: buried,
            ..Peer::default()
        });
        peer.live = true;
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

    /// `node` stopped; whether it was known.
    pub(crate) fn gone(&mut self, node: &str) -> bool {
        match self.nodes.remove(node) {
            Some(peer) => {
                self.gone.insert(node.to_owned(), peer.seq);
                true
            }
            None => false,
        }
    }

    /// A snapshot holds `node`'s rows as of `seq`: whether they are at
    /// least as new as what is applied of it (and so replace it). The rows
    /// of a node that stopped count only if written after it stopped.
    pub(crate) fn snapshot(&mut self, node: &str, seq: u64, live: bool) -> bool {
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
        peer.live = live;
        peer.missing = 0;
        if seq < peer.seq {
            return false;
        }
        peer.seq = seq;
        true
    }

    /// The known nodes a snapshot did not hold are not alive; those it did
    /// not hold [`MISSING_SNAPSHOTS`] times in a row are gone (forgotten
    /// and returned: their rows were removed without a `NodeGone` reaching
    /// this node).
    pub(crate) fn missing_from(&mut self, present: &BTreeSet<String>) -> Vec<String> {
        let mut gone = Vec::new();
        for (node, peer) in &mut self.nodes {
            if present.contains(node) {
                continue;
            }
            peer.live = false;
            peer.missing += 1;
            if peer.missing >= MISSING_SNAPSHOTS {
                gone.push(node.clone());
            }
        }
        for node in &gone {
            if let Some(peer) = self.nodes.remove(node) {
                self.gone.insert(node.clone(), peer.seq);
            }
        }
        gone
    }

    /// The first snapshot is applied: this node may report from now on.
    /// Returns whether this is that first one (the node then says hello).
    pub(crate) fn settle(&mut self) -> bool {
        !std::mem::replace(&mut self.settled, true)
    }

    /// Whether this node reports the webhooks of `channel` of `app_id`.
    pub(crate) fn owns(&self, app_id: &str, channel: &str) -> bool {
        if !self.clustered {
            return true;
        }
        if !self.settled {
            return false;
        }
        let mine = (owner_score(&self.me, app_id, channel), self.me.as_str());
        self.nodes
            .iter()
            .filter(|(_, peer)| peer.live)
            .all(|(node, _)| (owner_score(node, app_id, channel), node.as_str()) < mine)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settled(me: &str, others: &[&str]) -> Peers {
        let mut peers = Peers::new(true, me);
        for node in others {
            peers.snapshot(node, 0, true);
        }
        peers.settle();
        peers
    }

    #[test]
    fn exactly_one_live_node_owns_each_channel() {
        let names = ["n1", "n2", "n3"];
        let nodes: Vec<Peers> = names
            .iter()
            .map(|me| {
                let others: Vec<&str> = names.iter().copied().filter(|n| n != me).collect();
                settled(me, &others)
            })
            .collect();
        let mut owned = [0; 3];
        for i in 0..300 {
            let channel = format!("channel-{i}");
            let owners: Vec<usize> = (0..3)
                .filter(|&n| nodes[n].owns("app-1", &channel))
                .collect();
            assert_eq!(owners.len(), 1, "{channel}");
            owned[owners[0]] += 1;
        }
        assert!(owned.iter().all(|&n| n > 50), "spread: {owned:?}");
    }

    #[test]
    fn unsettled_nodes_report_nothing_and_single_nodes_everything() {
        let mut peers = Peers::new(true, "n1");
        assert!(!peers.owns("a", "c"));
        assert!(peers.settle(), "the first snapshot");
        assert!(!peers.settle());
        assert!(peers.owns("a", "c"), "alone in the cluster");
        assert!(Peers::new(false, "").owns("a", "c"));
    }

    #[test]
    fn a_gone_or_dead_node_owns_nothing() {
        let mut peers = settled("n1", &["n2"]);
        let theirs: Vec<String> = (0..50)
            .map(|i| format!("c{i}"))
            .filter(|c| !peers.owns("a", c))
            .collect();
        assert!(!theirs.is_empty());
        peers.snapshot("n2", 0, false);
        assert!(theirs.iter().all(|c| peers.owns("a", c)), "n2 is not alive");
        peers.heard("n2", None);
        assert!(theirs.iter().all(|c| !peers.owns("a", c)), "n2 spoke");
        assert!(peers.gone("n2"));
        assert!(theirs.iter().all(|c| peers.owns("a", c)));
    }

    #[test]
    fn newer_state_wins_in_either_order() {
        let mut peers = settled("n1", &[]);
        assert!(peers.heard("n2", Some(10)));
        assert!(!peers.heard("n2", Some(10)), "a repeat");
        assert!(!peers.snapshot("n2", 9, true), "a snapshot read before it");
        assert!(peers.snapshot("n2", 12, true));
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
            !peers.snapshot("n2", 10, true),
            "read before its state was removed"
        );
        assert!(!peers.gone("n2"), "not known any more");
        assert!(peers.heard("n2", Some(11)), "it came back");
        assert!(peers.gone("n2"));
        assert!(peers.snapshot("n2", 12, true), "written after it stopped");
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
