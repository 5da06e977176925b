//! The `bubble` server as a child process with its own temporary data dir.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write as _};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::binary::bubble_binary;
use crate::http::HttpClient;
use crate::ws::WsClient;
use crate::HANG_TIMEOUT;

/// The line the server prints on stdout once it accepts connections.
const LISTENING: &str = "listening on http://";

/// Where the server keeps threads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Store {
    /// `sqlite:<data dir>/bubble.db`: survives restarts of this [`Server`].
    Sqlite,
    /// `memory`: gone when the process exits.
    Memory,
    /// One node of a cluster (see [`crate::Deployment`]).
    Node(crate::cluster::NodeSpec),
}

/// A running `bubble serve`, killed when dropped.
///
/// The process listens on an ephemeral port of 127.0.0.1; each (re)start
/// may get a new port, so take URLs and clients after a restart.
pub struct Server {
    dir: TempDir,
    store: Store,
    child: Option<Child>,
    addr: SocketAddr,
    starts: u32,
    /// `RUST_LOG` for the child (None: inherited from the test).
    log_filter: Option<String>,
    /// Run the child on the machine's first CPU only.
    one_core: bool,
    /// Environment variables set for the child, besides the inherited ones.
    env: Vec<(String, String)>,
}

impl Server {
    /// Starts the server with `config_toml` on SQLite in a fresh temp dir.
    pub fn start(config_toml: &str) -> Server {
        Server::start_with_store(config_toml, Store::Sqlite)
    }

    /// Starts the server with `config_toml` and the given store.
    pub fn start_with_store(config_toml: &str, store: Store) -> Server {
        Server::start_with(config_toml, store, None)
    }

    /// Starts the server on SQLite with `RUST_LOG=<filter>` (e.g. `debug`),
    /// for tests that read what it logs.
    pub fn start_logging(config_toml: &str, filter: &str) -> Server {
        Server::start_with(config_toml, Store::Sqlite, Some(filter.to_owned()))
    }

    /// Starts the server with `config_toml` and `store`, held to the first
    /// CPU the tests may use (as `taskset -c` would): it then sizes itself
    /// for one core, the engine sharing its thread with the sockets.
    pub fn start_on_one_core(config_toml: &str, store: Store) -> Server {
        Server::build(config_toml, store, None, true)
    }

    /// Starts the server on SQLite with the variables of `env` set in its
    /// environment (e.g. `SSL_CERT_FILE`, the roots its HTTPS client trusts).
    pub fn start_with_env(config_toml: &str, env: &[(&str, &str)]) -> Server {
        let mut server = Server::prepare(config_toml, Store::Sqlite, None, false);
        server.env = env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        server.spawn();
        server
    }

    pub(crate) fn start_with(
        config_toml: &str,
        store: Store,
        log_filter: Option<String>,
    ) -> Server {
        Server::build(config_toml, store, log_filter, false)
    }

    fn build(
        config_toml: &str,
        store: Store,
        log_filter: Option<String>,
        one_core: bool,
    ) -> Server {
        let mut server = Server::prepare(config_toml, store, log_filter, one_core);
        server.spawn();
        server
    }

    /// A server with its temp dir and config written, not started yet.
    fn prepare(
        config_toml: &str,
        store: Store,
        log_filter: Option<String>,
        one_core: bool,
    ) -> Server {
        let dir = tempfile::Builder::new()
            .prefix("bubble-test-")
            .tempdir()
            .expect("temp dir");
        std::fs::write(dir.path().join("bubble.toml"), config_toml).expect("write config");
        std::fs::create_dir_all(dir.path().join("data")).expect("create data dir");
        Server {
            dir,
            store,
            child: None,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            starts: 0,
            log_filter,
            one_core,
            env: Vec::new(),
        }
    }

    fn spawn(&mut self) {
        let log = self.log_file();
        let mut cmd = Command::new(bubble_binary());
        cmd.arg("serve")
            .arg("--config")
            .arg(self.dir.path().join("bubble.toml"))
            .args(["--listen", "127.0.0.1:0", "--store", &self.store_spec()])
            .args(self.node_args())
            .current_dir(self.dir.path())
            .env_remove("BUBBLE_CONFIG")
            .env_remove("BUBBLE_LISTEN")
            .env_remove("BUBBLE_WS_PATH")
            .env_remove("BUBBLE_STORE")
            .env_remove("BUBBLE_BROKER")
            .env_remove("BUBBLE_BROKER_PREFIX")
            .env_remove("BUBBLE_NODE_ID")
            .env_remove("BUBBLE_WWW")
            // The roots its HTTPS clients trust are the test's to choose.
            .env_remove("SSL_CERT_FILE")
            .env_remove("SSL_CERT_DIR")
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log.try_clone().expect("clone log file")));
        if let Some(filter) = &self.log_filter {
            cmd.env("RUST_LOG", filter);
        }
        if self.one_core {
            use std::os::unix::process::CommandExt as _;
            // SAFETY: runs in the child between fork and exec, and only
            // calls `sched_setaffinity`, which is async-signal-safe.
            unsafe {
                cmd.pre_exec(first_cpu_only);
            }
        }
        let mut child = cmd.spawn().expect("spawn the bubble binary");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || forward_stdout(stdout, log, tx));
        self.starts += 1;
        let deadline = Instant::now() + HANG_TIMEOUT * 2;
        let addr = loop {
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(addr) => break addr,
                Err(mpsc::RecvTimeoutError::Timeout) if Instant::now() < deadline => {
                    if let Ok(Some(status)) = child.try_wait() {
                        panic!(
                            "bubble exited ({status}) before listening:\n{}",
                            self.logs()
                        );
                    }
                }
                Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("bubble never printed `{LISTENING}…`:\n{}", self.logs());
                }
            }
        };
        self.addr = addr;
        self.child = Some(child);
    }

    fn store_spec(&self) -> String {
        match &self.store {
            Store::Sqlite => format!("sqlite:{}", self.db_path().display()),
            Store::Memory => "memory".into(),
            Store::Node(node) => node.postgres.clone(),
        }
    }

    fn node_args(&self) -> Vec<String> {
        match &self.store {
            Store::Node(node) => node.args(),
            Store::Sqlite | Store::Memory => Vec::new(),
        }
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    fn log_file(&self) -> File {
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .expect("open server log");
        let _ = writeln!(file, "==== start #{}", self.starts + 1);
        file
    }

    /// The SQLite database file (used when the store is [`Store::Sqlite`]).
    pub fn db_path(&self) -> PathBuf {
        self.dir.path().join("data").join("bubble.db")
    }

    /// The temp dir holding the config, the data dir and the log.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// Everything the server wrote to stderr (and stray stdout lines).
    pub fn logs(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `ws://127.0.0.1:PORT` + `path_and_query` (e.g. `/v1/ws?access_token=…`).
    pub fn ws_url(&self, path_and_query: &str) -> String {
        format!("ws://{}{path_and_query}", self.addr)
    }

    /// An HTTP client that sends `Authorization: Bearer <token>`.
    pub fn http(&self, token: &str) -> HttpClient {
        HttpClient::new(&self.base_url(), Some(token))
    }

    /// An HTTP client that sends no `Authorization` header.
    pub fn http_anonymous(&self) -> HttpClient {
        HttpClient::new(&self.base_url(), None)
    }

    /// The value of the sample `name` on `/metrics`; panics when it is
    /// missing.
    pub async fn metric(&self, name: &str) -> u64 {
        let text = self
            .http_anonymous()
            .request("GET", "/metrics", &[], Vec::new())
            .await
            .text();
        metric_sample(&text, name).unwrap_or_else(|| panic!("{name} in /metrics:\n{text}")) as u64
    }

    /// A `/v1/ws` connection authenticated with `Authorization: Bearer <token>`.
    pub async fn ws(&self, token: &str) -> WsClient {
        WsClient::connect(&self.ws_url("/v1/ws"), Some(token))
            .await
            .unwrap_or_else(|e| panic!("connect /v1/ws: {e}\n{}", self.logs()))
    }

    /// The child's process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Sends SIGTERM and waits for the process to exit.
    pub fn terminate(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("the server is not running");
        signal(&child, libc::SIGTERM);
        let deadline = Instant::now() + HANG_TIMEOUT;
        loop {
            if let Some(status) = child.try_wait().expect("wait for bubble") {
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("bubble did not exit after SIGTERM:\n{}", self.logs());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Kills the process with SIGKILL (no chance to flush) and reaps it.
    pub fn kill9(&mut self) {
        let mut child = self.child.take().expect("the server is not running");
        let _ = child.kill();
        let _ = child.wait();
    }

    /// Stops the server if it runs (SIGTERM, expecting exit 0), then starts
    /// it again on the same config and data dir. The port may change.
    pub fn restart(&mut self) {
        if self.child.is_some() {
            let status = self.terminate();
            assert!(
                status.success(),
                "bubble exited with {status} on SIGTERM:\n{}",
                self.logs()
            );
        }
        self.spawn();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            let logs = self.logs();
            let tail: Vec<&str> = logs.lines().rev().take(80).collect();
            eprintln!("---- bubble server log (last lines) ----");
            for line in tail.iter().rev() {
                eprintln!("{line}");
            }
        }
    }
}

/// Holds the calling process to the lowest-numbered CPU it may run on.
fn first_cpu_only() -> std::io::Result<()> {
    let size = std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: a zeroed `cpu_set_t` is an empty set, filled by
    // `sched_getaffinity` with the CPUs this process may run on.
    let mut allowed: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `allowed` is a valid `cpu_set_t` of the size given.
    if unsafe { libc::sched_getaffinity(0, size, &mut allowed) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let cpus = usize::try_from(libc::CPU_SETSIZE).unwrap_or(0);
    // SAFETY: `CPU_ISSET` only reads `allowed`, below its size.
    let Some(cpu) = (0..cpus).find(|&cpu| unsafe { libc::CPU_ISSET(cpu, &allowed) }) else {
        return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
    };
    // SAFETY: a zeroed `cpu_set_t` is an empty set; `CPU_SET` writes it
    // below its size.
    let set = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        set
    };
    // SAFETY: `set` is a valid `cpu_set_t` of the size given.
    if unsafe { libc::sched_setaffinity(0, size, &set) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Sends `sig` to a child process that has not been reaped; asserts it was sent.
pub fn signal(child: &Child, sig: libc::c_int) {
    let pid = libc::pid_t::try_from(child.id()).expect("pid fits pid_t");
    // SAFETY: kill(2) has no memory effects; the pid is our own unreaped child.
    let rc = unsafe { libc::kill(pid, sig) };
    assert_eq!(rc, 0, "kill({pid}, {sig}) failed");
}

/// Reports the listening address, then keeps draining stdout into the log
/// so the child never blocks on a full pipe.
fn forward_stdout(stdout: std::process::ChildStdout, mut log: File, tx: mpsc::Sender<SocketAddr>) {
    let mut tx = Some(tx);
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        let _ = writeln!(log, "[stdout] {line}");
        if let Some(rest) = line.trim().strip_prefix(LISTENING) {
            if let (Some(sender), Ok(addr)) = (tx.as_ref(), rest.parse::<SocketAddr>()) {
                let _ = sender.send(addr);
                tx = None;
            }
        }
    }
}

/// The value of the sample `name` (with its labels, as the exposition
/// writes them: `bubble_errors_total{code="not_found"}`) in a `/metrics`
/// text, if it is there.
pub fn metric_sample(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find(|l| l.split_whitespace().next() == Some(name))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
}
