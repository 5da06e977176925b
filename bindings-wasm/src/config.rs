//! The engine's configuration as JSON: the same keys as `bubble.toml`
//! (`admins`, `auth.tokens`, `auth.jwt`, `apps`, `limits`, `heartbeat`).
//! Host-only keys (`listen`, `store`, `ws_path`, `broker`) are ignored here.

use bubble_core::{
    AppConfig, AuthConfig, ClaimRules, Config, Heartbeat, JwksConfig, Limits, PrincipalId,
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

/// `auth.jwks`: an inline key set (a worker fetches nothing on its own).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct JwksJson {
    /// The JWKS document itself, `{"keys": [...]}`.
    inline: serde_json::Value,
    issuer: Option<String>,
    audience: Option<String>,
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

/// `auth.jwks` as the engine's config; an inline set that is not a JWKS
/// is refused.
fn jwks(j: JwksJson) -> Result<JwksConfig, serde_json::Error> {
    let keys = j.inline.to_string();
    bubble_core::auth::KeySet::parse(&keys).map_err(|e| {
        <serde_json::Error as serde::de::Error>::custom(format!("auth.jwks.inline: {e}"))
    })?;
    Ok(JwksConfig {
        keys: Some(keys),
        refresh: None,
        claims: ClaimRules {
            issuer: j.issuer,
            audience: j.audience,
        },
    })
}

/// Parses the JSON configuration; the error names the offending key.
pub(crate) fn parse(json: &str) -> Result<Config, serde_json::Error> {
    let c: ConfigJson = serde_json::from_str(json)?;
    let jwt_claims = c
        .auth
        .jwt
        .as_ref()
        .map_or_else(ClaimRules::default, |j| ClaimRules {
            issuer: j.issuer.clone(),
            audience: j.audience.clone(),
        });
    let jwks = c.auth.jwks.map(jwks).transpose()?;
    Ok(Config {
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
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_object_is_the_default_config() {
        let c = parse("{}").unwrap();
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
        .unwrap();
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
        assert_eq!(c.auth.jwt_claims.audience.as_deref(), Some("a"));
        let jwks = c.auth.jwks.unwrap();
        assert_eq!(jwks.keys.as_deref(), Some(r#"{"keys":[]}"#));
        assert_eq!(jwks.refresh, None);
        assert_eq!(jwks.claims.issuer.as_deref(), Some("https://idp.example/"));
        assert!(parse(r#"{"auth":{"jwks":{"inline":[]}}}"#).is_err());
    }

    #[test]
    fn a_misspelt_limit_is_refused() {
        let err = parse(r#"{"limits":{"backlog_pages":7}}"#).unwrap_err();
        assert!(err.to_string().contains("backlog_pages"), "{err}");
    }
}
