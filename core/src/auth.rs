//! Bearer authentication: the static token driver and the JWT HS256 driver.

use std::collections::HashMap;

use base64::Engine as _;
use hmac::{Hmac, Mac};
use serde::Deserialize;
use sha2::{Digest as _, Sha256};

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
    /// The JWT's `nbf` is still ahead.
    #[error("The bearer token is not valid yet.")]
    NotYetValid,
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
    nbf: Option<u64>,
}

/// The SHA-256 digest of a static token: the table is keyed by digests, so
/// a lookup compares digests, never the secret tokens themselves, and its
/// timing tells nothing about how much of a guess matched.
type TokenDigest = [u8; 32];

fn digest(token: &str) -> TokenDigest {
    Sha256::digest(token.as_bytes()).into()
}

/// Resolves bearer tokens to principals through the configured drivers.
#[derive(Debug, Clone, Default)]
pub struct Authenticator {
    tokens: HashMap<TokenDigest, PrincipalId>,
    jwt_secret: Option<Vec<u8>>,
}

impl Authenticator {
    /// Drivers from config.
    pub fn new(config: &AuthConfig) -> Authenticator {
        Authenticator {
            tokens: config
                .tokens
                .iter()
                .map(|(token, principal)| (digest(token), principal.clone()))
                .collect(),
            jwt_secret: config.jwt_secret.as_ref().map(|s| s.as_bytes().to_vec()),
        }
    }

    /// The principal `token` stands for at `now`.
    pub fn authenticate(&self, token: &str, now: Millis) -> Result<PrincipalId, AuthError> {
        if let Some(principal) = self.tokens.get(&digest(token)) {
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
    if claims
        .nbf
        .is_some_and(|nbf| nbf.saturating_mul(1000) > now.0)
    {
        return Err(AuthError::NotYetValid);
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

    #[test]
    fn jwt_nbf_in_the_future_is_refused() {
        let token = sign_jwt(b"s3cret", &json!({"sub": "bob", "nbf": 100}));
        assert_eq!(
            auth().authenticate(&token, Millis(99_999)),
            Err(AuthError::NotYetValid)
        );
        assert_eq!(
            auth().authenticate(&token, Millis(100_000)),
            Ok(PrincipalId::new("bob"))
        );
    }

    /// A token whose header names another algorithm is refused whatever its
    /// signature: `none` with no signature, `none` or `RS256` or `HS512`
    /// signed with the HS256 secret.
    #[test]
    fn jwt_alg_confusion_is_refused() {
        let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
        let payload = b64.encode(json!({"sub": "bob"}).to_string());
        for alg in ["none", "None", "RS256", "HS512", "hs256", ""] {
            let header = b64.encode(json!({"alg": alg, "typ": "JWT"}).to_string());
            let input = format!("{header}.{payload}");
            let mut mac = Hmac::<Sha256>::new_from_slice(b"s3cret").expect("key");
            mac.update(input.as_bytes());
            let signature = b64.encode(mac.finalize().into_bytes());
            for token in [format!("{input}."), format!("{input}.{signature}")] {
                assert_eq!(
                    auth().authenticate(&token, Millis(0)),
                    Err(AuthError::Invalid),
                    "alg {alg:?}: {token}"
                );
            }
        }
        let header = b64.encode(br#"{"typ":"JWT"}"#);
        let token = format!("{header}.{payload}.");
        assert_eq!(
            auth().authenticate(&token, Millis(0)),
            Err(AuthError::Invalid)
        );
    }

    #[test]
    fn a_static_token_must_match_whole() {
        let auth = auth();
        for guess in ["dev-alic", "dev-alice ", "DEV-ALICE", "", "dev-alicf"] {
            assert_eq!(
                auth.authenticate(guess, Millis(0)),
                Err(AuthError::Invalid),
                "{guess:?}"
            );
        }
    }
}
