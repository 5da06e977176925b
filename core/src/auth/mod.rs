//! Bearer authentication: static tokens, JWTs signed with a shared
//! secret (`HS256`), and JWTs signed with the keys of a JSON Web Key Set
//! (`RS256`, `ES256`, `EdDSA`).
//!
//! A JWT's header `alg` picks its driver: `HS256` the secret, the others
//! the key set (see [`jwks`] for which key may verify which algorithm). No
//! other `alg` is accepted, `none` included. Once the signature holds, the
//! claims are checked: `exp` and `nbf` when present, `iss` and `aud` when
//! the driver is configured with an issuer or an audience (then they are
//! required), and `sub`, the principal, must be a non-empty string.
//!
//! The key set is data: the host hands it in ([`KeySet::parse`], then
//! [`Input::KeysLoaded`](crate::Input::KeysLoaded)) when the engine asks
//! ([`Output::FetchKeys`](crate::Output::FetchKeys)), on the schedule of
//! [`refresh`]. A token naming a `kid` the set lacks waits for a fetch
//! (one that starts then, or the one in flight) and is decided again with
//! the set it brings; when no fetch may start (the minimum interval since
//! the last one has not passed, or [`MAX_WAITING`] wait already) it is
//! refused at once.

use hmac::{Hmac, Mac};
use sha2::{Digest as _, Sha256};

use crate::config::{AuthConfig, ClaimRules};
use crate::error::BubbleError;
use crate::ids::{Millis, PrincipalId};
use crate::maps::HashMap;

pub mod jwks;
mod jwt;
pub mod refresh;
mod waiting;

pub use jwks::{JwksError, KeySet};
pub use waiting::MAX_WAITING;
pub(crate) use waiting::{KeyWait, Waiter};

use jwt::{Alg, Token};

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
    /// The JWT's `iss` is not the configured issuer.
    #[error("The bearer token's issuer is not accepted.")]
    WrongIssuer,
    /// The JWT's `aud` does not name the configured audience.
    #[error("The bearer token's audience is not accepted.")]
    WrongAudience,
    /// The JWT names a `kid` that the key set does not hold.
    #[error("The bearer token's signing key is unknown.")]
    UnknownKey,
}

impl From<AuthError> for BubbleError {
    fn from(err: AuthError) -> BubbleError {
        BubbleError::Unauthorized(err.to_string())
    }
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
    secret: Option<(Vec<u8>, ClaimRules)>,
    jwks: Option<(KeySet, ClaimRules)>,
}

impl Authenticator {
    /// Drivers from config. An inline key set that does not parse is an
    /// empty one (hosts check it with [`KeySet::parse`] when they load
    /// their config).
    pub fn new(config: &AuthConfig) -> Authenticator {
        Authenticator {
            tokens: config
                .tokens
                .iter()
                .map(|(token, principal)| (digest(token), principal.clone()))
                .collect(),
            secret: config
                .jwt_secret
                .as_ref()
                .map(|s| (s.as_bytes().to_vec(), config.jwt_claims.clone())),
            jwks: config.jwks.as_ref().map(|j| {
                let keys = j.keys.as_deref().and_then(|k| KeySet::parse(k).ok());
                (keys.unwrap_or_default(), j.claims.clone())
            }),
        }
    }

    /// The principal `token` stands for at `now`.
    pub fn authenticate(&self, token: &str, now: Millis) -> Result<PrincipalId, AuthError> {
        if let Some(principal) = self.tokens.get(&digest(token)) {
            return Ok(principal.clone());
        }
        let token = Token::split(token)?;
        let rules = match (token.alg, &self.secret, &self.jwks) {
            (Alg::Hs256, Some((secret, rules)), _) => {
                let mut mac =
                    Hmac::<Sha256>::new_from_slice(secret).map_err(|_| AuthError::Invalid)?;
                mac.update(token.signing_input);
                mac.verify_slice(&token.signature)
                    .map_err(|_| AuthError::Invalid)?;
                rules
            }
            (Alg::Rs256 | Alg::Es256 | Alg::EdDsa, _, Some((keys, rules))) => {
                keys.verify(&token)?;
                rules
            }
            _ => return Err(AuthError::Invalid),
        };
        token.principal(rules, now)
    }

    /// Replaces the key set of the JWKS driver (none configured: ignored).
    pub fn set_keys(&mut self, keys: KeySet) {
        if let Some((current, _)) = &mut self.jwks {
            *current = keys;
        }
    }
}

/// Signs `claims` as an HS256 JWT (for tests, tools and examples).
pub fn sign_jwt(secret: &[u8], claims: &serde_json::Value) -> String {
    use base64::Engine as _;
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
mod jwks_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;
    use serde_json::json;

    fn auth() -> Authenticator {
        Authenticator::new(&AuthConfig {
            tokens: vec![("dev-alice".into(), PrincipalId::new("alice"))],
            jwt_secret: Some("s3cret".into()),
            ..AuthConfig::default()
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
