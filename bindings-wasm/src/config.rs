//! The engine's configuration as JSON: the same keys as `bubble.toml`
//! (`admins`, `auth.tokens`, `auth.jwt`, `auth.jwks`, `apps`, `limits`,
//! `heartbeat`).
//! Host-only keys (`listen`, `store`, `ws_path`, `broker`) are ignored here.

use bubble_core::{
    AppConfig, AuthConfig, ClaimRules, Config, Heartbeat, JwksConfig, KeyRefresh, Limits,
    PrincipalId,
};
use serde::Deserialize;

/// The top level of the JSON configuration.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ConfigJson {
    admins: Vec<PrincipalId>,
    auth: AuthJson,
    apps: Vec<AppJson>,
    limits: Limits,
    heartbeat: Heartbeat,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct AuthJson {
    tokens: Vec<TokenJson>,
    jwt: Option<JwtJson>,
    jwks: Option<JwksJson>,
}

/// `auth.jwks`: exactly one of an inline key set and the `url` the host
/// fetches it from when the engine asks (`fetchKeys` outputs): at start,
/// every `refresh_secs`, and when a token names a `kid` the set lacks,
/// at most once per `min_refresh_secs`, as the native server does.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JwksJson {
    /// The JWKS document itself, `{"keys": [...]}`.
    inline: Option<serde_json::Value>,
    /// Where the host GETs the document: `http://` or `https://`.
    url: Option<String>,
    #[serde(default = "default_refresh_secs")]
    refresh_secs: u64,
    #[serde(default = "default_min_refresh_secs")]
    min_refresh_secs: u64,
    issuer: Option<String>,
    audience: Option<String>,
}

/// `auth.jwks.refresh_secs` when not set (as in `bubble.toml`).
const DEFAULT_REFRESH_SECS: u64 = 300;
/// `auth.jwks.min_refresh_secs` when not set (as in `bubble.toml`).
const DEFAULT_MIN_REFRESH_SECS: u64 = 10;

fn default_refresh_secs() -> u64 {
    DEFAULT_REFRESH_SECS
}

fn default_min_refresh_secs() -> u64 {
    DEFAULT_MIN_REFRESH_SECS
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenJson {
    token: String,
    principal: PrincipalId,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JwtJson {
    secret: String,
    issuer: Option<String>,
    audience: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AppJson {
    id: String,
    key: String,
    secret: String,
    #[serde(default)]
    max_connections: Option<usize>,
    #[serde(default)]
    client_events: bool,
}

/// The engine's configuration and what only the host needs of it.
#[derive(Debug)]
pub(crate) struct Parsed {
    /// The engine's configuration.
    pub(crate) config: Config,
    /// Where the host fetches the key set (`auth.jwks.url`), if anywhere.
    pub(crate) key_url: Option<String>,
}

fn invalid(message: String) -> serde_json::Error {
    <serde_json::Error as serde::de::Error>::custom(message)
}

/// `auth.jwks` as the engine's config and the URL to fetch it from; an
/// inline set that is not a JWKS, a URL that is not `http(s)://`, both or
/// neither are refused.
fn jwks(j: JwksJson) -> Result<(JwksConfig, Option<String>), serde_json::Error> {
    let claims = ClaimRules {
        issuer: j.issuer,
        audience: j.audience,
    };
    match (j.inline, j.url) {
        (Some(inline), None) => {
            let keys = inline.to_string();
            bubble_core::auth::KeySet::parse(&keys)
                .map_err(|e| invalid(format!("auth.jwks.inline: {e}")))?;
            let config = JwksConfig {
                keys: Some(keys),
                refresh: None,
                claims,
            };
            Ok((config, None))
        }
        (None, Some(url)) => {
            let host = url
                .strip_prefix("https://")
                .or_else(|| url.strip_prefix("http://"));
            if host.is_none_or(|h| h.is_empty() || h.starts_with('/')) {
                return Err(invalid(format!(
                    "auth.jwks.url {url:?} must be an http:// or https:// URL"
                )));
            }
            if j.refresh_secs == 0 {
                return Err(invalid("auth.jwks.refresh_secs must be at least 1".into()));
            }
            let config = JwksConfig {
                keys: None,
                refresh: Some(KeyRefresh {
                    every_ms: j.refresh_secs.saturating_mul(1000),
                    min_interval_ms: j.min_refresh_secs.saturating_mul(1000),
                }),
                claims,
            };
            Ok((config, Some(url)))
        }
        _ => Err(invalid(
            "auth.jwks needs exactly one of inline (a JWKS document) and url".into(),
        )),
    }
}

/// Parses the JSON configuration; the error names the offending key.
pub(crate) fn parse(json: &str) -> Result<Parsed, serde_json::Error> {
    let c: ConfigJson = serde_json::from_str(json)?;
    let jwt_claims = c
        .auth
        .jwt
        .as_ref()
        .map_or_else(ClaimRules::default, |j| ClaimRules {
            issuer: j.issuer.clone(),
            audience: j.audience.clone(),
        });
    let (jwks, key_url) = match c.auth.jwks.map(jwks).transpose()? {
        Some((config, url)) => (Some(config), url),
        None => (None, None),
    };
    let config = Config {
        admins: c.admins,
        auth: AuthConfig {
            tokens: c
                .auth
                .tokens
                .into_iter()
                .map(|t| (t.token, t.principal))
                .collect(),
            jwt_secret: c.auth.jwt.map(|j| j.secret),
            jwt_claims,
            jwks,
        },
        apps: c
            .apps
            .into_iter()
            .map(|a| AppConfig {
                id: a.id,
                key: a.key,
                secret: a.secret,
                max_connections: a.max_connections,
                client_events: a.client_events,
                webhooks: Vec::new(),
            })
            .collect(),
        limits: c.limits,
        heartbeat: c.heartbeat,
        cluster: false,
        node: String::new(),
    };
    Ok(Parsed { config, key_url })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_object_is_the_default_config() {
        let c = parse("{}").unwrap().config;
        assert_eq!(c.limits, Limits::default());
        assert_eq!(c.heartbeat, Heartbeat::default());
        assert!(c.auth.tokens.is_empty() && c.apps.is_empty() && c.admins.is_empty());
    }

    #[test]
    fn keys_match_the_toml_file() {
        let c = parse(
            r#"{"listen":"127.0.0.1:3000","admins":["root"],
                "auth":{"tokens":[{"token":"dev-alice","principal":"alice"}],"jwt":{"secret":"s"}},
                "apps":[{"id":"app-1","key":"app-key","secret":"app-secret","max_connections":3}],
                "limits":{"backlog_page":7},"heartbeat":{"ping_interval_ms":5}}"#,
        )
        .unwrap()
        .config;
        assert_eq!(c.admins, vec![PrincipalId::new("root")]);
        assert_eq!(
            c.auth.tokens,
            vec![("dev-alice".to_owned(), PrincipalId::new("alice"))]
        );
        assert_eq!(c.auth.jwt_secret.as_deref(), Some("s"));
        assert_eq!(c.apps[0].max_connections, Some(3));
        assert_eq!(c.limits.backlog_page, 7);
        assert_eq!(c.limits.max_channels, Limits::default().max_channels);
        assert_eq!(c.heartbeat.ping_interval_ms, 5);
        assert_eq!(
            c.heartbeat.pong_timeout_ms,
            Heartbeat::default().pong_timeout_ms
        );
    }

    #[test]
    fn an_inline_jwks_and_claims() {
        let c = parse(
            r#"{"auth":{"jwt":{"secret":"s","audience":"a"},
                "jwks":{"inline":{"keys":[]},"issuer":"https://idp.example/"}}}"#,
        )
        .unwrap();
        assert_eq!(c.key_url, None);
        let c = c.config;
        assert_eq!(c.auth.jwt_claims.audience.as_deref(), Some("a"));
        let jwks = c.auth.jwks.unwrap();
        assert_eq!(jwks.keys.as_deref(), Some(r#"{"keys":[]}"#));
        assert_eq!(jwks.refresh, None);
        assert_eq!(jwks.claims.issuer.as_deref(), Some("https://idp.example/"));
        assert!(parse(r#"{"auth":{"jwks":{"inline":[]}}}"#).is_err());
    }

    #[test]
    fn a_jwks_url_is_fetched_on_the_toml_file_schedule() {
        let c = parse(
            r#"{"auth":{"jwks":{"url":"https://idp.example/jwks.json","min_refresh_secs":0}}}"#,
        )
        .unwrap();
        assert_eq!(c.key_url.as_deref(), Some("https://idp.example/jwks.json"));
        let jwks = c.config.auth.jwks.unwrap();
        assert_eq!(jwks.keys, None);
        let every_ms = DEFAULT_REFRESH_SECS * 1000;
        let refresh = KeyRefresh {
            every_ms,
            min_interval_ms: 0,
        };
        assert_eq!(jwks.refresh, Some(refresh));
    }

    #[test]
    fn a_jwks_needs_one_source_and_a_web_url() {
        for (json, says) in [
            (
                r#"{"url":"ftp://idp.example/jwks.json"}"#,
                "must be an http",
            ),
            (r#"{"url":"https:///jwks.json"}"#, "must be an http"),
            (
                r#"{"url":"https://idp.example/","refresh_secs":0}"#,
                "at least 1",
            ),
            (
                r#"{"url":"https://idp.example/","inline":{"keys":[]}}"#,
                "exactly one",
            ),
            (r#"{"issuer":"https://idp.example/"}"#, "exactly one"),
            (r#"{"file":"/etc/jwks.json"}"#, "file"),
        ] {
            let err = parse(&format!(r#"{{"auth":{{"jwks":{json}}}}}"#)).unwrap_err();
            assert!(err.to_string().contains(says), "{json}: {err}");
        }
    }

    #[test]
    fn a_misspelt_limit_is_refused() {
        let err = parse(r#"{"limits":{"backlog_pages":7}}"#).unwrap_err();
        assert!(err.to_string().contains("backlog_pages"), "{err}");
    }
}
