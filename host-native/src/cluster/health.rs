//! The broker's health and counters, shared by its tasks, `/readyz` and
//! `/metrics`.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A probe older than this makes the node unready (its pub/sub connection
/// is closed or silently wedged).
pub(crate) const PROBE_STALE: Duration = Duration::from_secs(3);

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// What the broker's tasks report.
#[derive(Debug, Default)]
pub(crate) struct Health {
    writer_connected: AtomicBool,
    subscribed: AtomicBool,
    probe_seen_ms: AtomicU64,
    messages_in: AtomicU64,
    messages_out: AtomicU64,
    messages_dropped: AtomicU64,
    reconnects: AtomicU64,
    presence_expired: AtomicU64,
}

impl Health {
    /// The command connection is up (`true`) or lost.
    pub(crate) fn writer(&self, connected: bool) {
        self.writer_connected.store(connected, Ordering::Relaxed);
    }

    /// The pub/sub connection is subscribed (`true`) or lost.
    pub(crate) fn subscribed(&self, subscribed: bool) {
        self.subscribed.store(subscribed, Ordering::Relaxed);
    }

    /// This node's probe came back through its pub/sub connection.
    pub(crate) fn probe_seen(&self) {
        self.probe_seen_ms.store(now_ms(), Ordering::Relaxed);
    }

    /// How long since the last probe came back.
    pub(crate) fn probe_age(&self) -> Duration {
        let seen = self.probe_seen_ms.load(Ordering::Relaxed);
        Duration::from_millis(now_ms().saturating_sub(seen))
    }

    /// Why the broker is not usable, or `None` when it is.
    pub(crate) fn problem(&self) -> Option<&'static str> {
        if !self.writer_connected.load(Ordering::Relaxed) {
            Some("the broker does not answer")
        } else if !self.subscribed.load(Ordering::Relaxed) {
            Some("the broker's pub/sub connection is down")
        } else if self.probe_age() > PROBE_STALE {
            Some("the broker's pub/sub connection delivers nothing")
        } else {
            None
        }
    }

    /// Counts messages taken from the bus.
    pub(crate) fn received(&self) {
        self.messages_in.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts messages published to the bus.
    pub(crate) fn sent(&self, n: u64) {
        self.messages_out.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts messages dropped because the broker was unreachable.
    pub(crate) fn dropped(&self, n: u64) {
        self.messages_dropped.fetch_add(n, Ordering::Relaxed);
    }

    /// Counts a reconnection (either connection).
    pub(crate) fn reconnected(&self) {
        self.reconnects.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts state fields (presence members, subscriber counts) of gone
    /// nodes removed by this node.
    pub(crate) fn expired(&self, n: u64) {
        self.presence_expired.fetch_add(n, Ordering::Relaxed);
    }

    /// Appends the broker's lines in Prometheus text format.
    pub(crate) fn render(&self, out: &mut String) {
        let rows = [
            (
                "bubble_broker_messages_in_total",
                "Cluster messages received from other nodes.",
                &self.messages_in,
            ),
            (
                "bubble_broker_messages_out_total",
                "Cluster messages published to other nodes.",
                &self.messages_out,
            ),
            (
                "bubble_broker_messages_dropped_total",
                "Cluster messages not published because the broker was unreachable.",
                &self.messages_dropped,
            ),
            (
                "bubble_broker_reconnects_total",
                "Connections to the broker made again after a failure.",
                &self.reconnects,
            ),
            (
                "bubble_presence_entries_expired_total",
                "Channel state fields (presence members, subscriber counts) of stopped nodes removed by this node.",
                &self.presence_expired,
            ),
        ];
        for (name, help, value) in rows {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}",
                value.load(Ordering::Relaxed)
            );
        }
        let _ = writeln!(
            out,
            "# HELP bubble_broker_up Whether the broker is usable (connected, and probes come back).\n# TYPE bubble_broker_up gauge\nbubble_broker_up {}",
            u8::from(self.problem().is_none())
        );
    }
}
