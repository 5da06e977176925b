//! Bearer authentication: the static token driver and the JWT HS256 driver.

use std::collections::HashMap;

use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde::Deserialize;
use sha2::Sha256;

use crate::config::AuthConfig;
use crate::error::BubbleError;
use crate::ids::{Millis, PrincipalId};

/// Why a bearer was refused. Peers only ever see `unauthorized`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// No bearer was presented.
    #[error("A bearer token is required.")]
    Missing,
    /// The bearer is neither a known token nor a valid JWT.
    #[error("The bearer token is invalid.")]
    Invalid,
    /// The JWT's `exp` has passed.
    #[error("The bearer token has expired.")]
    Expired,
}

impl From<AuthError> for BubbleError {
    fn from(err: AuthError) -> BubbleError {
        BubbleError::Unauthorized(err.to_string())
    }
}

#[derive(Deserialize)]
struct Claims {
    sub: String,
    exp: Option<u64>,
}

/// Resolves bearer tokens to principals through the configured drivers.
#[derive(Debug, Clone, Default)]
pub struct Authenticator {
    tokens: HashMap<String, PrincipalId>,
    jwt_secret: Option<Vec<u8>>,
}

impl Authenticator {
    /// Drivers from config.
    pub fn new(config: &AuthConfig) -> Authenticator {
        Authenticator {
            tokens: config.tokens.iter().cloned().collect(),
            jwt_secret: config.jwt_secret.as_ref().map(|s| s.as_bytes().to_vec()),
        }
    }

    /// The principal `token` stands for at `now`.
    pub fn authenticate(&self, token: &str, now: Millis) -> Result<PrincipalId, AuthError> {
        if let Some(principal) = self.tokens.get(token) {
            return Ok(principal.clone());
        }
        match &self.jwt_secret {
            Some(secret) => verify_jwt(secret, token, now),
            None => Err(AuthError::Invalid),
        }
    }
}

fn verify_jwt(secret: &[u8], token: &str, now: Millis) -> Result<PrincipalId, AuthError> {
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let mut parts = token.split('.');
    let (Some(header), Some(payload), Some(signature), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(AuthError::Invalid);
    };
    let header: serde_json::Value =
        serde_json::from_slice(&b64.decode(header).map_err(|_| AuthError::Invalid)?)
            .map_err(|_| AuthError::Invalid)?;
    if header.get("alg").and_then(|a| a.as_str()) != Some("HS256") {
        return Err(AuthError::Invalid);
    }
    let signature = b64.decode(signature).map_err(|_| AuthError::Invalid)?;
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).map_err(|_| AuthError::Invalid)?;
    mac.update(&token.as_bytes()[..header_and_payload_len(token)]);
    mac.verify_slice(&signature)
        .map_err(|_| AuthError::Invalid)?;
    let claims: Claims =
        serde_json::from_slice(&b64.decode(payload).map_err(|_| AuthError::Invalid)?)
            .map_err(|_| AuthError::Invalid)?;
    if claims
        .exp
        .is_some_and(|exp| exp.saturating_mul(1000) <= now.0)
    {
        return Err(AuthError::Expired);
    }
    if claims.sub.is_empty() {
        return Err(AuthError::Invalid);
    }
    Ok(PrincipalId::new(claims.sub))
}

fn header_and_payload_len(token: &str) -> usize {
    token.rfind('.').unwrap_or(0)
}

/// Signs `claims` as an HS256 JWT (for tests, tools and examples).
pub fn sign_jwt(secret: &[u8], claims: &serde_json::Value) -> String {
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let header = b64.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
    let payload = b64.encode(claims.to_string());
    let signing_input = format!("{header}.{payload}");
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC accepts any key length");
    mac.update(signing_input.as_bytes());
    let signature = b64.encode(mac.finalize().into_bytes());
    format!("{signing_input}.{signature}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn auth() -> Authenticator {
        Authenticator::new(&AuthConfig {
            tokens: vec![("dev-alice".into(), PrincipalId::new("alice"))],
            jwt_secret: Some("s3cret".into()),
        })
    }

    #[test]
    fn static_tokens() {
        assert_eq!(
            auth().authenticate("dev-alice", Millis(0)),
            Ok(PrincipalId::new("alice"))
        );
        assert_eq!(
            auth().authenticate("nope", Millis(0)),
            Err(AuthError::Invalid)
        );
    }

    #[test]
    fn jwt_sub_and_exp() {
        let token = sign_jwt(b"s3cret", &json!({"sub": "bob", "exp": 100}));
        assert_eq!(
            auth().authenticate(&token, Millis(99_999)),
            Ok(PrincipalId::new("bob"))
        );
        assert_eq!(
            auth().authenticate(&token, Millis(100_000)),
            Err(AuthError::Expired)
        );
        let forged = sign_jwt(b"other", &json!({"sub": "bob"}));
        assert_eq!(
            auth().authenticate(&forged, Millis(0)),
            Err(AuthError::Invalid)
        );
    }
}
