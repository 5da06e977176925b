//! What every scenario needs: options, paths, cores.

use std::path::PathBuf;
use std::time::Duration;

use crate::publisher::{Plan, Target, Transport};
use crate::servers::{self, Pin, Server, ServerError, Store};

/// Shared settings of a benchmark run.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// Small, quick runs that only prove the code works.
    pub smoke: bool,
    /// The `bubble` binary.
    pub bubble_bin: PathBuf,
    /// The nchan config template.
    pub nchan_conf: PathBuf,
    /// Where result files go.
    pub results_dir: PathBuf,
    /// Core the server is pinned to.
    pub server_core: Option<usize>,
    /// Cores the generator runs on.
    pub gen_cores: usize,
    /// Seconds per measured step.
    pub step_secs: f64,
    /// Persistent publisher connections.
    pub pub_conns: usize,
    /// HTTP requests in flight per publisher connection.
    pub pipeline: usize,
    /// Deliveries/s of the common fan-out step, if not the default.
    pub common_rate: Option<f64>,
    /// How long a subscriber worker sleeps between reads while frames keep
    /// coming.
    pub sub_coalesce: Duration,
    /// CPU quota of the fan-out servers, in cores.
    pub server_cpu: Option<f64>,
    /// The fan-out scenarios measure their fixed-rate steps only: no second
    /// generator, no saturation search (a fixed amount of work, for
    /// instruction counts).
    pub fixed_only: bool,
    /// Rounds of paired fixed-rate steps in fanout-vs-nchan.
    pub paired_rounds: usize,
    /// Pin Bubble after it started rather than from exec.
    pub pin_after_start: bool,
    /// Bubble's `--write-delay-ms`, when given.
    pub write_delay_ms: Option<u64>,
    /// Concurrent history pagers (fanout-with-history).
    pub pagers: usize,
    /// Their pages/s, all together (`None`: as fast as answered).
    pub page_rate: Option<f64>,
    /// PostgreSQL of the cluster scenario (a URL without a schema).
    pub postgres: String,
    /// Redis of the cluster scenario.
    pub redis: String,
}

impl Ctx {
    /// How Bubble is confined to the server core.
    pub fn bubble_pin(&self) -> Pin {
        match (self.server_core, self.pin_after_start) {
            (None, _) => Pin::Off,
            (Some(c), false) => Pin::Exec(c),
            (Some(c), true) => Pin::AfterStart(c),
        }
    }

    /// Starts Bubble with `store`, confined as [`Ctx::bubble_pin`] says,
    /// with this run's write delay.
    pub fn start_bubble(&self, store: Store<'_>) -> Result<Server, ServerError> {
        servers::start_bubble(
            &self.bubble_bin,
            store,
            self.bubble_pin(),
            self.write_delay_ms,
        )
    }

    /// Worker threads for subscriber pools: one per generator core.
    pub fn workers(&self) -> usize {
        self.gen_cores.max(1)
    }

    /// A plan with this context's step length.
    pub fn plan(
        &self,
        addr: std::net::SocketAddr,
        transport: Transport,
        targets: Vec<Target>,
        rate: f64,
        step: u8,
    ) -> Plan {
        Plan {
            addr,
            conns: self.pub_conns,
            transport,
            targets,
            rate,
            duration: Duration::from_secs_f64(self.step_secs),
            step,
            max_backlog: 4 << 20,
            drain: Duration::from_secs(10),
            depth: self.pipeline,
        }
    }
}
