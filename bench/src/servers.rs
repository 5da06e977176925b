//! Starting and stopping the servers under test: Bubble (the `bubble`
//! binary with a generated config) and nginx + nchan (`bench/nchan-nginx.conf`
//! with its run directory filled in). Each is pinned to its own core and gets
//! the raised open-files limit; each is stopped, by its process id, when
//! dropped.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::procstat;

/// App, key and secret of the channels app in the generated config.
pub const APP_ID: &str = "bench-app";
/// Public key of the channels app.
pub const APP_KEY: &str = "bench-key";
/// Secret of the channels app.
pub const APP_SECRET: &str = "bench-secret";
/// Bearer token of the admin principal used for threads.
pub const TOKEN: &str = "bench-token";
/// The address nchan listens on (fixed by its config).
pub const NCHAN_ADDR: &str = "127.0.0.1:8090";

/// Why a server could not be started.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// A file or process operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The server did not come up.
    #[error("{0}")]
    Start(String),
}

fn io_err(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> ServerError {
    let what = what.into();
    move |source| ServerError::Io { what, source }
}

/// How the server is confined to its core.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pin {
    /// Not at all.
    Off,
    /// From exec on: the server sees one core and sizes itself for it.
    Exec(usize),
    /// After it started: the server sizes itself for every core of the
    /// machine (e.g. picks a multi-threaded runtime), then all its threads
    /// are moved to the one core.
    AfterStart(usize),
}

/// Which store Bubble runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Store<'a> {
    /// In memory.
    Memory,
    /// SQLite in the run directory.
    Sqlite,
    /// One node of a cluster: a PostgreSQL schema shared with the other
    /// nodes, linked to them by Redis.
    Cluster(&'a ClusterNode),
}

impl Store<'_> {
    /// Name used in results.
    pub fn name(self) -> &'static str {
        match self {
            Store::Memory => "memory",
            Store::Sqlite => "sqlite",
            Store::Cluster(_) => "postgres+redis",
        }
    }
}

/// How one cluster node is started (`docs/cluster.md`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNode {
    /// `--store`: the deployment's `postgres://…?schema=NAME` URL.
    pub store: String,
    /// `--broker`: the Redis URL.
    pub broker: String,
    /// `--broker-prefix`: the deployment's Redis key prefix.
    pub prefix: String,
    /// `--node-id`.
    pub node_id: String,
}

/// A running server.
pub struct Server {
    /// `bubble` or `nchan`.
    pub name: &'static str,
    /// Where it listens.
    pub addr: SocketAddr,
    child: Child,
    dir: PathBuf,
    /// The CPU quota it runs under, if any (removed after it exited).
    limit: std::sync::OnceLock<crate::cpulimit::CpuLimit>,
}

impl Server {
    /// Holds the server's processes (nginx: master and workers) to `cores`
    /// of CPU time from now on (once; a second limit is refused).
    pub fn limit_cpu(&self, cores: f64) -> Result<(), ServerError> {
        let mut pids = vec![self.child.id()];
        pids.extend(procstat::children(self.child.id()));
        let limit = crate::cpulimit::CpuLimit::apply(&pids, cores)
            .map_err(io_err(format!("limit {} to {cores} cores", self.name)))?;
        self.limit
            .set(limit)
            .map_err(|_| ServerError::Start(format!("{} is already limited", self.name)))
    }

    /// The processes doing the work (nginx: its workers).
    pub fn pids(&self) -> Vec<u32> {
        if self.name == "nchan" {
            let workers = procstat::children(self.child.id());
            if !workers.is_empty() {
                return workers;
            }
        }
        vec![self.child.id()]
    }

    /// Resident memory of the working processes, KiB.
    pub fn rss_kib(&self) -> u64 {
        self.pids()
            .iter()
            .filter_map(|&p| procstat::rss_kib(p))
            .sum()
    }

    /// Peak resident memory of the working processes, KiB.
    pub fn peak_rss_kib(&self) -> u64 {
        self.pids()
            .iter()
            .filter_map(|&p| procstat::peak_rss_kib(p))
            .sum()
    }

    /// The server's own log, for error messages.
    pub fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(10)..].join("\n")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: signalling our own child by its id.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        for _ in 0..100 {
            if let Ok(Some(_)) = self.child.try_wait() {
                let _ = std::fs::remove_dir_all(&self.dir);
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A fresh scratch directory for one server run.
fn scratch(name: &str) -> Result<PathBuf, ServerError> {
    static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("bubble-bench-{}-{name}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(io_err(format!("create {}", dir.display())))?;
    Ok(dir)
}

/// Pins the child to `core`, gives it the largest open-files limit and
/// has the kernel send it SIGTERM when the generator dies: a generator
/// killed by a signal runs no `Drop`, and its servers would keep their
/// ports (nchan's is fixed) and cores.
fn confine(cmd: &mut Command, core: Option<usize>) {
    let generator = libc::pid_t::try_from(std::process::id()).unwrap_or(0);
    // SAFETY: the closure only makes async-signal-safe system calls.
    unsafe {
        cmd.pre_exec(move || {
            // Servers are spawned from the main thread, whose end is the
            // process's. A generator already gone before the request was
            // made would never send the signal: the child stops here.
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
            if libc::getppid() != generator {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            if let Some(core) = core {
                let mut set: libc::cpu_set_t = std::mem::zeroed();
                libc::CPU_SET(core, &mut set);
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
            }
            crate::limits::raise_nofile();
            Ok(())
        });
    }
}

/// Starts `bubble serve` on an ephemeral port with `store`, and its
/// `--write-delay-ms` when one is given.
pub fn start_bubble(
    bin: &Path,
    store: Store<'_>,
    pin: Pin,
    write_delay_ms: Option<u64>,
) -> Result<Server, ServerError> {
    if !bin.exists() {
        return Err(ServerError::Start(format!(
            "{} not found; build it with `cargo build --release -p bubble-server`",
            bin.display()
        )));
    }
    let dir = scratch("bubble")?;
    let store_spec = match store {
        Store::Memory => "memory".to_string(),
        Store::Sqlite => format!("sqlite:{}", dir.join("bubble.db").display()),
        Store::Cluster(node) => node.store.clone(),
    };
    let config = format!(
        r#"listen = "127.0.0.1:0"
store = "{store_spec}"
admins = ["bench"]

[[auth.tokens]]
token = "{TOKEN}"
principal = "bench"

[[apps]]
id = "{APP_ID}"
key = "{APP_KEY}"
secret = "{APP_SECRET}"
max_connections = 1000000

[limits]
frame_rate = 100000000
command_rate = 100000
max_subscriptions = 100000
"#
    );
    let conf_path = dir.join("bubble.toml");
    std::fs::write(&conf_path, config).map_err(io_err("write bubble.toml"))?;
    let log = std::fs::File::create(dir.join("server.log")).map_err(io_err("create server.log"))?;
    let mut cmd = Command::new(bin);
    cmd.arg("serve")
        .arg("--config")
        .arg(&conf_path)
        .arg("--listen")
        .arg("127.0.0.1:0")
        .arg("--store")
        .arg(&store_spec)
        .env("RUST_LOG", "warn")
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log);
    if let Some(ms) = write_delay_ms {
        cmd.args(["--write-delay-ms", &ms.to_string()]);
    }
    if let Store::Cluster(node) = store {
        cmd.args(["--broker", &node.broker])
            .args(["--broker-prefix", &node.prefix])
            .args(["--node-id", &node.node_id]);
    }
    confine(
        &mut cmd,
        if let Pin::Exec(c) = pin {
            Some(c)
        } else {
            None
        },
    );
    let server = spawn_listening("bubble", cmd, dir, bin)?;
    if let Pin::AfterStart(core) = pin {
        pin_threads(server.child.id(), core).map_err(io_err("pin the server's threads"))?;
    }
    Ok(server)
}

/// Spawns `cmd` and waits for its `listening on http://ADDR` line.
fn spawn_listening(
    name: &'static str,
    mut cmd: Command,
    dir: PathBuf,
    bin: &Path,
) -> Result<Server, ServerError> {
    let mut child = cmd
        .spawn()
        .map_err(io_err(format!("spawn {}", bin.display())))?;
    let stdout = child.stdout.take();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let Some(out) = stdout else { return };
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if let Some(addr) = line.strip_prefix("listening on http://") {
                let _ = tx.send(addr.trim().to_string());
            }
        }
    });
    let mut server = Server {
        name,
        addr: "127.0.0.1:0".parse().expect("static address"),
        child,
        dir,
        limit: std::sync::OnceLock::new(),
    };
    match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(addr) => {
            server.addr = addr
                .parse()
                .map_err(|_| ServerError::Start(format!("bad listening line address {addr}")))?;
            Ok(server)
        }
        Err(_) => Err(ServerError::Start(format!(
            "{name} did not print its listening line; log:\n{}",
            server.log_tail()
        ))),
    }
}

/// How the floor server writes (`bubble-floor --mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FloorMode {
    /// One `write` per frame per socket.
    Write,
    /// What is queued for a socket leaves in one `write` per loop turn.
    Writev,
    /// One `send` per frame, a publish's sends submitted at once
    /// (`io_uring`).
    Uring,
}

/// Starts `bubble-floor` (the binary next to this one), pinned to `core`.
pub fn start_floor(mode: FloorMode, core: Option<usize>) -> Result<Server, ServerError> {
    let bin = std::env::current_exe()
        .map_err(io_err("locate bubble-bench"))?
        .with_file_name("bubble-floor");
    let (name, flag) = match mode {
        FloorMode::Write => ("floor-write", "write"),
        FloorMode::Writev => ("floor-writev", "writev"),
        FloorMode::Uring => ("floor-uring", "uring"),
    };
    let dir = scratch(name)?;
    let log = std::fs::File::create(dir.join("server.log")).map_err(io_err("create server.log"))?;
    let mut cmd = Command::new(&bin);
    cmd.args(["--listen", "127.0.0.1:0", "--mode", flag])
        .current_dir(&dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(log);
    confine(&mut cmd, core);
    spawn_listening(name, cmd, dir, &bin)
}

/// Starts nginx with nchan from the config template at `conf`.
pub fn start_nchan(conf: &Path, core: Option<usize>) -> Result<Server, ServerError> {
    let addr: SocketAddr = NCHAN_ADDR.parse().expect("static address");
    if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
        return Err(ServerError::Start(format!(
            "something already listens on {addr}"
        )));
    }
    let template =
        std::fs::read_to_string(conf).map_err(io_err(format!("read {}", conf.display())))?;
    let dir = scratch("nchan")?;
    let conf_path = dir.join("nginx.conf");
    std::fs::write(
        &conf_path,
        template.replace("__RUN_DIR__", &dir.display().to_string()),
    )
    .map_err(io_err("write nginx.conf"))?;
    let log = std::fs::File::create(dir.join("server.log")).map_err(io_err("create server.log"))?;
    let mut cmd = Command::new("nginx");
    cmd.arg("-p")
        .arg(&dir)
        .arg("-e")
        .arg(dir.join("error.log"))
        .arg("-c")
        .arg(&conf_path)
        .arg("-g")
        .arg("daemon off;")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log);
    confine(&mut cmd, core);
    let child = cmd.spawn().map_err(io_err("spawn nginx"))?;
    let mut server = Server {
        name: "nchan",
        addr,
        child,
        dir,
        limit: std::sync::OnceLock::new(),
    };
    // As long as Bubble's start is given: nginx under valgrind
    // (scripts/bench-callgrind.sh) takes seconds to listen.
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_ok()
            && server.pids()[0] != server.child.id()
        {
            return Ok(server);
        }
        if let Ok(Some(status)) = server.child.try_wait() {
            let errors = std::fs::read_to_string(server.dir.join("error.log")).unwrap_or_default();
            return Err(ServerError::Start(format!(
                "nginx exited ({status}): {}{errors}",
                server.log_tail()
            )));
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    Err(ServerError::Start("nginx did not start listening".into()))
}

/// Moves every thread of `pid` to `core`.
fn pin_threads(pid: u32, core: usize) -> std::io::Result<()> {
    for task in std::fs::read_dir(format!("/proc/{pid}/task"))?.flatten() {
        let Some(tid) = task
            .file_name()
            .to_str()
            .and_then(|t| t.parse::<libc::pid_t>().ok())
        else {
            continue;
        };
        // SAFETY: a zeroed cpu_set_t is valid; the call only reads it.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(core, &mut set);
            if libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    Ok(())
}
