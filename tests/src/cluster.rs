//! Cluster deployments for black-box tests: nodes of `bubble` sharing one
//! PostgreSQL schema and one Redis key prefix, both unique to the test.
//!
//! PostgreSQL is the machine's (`BUBBLE_TEST_POSTGRES`, default
//! `postgres://postgres:postgres@127.0.0.1:5432/test`), Redis the machine's
//! (`BUBBLE_TEST_REDIS`, default `redis://127.0.0.1:6379`) or one started
//! by the test ([`OwnRedis`]) when the test restarts it.

use std::net::{SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::server::{Server, Store};
use crate::HANG_TIMEOUT;

/// The PostgreSQL server the tests use.
pub fn postgres_url() -> String {
    std::env::var("BUBBLE_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres:postgres@127.0.0.1:5432/test".into())
}

/// The Redis server the tests use unless they start their own.
pub fn redis_url() -> String {
    std::env::var("BUBBLE_TEST_REDIS").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// How one node is started: its store, broker, key prefix and node id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    /// `--store`: the deployment's PostgreSQL URL with its schema.
    pub postgres: String,
    /// `--broker`: a Redis URL, or `None` for a node without a broker.
    pub broker: Option<String>,
    /// `--broker-prefix`.
    pub prefix: String,
    /// `--node-id`.
    pub node_id: String,
}

impl NodeSpec {
    /// The node's extra command-line arguments.
    pub(crate) fn args(&self) -> Vec<String> {
        let mut args = vec!["--node-id".to_owned(), self.node_id.clone()];
        if let Some(broker) = &self.broker {
            args.extend([
                "--broker".to_owned(),
                broker.clone(),
                "--broker-prefix".to_owned(),
                self.prefix.clone(),
            ]);
        }
        args
    }
}

/// A deployment: a fresh schema and key prefix, dropped with it.
pub struct Deployment {
    schema: String,
    postgres: String,
    broker: Option<String>,
    nodes: u32,
    /// A role of the deployment's own, dropped with it.
    role: Option<String>,
}

/// A suffix no other deployment of any test process shares: the process id,
/// a count of this process's deployments (tests of one binary run at once)
/// and the time, each in its own field.
fn unique_suffix() -> String {
    static DEPLOYMENTS: AtomicU64 = AtomicU64::new(0);
    let nth = DEPLOYMENTS.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{:x}_{nth:x}_{nanos:x}", std::process::id())
}

impl Deployment {
    /// A deployment on the machine's PostgreSQL and Redis.
    pub fn new() -> Deployment {
        Deployment::with_broker(Some(redis_url()))
    }

    /// A deployment whose nodes use `broker` (`None`: no broker).
    pub fn with_broker(broker: Option<String>) -> Deployment {
        let schema = format!("bubble_t_{}", unique_suffix());
        Deployment {
            postgres: format!("{}?schema={schema}", postgres_url()),
            schema,
            broker,
            nodes: 0,
            role: None,
        }
    }

    /// Nodes connect as a login role of the deployment's own whose
    /// password is `password`: their `--store` URL carries it in its
    /// userinfo (`postgres://role:password@host/db`).
    pub fn with_own_role(mut self, password: &str) -> Deployment {
        let role = format!("{}_role", self.schema);
        admin_sql(&format!(
            "CREATE ROLE {role} LOGIN PASSWORD '{password}'; \
             DO $$ BEGIN EXECUTE format('GRANT CREATE ON DATABASE %I TO {role}', current_database()); END $$;"
        ));
        let url = postgres_url();
        let (scheme, rest) = url.split_once("://").expect("a postgres:// URL");
        let host = rest.split_once('@').map_or(rest, |(_, host)| host);
        self.postgres = format!("{scheme}://{role}:{password}@{host}?schema={}", self.schema);
        self.role = Some(role);
        self
    }

    /// Reaches PostgreSQL through `addr` (a [`crate::Proxy`] in front of it).
    pub fn postgres_via(mut self, addr: SocketAddr) -> Deployment {
        let url = postgres_url();
        let host_start = url
            .find('@')
            .map_or(url.find("//").map_or(0, |i| i + 2), |i| i + 1);
        let host_end = url[host_start..]
            .find('/')
            .map_or(url.len(), |i| host_start + i);
        self.postgres = format!(
            "{}{addr}{}?schema={}",
            &url[..host_start],
            &url[host_end..],
            self.schema
        );
        self
    }

    /// The `--store` value of every node.
    pub fn store_url(&self) -> &str {
        &self.postgres
    }

    /// The next node's spec (`node-1`, `node-2`, …).
    pub fn spec(&mut self) -> NodeSpec {
        self.nodes += 1;
        NodeSpec {
            postgres: self.postgres.clone(),
            broker: self.broker.clone(),
            prefix: format!("bubble-test:{}", self.schema),
            node_id: format!("node-{}", self.nodes),
        }
    }

    /// Starts another node with `config_toml` without waiting for it to be
    /// ready.
    pub fn node_unchecked(&mut self, config_toml: &str) -> Server {
        Server::start_with_store(config_toml, Store::Node(self.spec()))
    }

    /// Starts another node with `config_toml` and waits until it is ready
    /// (store answering, broker subscribed).
    pub fn node(&mut self, config_toml: &str) -> Server {
        let server = Server::start_with_store(config_toml, Store::Node(self.spec()));
        wait_ready(&server);
        server
    }

    /// Like [`Deployment::node`], logging at `RUST_LOG=filter` (see
    /// [`Server::logs`]).
    pub fn node_logging(&mut self, config_toml: &str, filter: &str) -> Server {
        let spec = Store::Node(self.spec());
        let server = Server::start_with(config_toml, spec, Some(filter.to_owned()));
        wait_ready(&server);
        server
    }

    /// Runs one SQL statement in the deployment's schema and returns the
    /// first column of each row.
    pub fn sql(&self, statement: &str) -> Vec<String> {
        let out = Command::new("psql")
            .arg(postgres_url())
            .args(["-qtAX", "-v", "ON_ERROR_STOP=1", "-c"])
            .arg(format!("SET search_path TO {}; {statement}", self.schema))
            .output()
            .expect("run psql");
        assert!(
            out.status.success(),
            "psql failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.is_empty())
            .map(str::to_owned)
            .collect()
    }
}

/// `GET /readyz`'s status (blocking).
pub fn readyz(server: &Server) -> u16 {
    crate::raw_request(
        server.addr(),
        b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .status
}

/// Polls `GET /readyz` until it answers `status`.
pub fn wait_readyz(server: &Server, status: u16) {
    let deadline = Instant::now() + HANG_TIMEOUT;
    while readyz(server) != status {
        assert!(
            Instant::now() < deadline,
            "/readyz never answered {status}:\n{}",
            server.logs()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Polls `GET /readyz` until it answers 200.
pub fn wait_ready(server: &Server) {
    wait_readyz(server, 200);
}

impl Default for Deployment {
    fn default() -> Deployment {
        Deployment::new()
    }
}

/// Runs `statements` as the machine's PostgreSQL user; panics on failure.
fn admin_sql(statements: &str) {
    let out = Command::new("psql")
        .arg(postgres_url())
        .args(["-qtAX", "-v", "ON_ERROR_STOP=1", "-c", statements])
        .output()
        .expect("run psql");
    assert!(
        out.status.success(),
        "psql failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Drop for Deployment {
    fn drop(&mut self) {
        let mut statements = format!("DROP SCHEMA IF EXISTS {} CASCADE;", self.schema);
        if let Some(role) = &self.role {
            statements.push_str(&format!(
                " DROP OWNED BY {role}; DROP ROLE IF EXISTS {role};"
            ));
        }
        let _ = Command::new("psql")
            .arg(postgres_url())
            .args(["-qtAX", "-c", &statements])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

/// A Redis server of the test's own, on a free port, that the test may
/// stop and start again (it keeps nothing across restarts).
pub struct OwnRedis {
    port: u16,
    child: Option<Child>,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl OwnRedis {
    /// Starts `redis-server` on a free port.
    pub fn start() -> OwnRedis {
        let mut redis = OwnRedis {
            port: free_port(),
            child: None,
        };
        redis.spawn();
        redis
    }

    fn spawn(&mut self) {
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .args(["--port", &self.port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server");
        self.child = Some(child);
        let deadline = Instant::now() + HANG_TIMEOUT;
        while self.cli(&["PING"]).as_deref() != Some("PONG") {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The server's address.
    pub fn addr(&self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.port))
    }

    /// Runs a `redis-cli` command; its output, or `None` when it failed.
    pub fn cli(&self, args: &[&str]) -> Option<String> {
        let out = Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(args)
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// Kills the server (everything it held is gone).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts it again, empty, on the same port.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        self.stop();
    }
}
