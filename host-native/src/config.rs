//! The server's settings: the TOML config file, merged with environment
//! variables and flags (flags win, then env, then the file), or the dev
//! config when no file is given.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bubble_core::edge::{AllowedOrigins, Cors, Edge, DEFAULT_MAX_AGE_SECS, DEFAULT_WS_PATH};
use bubble_core::{
    AppConfig, ClaimRules, Config, Heartbeat, JwksConfig, KeyRefresh, Limits, PrincipalId,
    WebhookConfig,
};
use serde::Deserialize;

use crate::cli::ServeArgs;
use crate::cluster::{BrokerSpec, BrokerSpecError, ClusterSettings};
use crate::jwks::JwksSource;
use crate::store::{StoreSpec, StoreSpecError};

/// Everything `bubble serve` runs with.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Listen address, e.g. `127.0.0.1:3000`.
    pub listen: String,
    /// The store.
    pub store: StoreSpec,
    /// The request edge, with the path of the threads WebSocket.
    pub edge: Edge,
    /// A directory served at `/` instead of the page built into the binary.
    pub www: Option<PathBuf>,
    /// The engine's configuration.
    pub engine: Config,
    /// Whether the dev config is in use (no config file was given).
    pub dev: bool,
    /// This node's place in a cluster (`--broker redis://…`).
    pub cluster: Option<ClusterSettings>,
    /// Threads that write the sockets a fan-out queued to; 0: the engine's
    /// thread writes them; `None`: chosen from the machine's cores.
    pub io_threads: Option<usize>,
    /// Whether the engine's thread submits a turn's socket writes as one
    /// `io_uring` batch (when the kernel offers it); `None`: yes.
    pub io_uring: Option<bool>,
    /// How long frames queued to a socket may wait to share one send
    /// (`write_delay_ms`); zero: written at the end of each engine turn.
    pub write_delay: Duration,
    /// Where the JWKS driver's keys come from (`[auth.jwks]`).
    pub jwks: Option<JwksSource>,
    /// How Pusher webhooks are delivered (`[webhooks]`).
    pub webhooks: WebhookSettings,
}

/// Webhook delivery, for every app's endpoints (`[webhooks]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookSettings {
    /// Batches one endpoint may have waiting; past it, new batches are
    /// dropped (logged and counted in `bubble_webhook_batches_dropped_total`).
    pub queue_batches: usize,
    /// Extra root certificates (a PEM file) trusted for `https://`
    /// endpoints, beside the bundled Mozilla roots.
    pub ca_file: Option<PathBuf>,
}

impl Default for WebhookSettings {
    fn default() -> WebhookSettings {
        WebhookSettings {
            queue_batches: 10_000,
            ca_file: None,
        }
    }
}

impl WebhookSettings {
    fn from_file(file: Option<&FileWebhooks>) -> Result<WebhookSettings, ConfigError> {
        let mut settings = WebhookSettings::default();
        let Some(file) = file else {
            return Ok(settings);
        };
        if let Some(queue) = file.queue_batches {
            if queue == 0 {
                return Err(ConfigError::Invalid(
                    "webhooks.queue_batches must be at least 1".into(),
                ));
            }
            settings.queue_batches = queue;
        }
        if let Some(path) = &file.ca_file {
            if !path.is_file() {
                return Err(ConfigError::Invalid(format!(
                    "webhooks.ca_file {:?} is not a file",
                    path.display().to_string()
                )));
            }
            settings.ca_file = Some(path.clone());
        }
        Ok(settings)
    }
}

/// A config that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("reading {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not valid config TOML.
    #[error("parsing {path}: {source}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// Why.
        source: Box<toml::de::Error>,
    },
    /// The store setting.
    #[error(transparent)]
    Store(#[from] StoreSpecError),
    /// The broker setting.
    #[error(transparent)]
    Broker(#[from] BrokerSpecError),
    /// A broker without a store the nodes can share.
    #[error(
        "a cluster (--broker redis://…) needs a store every node shares: --store postgres://…"
    )]
    ClusterStore,
    /// Any other invalid value.
    #[error("{0}")]
    Invalid(String),
}

/// The config file's shape (SPEC §1); unknown keys are rejected so typos
/// do not pass silently.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    listen: Option<String>,
    store: Option<String>,
    broker: Option<String>,
    broker_prefix: Option<String>,
    node_id: Option<String>,
    ws_path: Option<String>,
    www: Option<PathBuf>,
    io_threads: Option<usize>,
    io_uring: Option<bool>,
    write_delay_ms: Option<u64>,
    #[serde(default)]
    admins: Vec<String>,
    #[serde(default)]
    auth: FileAuth,
    #[serde(default)]
    apps: Vec<FileApp>,
    #[serde(default)]
    limits: Limits,
    #[serde(default)]
    heartbeat: Heartbeat,
    cors: Option<FileCors>,
    websocket: Option<FileWebsocket>,
    webhooks: Option<FileWebhooks>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileWebhooks {
    queue_batches: Option<usize>,
    ca_file: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileAuth {
    #[serde(default)]
    tokens: Vec<FileToken>,
    jwt: Option<FileJwt>,
    jwks: Option<FileJwks>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileJwks {
    url: Option<String>,
    file: Option<PathBuf>,
    #[serde(default = "default_refresh_secs")]
    refresh_secs: u64,
    #[serde(default = "default_min_refresh_secs")]
    min_refresh_secs: u64,
    issuer: Option<String>,
    audience: Option<String>,
}

/// `[auth.jwks] refresh_secs` when not set.
pub const DEFAULT_REFRESH_SECS: u64 = 300;
/// `[auth.jwks] min_refresh_secs` when not set.
pub const DEFAULT_MIN_REFRESH_SECS: u64 = 10;
/// The longest `write_delay_ms` accepted: a second, already far more
/// than a realtime client waits for a reply.
pub const MAX_WRITE_DELAY_MS: u64 = 1000;

fn default_refresh_secs() -> u64 {
    DEFAULT_REFRESH_SECS
}

fn default_min_refresh_secs() -> u64 {
    DEFAULT_MIN_REFRESH_SECS
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileCors {
    allowed_origins: Vec<String>,
    #[serde(default)]
    allow_credentials: bool,
    #[serde(default = "default_max_age_secs")]
    max_age_secs: u64,
}

fn default_max_age_secs() -> u64 {
    DEFAULT_MAX_AGE_SECS
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileWebsocket {
    allowed_origins: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileToken {
    token: String,
    principal: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileJwt {
    secret: String,
    issuer: Option<String>,
    audience: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileApp {
    id: String,
    key: String,
    secret: String,
    max_connections: Option<usize>,
    #[serde(default)]
    client_events: bool,
    #[serde(default)]
    webhooks: Vec<FileWebhook>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileWebhook {
    url: String,
    event_types: Vec<String>,
}

/// The dev config's bearer tokens: `(token, principal)`.
pub const DEV_TOKENS: [(&str, &str); 3] = [
    ("dev-alice", "alice"),
    ("dev-bob", "bob"),
    ("dev-root", "root"),
];
/// The dev config's admin principal.
pub const DEV_ADMIN: &str = "root";
/// The dev config's channel app: `(id, key, secret)`.
pub const DEV_APP: (&str, &str, &str) = ("app-1", "app-key", "app-secret");

fn dev_file() -> FileConfig {
    FileConfig {
        admins: vec![DEV_ADMIN.to_owned()],
        auth: FileAuth {
            tokens: DEV_TOKENS
                .iter()
                .map(|(t, p)| FileToken {
                    token: (*t).to_owned(),
                    principal: (*p).to_owned(),
                })
                .collect(),
            jwt: None,
            jwks: None,
        },
        apps: vec![FileApp {
            id: DEV_APP.0.to_owned(),
            key: DEV_APP.1.to_owned(),
            secret: DEV_APP.2.to_owned(),
            max_connections: None,
            client_events: false,
            webhooks: Vec::new(),
        }],
        ..FileConfig::default()
    }
}

/// The cluster settings, when a broker is configured.
fn cluster(
    args: &ServeArgs,
    file: &FileConfig,
    store: &StoreSpec,
) -> Result<Option<ClusterSettings>, ConfigError> {
    let broker = BrokerSpec::parse(args.broker.as_deref().or(file.broker.as_deref()))?;
    let BrokerSpec::Redis(url) = broker else {
        return Ok(None);
    };
    let Some(deployment) = crate::cluster::deployment(store) else {
        return Err(ConfigError::ClusterStore);
    };
    let prefix = args
        .broker_prefix
        .clone()
        .or_else(|| file.broker_prefix.clone())
        .unwrap_or_else(|| format!("bubble:{deployment}"));
    let node = match args.node_id.clone().or_else(|| file.node_id.clone()) {
        Some(id) if !id.is_empty() && id.bytes().all(|b| b.is_ascii_graphic()) => id,
        Some(id) => {
            return Err(ConfigError::Invalid(format!(
                "node id {id:?} must be printable ASCII without spaces"
            )))
        }
        None => format!(
            "{:016x}",
            getrandom::u64().map_err(|e| ConfigError::Invalid(e.to_string()))?
        ),
    };
    Ok(Some(ClusterSettings { url, prefix, node }))
}

fn invalid(e: impl std::fmt::Display) -> ConfigError {
    ConfigError::Invalid(e.to_string())
}

/// The request edge: routes at `ws_path`, CORS, socket origins.
fn edge(
    ws_path: &str,
    cors: Option<&FileCors>,
    websocket: Option<&FileWebsocket>,
) -> Result<Edge, ConfigError> {
    let mut edge = Edge::new(ws_path).map_err(invalid)?;
    if let Some(c) = cors {
        let origins = AllowedOrigins::parse(&c.allowed_origins).map_err(invalid)?;
        let cors = Cors::new(origins, c.allow_credentials, c.max_age_secs).map_err(invalid)?;
        edge = edge.with_cors(cors);
    }
    if let Some(w) = websocket {
        let origins = AllowedOrigins::parse(&w.allowed_origins).map_err(invalid)?;
        edge = edge.with_socket_origins(origins);
    }
    Ok(edge)
}

/// `[auth.jwks]`: where its keys come from, and the driver's config. A
/// file is read (and must be a JWKS) now, so that a typo stops the start.
fn jwks(j: &FileJwks) -> Result<(JwksSource, JwksConfig), ConfigError> {
    let (source, keys) = match (&j.url, &j.file) {
        (Some(url), None) => {
            let uri: hyper::Uri = url
                .parse()
                .map_err(|e| invalid(format!("auth.jwks.url {url:?}: {e}")))?;
            if !matches!(uri.scheme_str(), Some("http" | "https")) || uri.host().is_none() {
                return Err(invalid(format!(
                    "auth.jwks.url {url:?} must be an http:// or https:// URL"
                )));
            }
            (JwksSource::Url(uri), None)
        }
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                path: path.clone(),
                source,
            })?;
            bubble_core::auth::KeySet::parse(&text)
                .map_err(|e| invalid(format!("auth.jwks.file {}: {e}", path.display())))?;
            (JwksSource::File(path.clone()), Some(text))
        }
        _ => {
            return Err(invalid(
                "auth.jwks needs exactly one of url = \"https://…\" and file = \"PATH\"",
            ))
        }
    };
    if j.refresh_secs == 0 {
        return Err(invalid("auth.jwks.refresh_secs must be at least 1"));
    }
    let config = JwksConfig {
        keys,
        refresh: Some(KeyRefresh {
            every_ms: j.refresh_secs.saturating_mul(1000),
            min_interval_ms: j.min_refresh_secs.saturating_mul(1000),
        }),
        claims: ClaimRules {
            issuer: j.issuer.clone(),
            audience: j.audience.clone(),
        },
    };
    Ok((source, config))
}

impl Settings {
    /// Merges flags and env (already in `args`) over the config file.
    pub fn load(args: &ServeArgs) -> Result<Settings, ConfigError> {
        match &args.config {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                    path: path.to_owned(),
                    source,
                })?;
                Settings::from_toml(args, path, &text)
            }
            None => Settings::merge(args, dev_file(), true),
        }
    }

    /// Parses the config file's `text` (read from `path`, which errors
    /// name) and merges `args` over it.
    pub fn from_toml(args: &ServeArgs, path: &Path, text: &str) -> Result<Settings, ConfigError> {
        let file = toml::from_str(text).map_err(|source| ConfigError::Parse {
            path: path.to_owned(),
            source: Box::new(source),
        })?;
        Settings::merge(args, file, false)
    }

    fn merge(args: &ServeArgs, file: FileConfig, dev: bool) -> Result<Settings, ConfigError> {
        let store = match args.store.as_deref().or(file.store.as_deref()) {
            Some(raw) => StoreSpec::parse(raw)?,
            None => StoreSpec::default_sqlite(),
        };
        let cluster = cluster(args, &file, &store)?;
        let ws_path = args
            .ws_path
            .as_deref()
            .or(file.ws_path.as_deref())
            .unwrap_or(DEFAULT_WS_PATH);
        let edge = edge(ws_path, file.cors.as_ref(), file.websocket.as_ref())?;
        let (jwks_source, jwks) = match &file.auth.jwks {
            Some(j) => {
                let (source, config) = jwks(j)?;
                (Some(source), Some(config))
            }
            None => (None, None),
        };
        let www = args.www.clone().or(file.www);
        if let Some(dir) = www.as_ref().filter(|dir| !dir.is_dir()) {
            return Err(ConfigError::Invalid(format!(
                "www {:?} is not a directory (leave it unset to serve the built-in page)",
                dir.display().to_string()
            )));
        }
        let write_delay_ms = args.write_delay_ms.or(file.write_delay_ms).unwrap_or(0);
        if write_delay_ms > MAX_WRITE_DELAY_MS {
            return Err(ConfigError::Invalid(format!(
                "write_delay_ms must be at most {MAX_WRITE_DELAY_MS}"
            )));
        }
        let heartbeat = file.heartbeat;
        let limits = file.limits;
        if limits.outbound_queue_frames == 0 {
            return Err(ConfigError::Invalid(
                "limits.outbound_queue_frames must be at least 1".into(),
            ));
        }
        for app in &file.apps {
            for hook in &app.webhooks {
                let hook = WebhookConfig {
                    url: hook.url.clone(),
                    event_types: hook.event_types.clone(),
                };
                hook.validate()
                    .map_err(|e| ConfigError::Invalid(format!("app {:?}: {e}", app.id)))?;
            }
        }
        let webhooks = WebhookSettings::from_file(file.webhooks.as_ref())?;
        let engine = Config {
            admins: file.admins.iter().map(PrincipalId::new).collect(),
            auth: bubble_core::AuthConfig {
                tokens: file
                    .auth
                    .tokens
                    .iter()
                    .map(|t| (t.token.clone(), PrincipalId::new(t.principal.clone())))
                    .collect(),
                jwt_secret: file.auth.jwt.as_ref().map(|j| j.secret.clone()),
                jwt_claims: file
                    .auth
                    .jwt
                    .as_ref()
                    .map_or_else(ClaimRules::default, |j| ClaimRules {
                        issuer: j.issuer.clone(),
                        audience: j.audience.clone(),
                    }),
                jwks,
            },
            apps: file
                .apps
                .iter()
                .map(|a| AppConfig {
                    id: a.id.clone(),
                    key: a.key.clone(),
                    secret: a.secret.clone(),
                    max_connections: a.max_connections,
                    client_events: a.client_events,
                    webhooks: a
                        .webhooks
                        .iter()
                        .map(|w| WebhookConfig {
                            url: w.url.clone(),
                            event_types: w.event_types.clone(),
                        })
                        .collect(),
                })
                .collect(),
            limits,
            heartbeat,
            cluster: cluster.is_some(),
            node: cluster.as_ref().map(|c| c.node.clone()).unwrap_or_default(),
        };
        Ok(Settings {
            listen: args
                .listen
                .clone()
                .or(file.listen)
                .unwrap_or_else(|| "127.0.0.1:3000".into()),
            store,
            edge,
            www,
            engine,
            dev,
            cluster,
            io_threads: args.io_threads.or(file.io_threads),
            io_uring: args.io_uring.or(file.io_uring),
            write_delay: Duration::from_millis(write_delay_ms),
            jwks: jwks_source,
            webhooks,
        })
    }

    /// What a newcomer needs to try the dev config, printed on start-up.
    pub fn dev_banner(&self, base: &str) -> String {
        let tokens: Vec<String> = DEV_TOKENS
            .iter()
            .map(|(t, p)| format!("    {t:<10} -> {p}"))
            .collect();
        format!(
            "Dev config (no --config given); do not use it in production.\n\
             Bearer tokens:\n{}\n\
             Admin principal: {DEV_ADMIN}\n\
             Channel app: id {} key {} secret {}\n\
             Try:\n\
             \x20   curl -X POST {base}/v1/threads -H 'Authorization: Bearer dev-alice' \
             -H 'Content-Type: application/json' -d '{{\"threadId\":\"hello\"}}'\n\
             \x20   curl -X POST {base}/v1/threads/hello/events -H 'Authorization: Bearer dev-alice' \
             -d '{{\"type\":\"run_started\",\"runId\":\"run-1\"}}'\n\
             \x20   websocat '{}{}?access_token=dev-alice'",
            tokens.join("\n"),
            DEV_APP.0,
            DEV_APP.1,
            DEV_APP.2,
            base.replacen("http", "ws", 1),
            self.edge.ws_path(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> ServeArgs {
        ServeArgs::default()
    }

    #[test]
    fn no_config_is_the_dev_config() {
        let s = Settings::load(&args()).unwrap();
        assert!(s.dev);
        assert_eq!(s.listen, "127.0.0.1:3000");
        assert_eq!(s.store, StoreSpec::default_sqlite());
        assert_eq!(s.edge.ws_path(), "/v1/ws");
        assert_eq!(s.engine.auth.tokens.len(), 3);
        assert_eq!(s.engine.admins, vec![PrincipalId::new("root")]);
        assert_eq!(s.engine.apps[0].key, "app-key");
    }

    #[test]
    fn www_is_the_built_in_page_unless_a_directory_is_given() {
        assert_eq!(Settings::load(&args()).unwrap().www, None);
        let dir = tempfile::tempdir().unwrap();
        let with = |www: PathBuf| ServeArgs {
            www: Some(www),
            ..args()
        };
        let s = Settings::load(&with(dir.path().to_owned())).unwrap();
        assert_eq!(s.www.as_deref(), Some(dir.path()));
        let err = Settings::load(&with(dir.path().join("missing"))).unwrap_err();
        assert!(matches!(err, ConfigError::Invalid(_)), "{err}");
    }

    #[test]
    fn file_keys_and_flag_precedence() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bubble.toml");
        std::fs::write(
            &path,
            r#"
            listen = "0.0.0.0:4000"
            store = "memory"
            admins = ["boss"]
            [[auth.tokens]]
            token = "t1"
            principal = "p1"
            [auth.jwt]
            secret = "s"
            [[apps]]
            id = "a"
            key = "k"
            secret = "x"
            max_connections = 3
            client_events = true
            [[apps.webhooks]]
            url = "http://127.0.0.1:9/hooks"
            event_types = ["member_added"]
            [limits]
            max_event_bytes = 10
            [heartbeat]
            ping_interval_ms = 5
            "#,
        )
        .unwrap();
        let mut a = args();
        a.config = Some(path);
        a.listen = Some("127.0.0.1:0".into());
        let s = Settings::load(&a).unwrap();
        assert!(!s.dev);
        assert_eq!(s.listen, "127.0.0.1:0");
        assert_eq!(s.store, StoreSpec::Memory);
        assert_eq!(s.engine.limits.max_event_bytes, 10);
        assert_eq!(
            s.engine.limits.max_subscriptions,
            Limits::default().max_subscriptions
        );
        assert_eq!(s.engine.heartbeat.ping_interval_ms, 5);
        assert!(s.engine.apps[0].client_events);
        assert_eq!(
            s.engine.apps[0].webhooks,
            [WebhookConfig {
                url: "http://127.0.0.1:9/hooks".into(),
                event_types: vec!["member_added".into()],
            }]
        );
        assert_eq!(s.engine.auth.jwt_secret.as_deref(), Some("s"));
        assert_eq!(s.engine.apps[0].max_connections, Some(3));
    }

    #[test]
    fn the_example_config_loads() {
        let example = concat!(env!("CARGO_MANIFEST_DIR"), "/../bubble.example.toml");
        let mut a = args();
        a.config = Some(PathBuf::from(example));
        let s = Settings::load(&a).unwrap();
        assert_eq!(s.engine.limits, Limits::default());
        assert_eq!(s.engine.heartbeat, Heartbeat::default());
        assert_eq!(s.engine.admins, vec![PrincipalId::new("root")]);
        assert_eq!(s.engine.apps.len(), 1);
    }

    fn load_toml(text: &str) -> Result<Settings, ConfigError> {
        Settings::from_toml(&args(), Path::new("bubble.toml"), text)
    }

    #[test]
    fn jwks_cors_and_socket_origins() {
        let s = load_toml(
            r#"
            [auth.jwt]
            secret = "s"
            issuer = "me"
            [auth.jwks]
            url = "https://idp.example/.well-known/jwks.json"
            audience = "bubble"
            [cors]
            allowed_origins = ["https://app.example"]
            [websocket]
            allowed_origins = ["https://app.example"]
            "#,
        )
        .unwrap();
        assert_eq!(s.engine.auth.jwt_claims.issuer.as_deref(), Some("me"));
        let jwks = s.engine.auth.jwks.as_ref().unwrap();
        assert_eq!(jwks.keys, None);
        assert_eq!(
            jwks.refresh,
            Some(KeyRefresh {
                every_ms: DEFAULT_REFRESH_SECS * 1000,
                min_interval_ms: DEFAULT_MIN_REFRESH_SECS * 1000,
            })
        );
        assert_eq!(jwks.claims.audience.as_deref(), Some("bubble"));
        assert!(matches!(s.jwks, Some(JwksSource::Url(_))));
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("jwks.json");
        std::fs::write(&file, r#"{"keys": []}"#).unwrap();
        let s = load_toml(&format!(
            "[auth.jwks]\nfile = {:?}\n",
            file.display().to_string()
        ))
        .unwrap();
        assert_eq!(
            s.engine.auth.jwks.unwrap().keys.as_deref(),
            Some(r#"{"keys": []}"#)
        );
        std::fs::write(&file, "[]").unwrap();
        for bad in [
            format!("[auth.jwks]\nfile = {:?}\n", file.display().to_string()),
            "[auth.jwks]\nfile = \"/nonexistent/jwks.json\"\n".to_owned(),
            "[auth.jwks]\nrefresh_secs = 5\n".to_owned(),
            "[auth.jwks]\nurl = \"ftp://idp/jwks\"\n".to_owned(),
            "[auth.jwks]\nurl = \"https://idp/jwks\"\nrefresh_secs = 0\n".to_owned(),
            "[cors]\nallowed_origins = [\"app.example\"]\n".to_owned(),
            "[cors]\nallowed_origins = [\"*\"]\nallow_credentials = true\n".to_owned(),
            "[websocket]\nallowed_origins = [\"https://a.example/x\"]\n".to_owned(),
        ] {
            assert!(load_toml(&bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn ws_path_cannot_shadow_other_routes() {
        for bad in [
            "/socket",
            "/healthz",
            "v1/ws",
            "/v1/threads/ws",
            "/api/apps/ws",
            "/ws?x",
        ] {
            let mut a = args();
            a.ws_path = Some(bad.into());
            assert!(
                matches!(Settings::load(&a), Err(ConfigError::Invalid(_))),
                "{bad}"
            );
        }
        let mut a = args();
        a.ws_path = Some("/ws".into());
        assert_eq!(Settings::load(&a).unwrap().edge.ws_path(), "/ws");
    }

    #[test]
    fn write_delay_is_bounded_and_the_flag_wins() {
        assert_eq!(load_toml("").unwrap().write_delay, Duration::ZERO);
        let s = load_toml("write_delay_ms = 20\n").unwrap();
        assert_eq!(s.write_delay, Duration::from_millis(20));
        let err = load_toml("write_delay_ms = 1001\n").unwrap_err();
        assert_eq!(err.to_string(), "write_delay_ms must be at most 1000");
        let mut a = args();
        a.write_delay_ms = Some(5);
        let s = Settings::from_toml(&a, Path::new("bubble.toml"), "write_delay_ms = 1001\n");
        assert_eq!(s.unwrap().write_delay, Duration::from_millis(5));
    }

    #[test]
    fn webhooks_are_checked_at_load() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bubble.toml");
        let load = |hooks: &str| {
            let text = format!("[[apps]]\nid = \"a\"\nkey = \"k\"\nsecret = \"s\"\n{hooks}");
            std::fs::write(&path, text).unwrap();
            let mut a = args();
            a.config = Some(path.clone());
            Settings::load(&a).map_err(|e| e.to_string())
        };
        let ok = load(
            "[[apps.webhooks]]\nurl = \"https://hooks.test/p\"\nevent_types = [\"client_event\"]\n\
             [webhooks]\nqueue_batches = 5\n",
        )
        .unwrap();
        assert_eq!(ok.webhooks.queue_batches, 5);
        assert_eq!(load("").unwrap().webhooks, WebhookSettings::default());
        for (hooks, says) in [
            (
                "[[apps.webhooks]]\nurl = \"ftp://x/\"\nevent_types = [\"client_event\"]\n",
                r#"app "a": webhook url "ftp://x/" must be http://HOST… or https://HOST…"#,
            ),
            (
                "[[apps.webhooks]]\nurl = \"http://x/\"\nevent_types = [\"channel_created\"]\n",
                r#"app "a": webhook "http://x/": unknown event type "channel_created""#,
            ),
            (
                "[[apps.webhooks]]\nurl = \"http://x/\"\nevent_types = []\n",
                r#"app "a": webhook "http://x/" lists no event_types"#,
            ),
            (
                "[webhooks]\nqueue_batches = 0\n",
                "webhooks.queue_batches must be at least 1",
            ),
            (
                "[webhooks]\nca_file = \"/no/such/file.pem\"\n",
                r#"webhooks.ca_file "/no/such/file.pem" is not a file"#,
            ),
        ] {
            let err = load(hooks).unwrap_err();
            assert!(err.starts_with(says), "{err}");
        }
    }

    #[test]
    fn unknown_keys_are_rejected() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bubble.toml");
        std::fs::write(&path, "[limits]\nmax_event_byte = 1\n").unwrap();
        let mut a = args();
        a.config = Some(path);
        assert!(matches!(Settings::load(&a), Err(ConfigError::Parse { .. })));
    }

    #[test]
    fn unavailable_backends_fail_fast() {
        let mut a = args();
        a.store = Some("postgres://localhost/bubble?schema=Bad".into());
        let err = Settings::load(&a).unwrap_err().to_string();
        assert!(err.contains("invalid PostgreSQL schema"), "{err}");
        let mut a = args();
        a.store = Some("postgres://localhost/bubble".into());
        assert_eq!(
            Settings::load(&a).unwrap().store,
            StoreSpec::Postgres {
                url: "postgres://localhost/bubble".into(),
                schema: "bubble".into()
            }
        );
    }

    #[test]
    fn a_cluster_needs_a_shared_store_and_a_known_broker() {
        let mut a = args();
        a.broker = Some("redis://localhost".into());
        a.store = Some("memory".into());
        let err = Settings::load(&a).unwrap_err();
        assert!(matches!(err, ConfigError::ClusterStore), "{err}");
        a.broker = Some("nats://localhost".into());
        let err = Settings::load(&a).unwrap_err();
        assert!(matches!(err, ConfigError::Broker(_)), "{err}");
        a.broker = Some("none".into());
        let s = Settings::load(&a).unwrap();
        assert!(s.cluster.is_none() && !s.engine.cluster);
    }
}
