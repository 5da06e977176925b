//! Counters and gauges the engine keeps, rendered as Prometheus text.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::error::ErrorCode;

/// The engine's metrics. Hosts add their own lines (e.g. queue drops).
#[derive(Debug, Clone, Default)]
pub struct Metrics {
    /// Open `/v1/ws` connections.
    pub thread_connections: u64,
    /// Open thread subscriptions.
    pub thread_subscriptions: u64,
    /// Threads held in the engine's cache.
    pub thread_cache_entries: u64,
    /// Store reads asked for.
    pub store_reads: u64,
    /// Thread write groups a store refused because another writer got there first.
    pub write_conflicts: u64,
    /// Thread changes another node made that no broker message announced,
    /// found by [`crate::Input::Recheck`] (a cluster's gap fills).
    pub missed_changes: u64,
    /// Events appended (durable or pending).
    pub events_appended: u64,
    /// Client frames received on both protocols.
    pub frames_in: u64,
    /// Frames sent on both protocols.
    pub frames_out: u64,
    /// Errors reported to peers, by code.
    pub errors: BTreeMap<&'static str, u64>,
    /// Open pubb sockets per app id.
    pub channel_connections: BTreeMap<String, u64>,
    /// Open channel subscriptions.
    pub channel_subscriptions: u64,
    /// Publications accepted (duplicates excluded).
    pub publishes: u64,
    /// Channel deliveries (one per recipient socket).
    pub deliveries: u64,
}

impl Metrics {
    /// Counts one error reported to a peer.
    pub fn count_error(&mut self, code: ErrorCode) {
        *self.errors.entry(code.as_str()).or_default() += 1;
    }

    /// The metrics in Prometheus text exposition format.
    pub fn render_prometheus(&self) -> String {
        let mut s = String::new();
        let mut metric = |name: &str, kind: &str, help: &str, value: u64| {
            let _ = writeln!(
                s,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
            );
        };
        metric(
            "bubble_ws_connections",
            "gauge",
            "Open /v1/ws connections.",
            self.thread_connections,
        );
        metric(
            "bubble_thread_cache_entries",
            "gauge",
            "Threads held in the engine's cache.",
            self.thread_cache_entries,
        );
        metric(
            "bubble_store_reads_total",
            "counter",
            "Store reads the engine asked for.",
            self.store_reads,
        );
        metric(
            "bubble_write_conflicts_total",
            "counter",
            "Thread write groups refused because another writer changed the thread first.",
            self.write_conflicts,
        );
        metric(
            "bubble_cluster_missed_changes_total",
            "counter",
            "Thread changes of other nodes found by a recheck because no broker message announced them.",
            self.missed_changes,
        );
        metric(
            "bubble_subscriptions",
            "gauge",
            "Open thread subscriptions.",
            self.thread_subscriptions,
        );
        metric(
            "bubble_events_appended_total",
            "counter",
            "Events appended.",
            self.events_appended,
        );
        metric(
            "bubble_frames_in_total",
            "counter",
            "Client frames received.",
            self.frames_in,
        );
        metric(
            "bubble_frames_out_total",
            "counter",
            "Frames sent.",
            self.frames_out,
        );
        metric(
            "bubble_channel_subscriptions",
            "gauge",
            "Open channel subscriptions.",
            self.channel_subscriptions,
        );
        metric(
            "bubble_publishes_total",
            "counter",
            "Channel publications accepted.",
            self.publishes,
        );
        metric(
            "bubble_deliveries_total",
            "counter",
            "Channel deliveries.",
            self.deliveries,
        );
        let _ = writeln!(
            s,
            "# HELP bubble_errors_total Errors reported to peers, by code."
        );
        let _ = writeln!(s, "# TYPE bubble_errors_total counter");
        for (code, n) in &self.errors {
            let _ = writeln!(s, "bubble_errors_total{{code=\"{code}\"}} {n}");
        }
        let _ = writeln!(
            s,
            "# HELP bubble_channel_connections Open channel sockets, by app."
        );
        let _ = writeln!(s, "# TYPE bubble_channel_connections gauge");
        for (app, n) in &self.channel_connections {
            let _ = writeln!(s, "bubble_channel_connections{{app=\"{app}\"}} {n}");
        }
        s
    }
}
