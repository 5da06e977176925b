//! Command line of `bubble-crossgen`.

use std::net::SocketAddr;

use clap::{Parser, ValueEnum};

/// The protocol spoken to the server under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Proto {
    /// nginx + nchan: WebSocket `GET /sub/<ch>`, HTTP `POST /pub/<ch>`.
    Nchan,
    /// Bubble channels: WebSocket `/socket` + subscribe frame, HTTP
    /// `POST /api/apps/<app>/events`.
    Pubb,
}

impl Proto {
    /// Name used in the JSON results.
    pub fn name(self) -> &'static str {
        match self {
            Proto::Nchan => "nchan",
            Proto::Pubb => "pubb",
        }
    }
}

/// An independent fan-out load generator (tokio + tokio-tungstenite) that
/// cross-checks the server CPU per delivery measured by `bubble-bench`.
///
/// Prints one JSON line per rate on stdout; progress goes to stderr.
#[derive(Debug, Parser)]
#[command(name = "bubble-crossgen", version)]
pub struct Args {
    /// Server address, `IP:PORT`.
    #[arg(long)]
    pub addr: SocketAddr,
    /// Protocol of the server.
    #[arg(long, value_enum)]
    pub proto: Proto,
    /// Number of WebSocket subscribers, spread round-robin over the channels.
    #[arg(long, default_value_t = 1000)]
    pub subs: usize,
    /// Number of channels.
    #[arg(long, default_value_t = 10)]
    pub channels: usize,
    /// Payload size in bytes (stamp plus `.` padding).
    #[arg(long, default_value_t = 64)]
    pub payload: usize,
    /// Target rates in deliveries per second, comma separated. Publishes per
    /// second are the rate divided by the subscribers per channel.
    #[arg(long, value_delimiter = ',', default_value = "20000,40000,100000")]
    pub rates: Vec<u64>,
    /// Seconds of sending per rate.
    #[arg(long, default_value_t = 5.0)]
    pub secs: f64,
    /// A process of the server whose CPU is measured (repeatable, e.g. each
    /// nginx worker).
    #[arg(long = "server-pid")]
    pub server_pids: Vec<u32>,
    /// The core the server is pinned to; its `/proc/stat` line gives the
    /// whole-core busy share.
    #[arg(long)]
    pub server_core: Option<usize>,
    /// The core this generator pins itself to.
    #[arg(long)]
    pub pin_core: Option<usize>,
    /// Keep-alive HTTP/1.1 connections used for publishing.
    #[arg(long, default_value_t = 16)]
    pub pub_conns: usize,
    /// Subscribers connecting at the same time during setup.
    #[arg(long, default_value_t = 64)]
    pub connect_concurrency: usize,
}

impl Args {
    /// Rejects combinations that cannot run.
    pub fn validate(&self) -> Result<(), String> {
        if self.channels == 0 || self.subs < self.channels {
            return Err(format!(
                "need at least one subscriber per channel (subs {}, channels {})",
                self.subs, self.channels
            ));
        }
        if self.pub_conns == 0 || self.connect_concurrency == 0 {
            return Err("--pub-conns and --connect-concurrency must be positive".into());
        }
        if self.rates.is_empty() || self.rates.contains(&0) {
            return Err("--rates must list positive rates".into());
        }
        if !(self.secs > 0.0 && self.secs.is_finite()) {
            return Err("--secs must be positive".into());
        }
        Ok(())
    }

    /// Name of channel `i`.
    pub fn channel(&self, i: usize) -> String {
        format!("xg{i}")
    }

    /// Subscribers on each channel (subscriber `s` is on channel `s % channels`).
    pub fn subs_per_channel(&self) -> Vec<u64> {
        (0..self.channels)
            .map(|c| ((self.subs - c).div_ceil(self.channels)) as u64)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_documented_line() {
        let a = Args::parse_from([
            "bubble-crossgen",
            "--addr",
            "127.0.0.1:8090",
            "--proto",
            "nchan",
            "--rates",
            "2000,5000",
            "--server-pid",
            "10",
            "--server-pid",
            "11",
            "--server-core",
            "0",
        ]);
        assert_eq!(a.rates, vec![2000, 5000]);
        assert_eq!(a.server_pids, vec![10, 11]);
        assert_eq!(a.server_core, Some(0));
        assert_eq!(a.subs, 1000);
        assert_eq!(a.pub_conns, 16);
        assert!(a.validate().is_ok());
    }

    #[test]
    fn spreads_subscribers_round_robin() {
        let mut a = Args::parse_from(["x", "--addr", "127.0.0.1:1", "--proto", "pubb"]);
        a.subs = 10;
        a.channels = 4;
        assert_eq!(a.subs_per_channel(), vec![3, 3, 2, 2]);
        a.subs = 200;
        assert_eq!(a.subs_per_channel(), vec![50; 4]);
    }
}
