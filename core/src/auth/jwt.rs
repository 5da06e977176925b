//! The parts of a compact JWS (RFC 7515 §7.1) and the claims Bubble checks
//! (RFC 7519 §4.1): `sub`, `exp`, `nbf`, `iss`, `aud`.

use base64::Engine as _;
use serde::Deserialize;

use super::AuthError;
use crate::config::ClaimRules;
use crate::ids::{Millis, PrincipalId};

/// The signature algorithms Bubble verifies, by their `alg` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Alg {
    /// `HS256`: HMAC-SHA256 with the configured secret.
    Hs256,
    /// `RS256`: RSASSA-PKCS1-v1_5 with SHA-256, an RSA key of the JWKS.
    Rs256,
    /// `ES256`: ECDSA on P-256 with SHA-256, an EC key of the JWKS.
    Es256,
    /// `EdDSA` (or its fully specified name `Ed25519`, RFC 9864): an OKP
    /// Ed25519 key of the JWKS.
    EdDsa,
}

impl Alg {
    /// The algorithm named exactly `name` (names are case-sensitive).
    fn parse(name: &str) -> Option<Alg> {
        match name {
            "HS256" => Some(Alg::Hs256),
            "RS256" => Some(Alg::Rs256),
            "ES256" => Some(Alg::Es256),
            "EdDSA" | "Ed25519" => Some(Alg::EdDsa),
            _ => None,
        }
    }
}

#[derive(Deserialize)]
struct Header {
    alg: String,
    kid: Option<String>,
    crit: Option<serde_json::Value>,
}

/// A token split into its parts, its signature not yet checked.
pub(super) struct Token<'a> {
    /// The algorithm its header names.
    pub(super) alg: Alg,
    /// The `alg` header as written (a JWK's `alg` must equal it).
    pub(super) alg_name: String,
    /// The `kid` header.
    pub(super) kid: Option<String>,
    /// `header.payload`, the bytes the signature covers.
    pub(super) signing_input: &'a [u8],
    /// The decoded signature.
    pub(super) signature: Vec<u8>,
    payload: &'a str,
}

fn decode(part: &str) -> Result<Vec<u8>, AuthError> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(part)
        .map_err(|_| AuthError::Invalid)
}

impl<'a> Token<'a> {
    /// Splits `token`; anything that is not three base64url parts with a
    /// JSON header naming a supported `alg` is [`AuthError::Invalid`]. A
    /// header with `crit` is refused: no extension is understood here.
    pub(super) fn split(token: &'a str) -> Result<Token<'a>, AuthError> {
        let mut parts = token.split('.');
        let (Some(header), Some(payload), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(AuthError::Invalid);
        };
        let header: Header =
            serde_json::from_slice(&decode(header)?).map_err(|_| AuthError::Invalid)?;
        if header.crit.is_some() {
            return Err(AuthError::Invalid);
        }
        let alg = Alg::parse(&header.alg).ok_or(AuthError::Invalid)?;
        let signed = token.len() - signature.len() - 1;
        Ok(Token {
            alg,
            alg_name: header.alg,
            kid: header.kid,
            signing_input: &token.as_bytes()[..signed],
            signature: decode(signature)?,
            payload,
        })
    }

    /// The principal of a token whose signature was verified, once its
    /// claims pass `rules` at `now`.
    pub(super) fn principal(
        &self,
        rules: &ClaimRules,
        now: Millis,
    ) -> Result<PrincipalId, AuthError> {
        let claims: Claims =
            serde_json::from_slice(&decode(self.payload)?).map_err(|_| AuthError::Invalid)?;
        claims.check(rules, now)
    }
}

/// `aud`: one string or an array of strings (RFC 7519 §4.1.3).
#[derive(Deserialize)]
#[serde(untagged)]
enum Audience {
    One(String),
    Many(Vec<String>),
}

impl Audience {
    fn contains(&self, audience: &str) -> bool {
        match self {
            Audience::One(one) => one == audience,
            Audience::Many(many) => many.iter().any(|a| a == audience),
        }
    }
}

#[derive(Deserialize)]
struct Claims {
    sub: String,
    exp: Option<u64>,
    nbf: Option<u64>,
    iss: Option<String>,
    aud: Option<Audience>,
}

impl Claims {
    fn check(self, rules: &ClaimRules, now: Millis) -> Result<PrincipalId, AuthError> {
        if self
            .exp
            .is_some_and(|exp| exp.saturating_mul(1000) <= now.0)
        {
            return Err(AuthError::Expired);
        }
        if self.nbf.is_some_and(|nbf| nbf.saturating_mul(1000) > now.0) {
            return Err(AuthError::NotYetValid);
        }
        if let Some(issuer) = &rules.issuer {
            if self.iss.as_deref() != Some(issuer.as_str()) {
                return Err(AuthError::WrongIssuer);
            }
        }
        if let Some(audience) = &rules.audience {
            if !self.aud.is_some_and(|aud| aud.contains(audience)) {
                return Err(AuthError::WrongAudience);
            }
        }
        if self.sub.is_empty() {
            return Err(AuthError::Invalid);
        }
        Ok(PrincipalId::new(self.sub))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(claims: serde_json::Value, rules: &ClaimRules) -> Result<PrincipalId, AuthError> {
        serde_json::from_value::<Claims>(claims)
            .map_err(|_| AuthError::Invalid)?
            .check(rules, Millis(1_000_000))
    }

    #[test]
    fn issuer_and_audience_are_required_once_configured() {
        let none = ClaimRules::default();
        let both = ClaimRules {
            issuer: Some("https://idp.example".into()),
            audience: Some("bubble".into()),
        };
        let good = json!({"sub": "a", "iss": "https://idp.example", "aud": "bubble"});
        assert_eq!(check(good.clone(), &both), Ok(PrincipalId::new("a")));
        assert_eq!(check(json!({"sub": "a"}), &none), Ok(PrincipalId::new("a")));
        let many = json!({"sub": "a", "iss": "https://idp.example", "aud": ["x", "bubble"]});
        assert_eq!(check(many, &both), Ok(PrincipalId::new("a")));
        for (claims, err) in [
            (json!({"sub": "a", "aud": "bubble"}), AuthError::WrongIssuer),
            (
                json!({"sub": "a", "iss": "https://idp.example/", "aud": "bubble"}),
                AuthError::WrongIssuer,
            ),
            (
                json!({"sub": "a", "iss": "https://idp.example"}),
                AuthError::WrongAudience,
            ),
            (
                json!({"sub": "a", "iss": "https://idp.example", "aud": ["x"]}),
                AuthError::WrongAudience,
            ),
            (
                json!({"sub": "a", "iss": "https://idp.example", "aud": "Bubble"}),
                AuthError::WrongAudience,
            ),
            (
                json!({"iss": "https://idp.example", "aud": "bubble"}),
                AuthError::Invalid,
            ),
            (
                json!({"sub": "", "iss": "https://idp.example", "aud": "bubble"}),
                AuthError::Invalid,
            ),
        ] {
            assert_eq!(check(claims.clone(), &both), Err(err), "{claims}");
        }
    }

    #[test]
    fn time_claims_come_before_issuer_and_audience() {
        let rules = ClaimRules {
            issuer: Some("i".into()),
            audience: None,
        };
        assert_eq!(
            check(json!({"sub": "a", "exp": 1000}), &rules),
            Err(AuthError::Expired)
        );
        assert_eq!(
            check(json!({"sub": "a", "nbf": 1001}), &rules),
            Err(AuthError::NotYetValid)
        );
    }

    #[test]
    fn algorithm_names_are_exact() {
        for (name, alg) in [
            ("HS256", Some(Alg::Hs256)),
            ("RS256", Some(Alg::Rs256)),
            ("ES256", Some(Alg::Es256)),
            ("EdDSA", Some(Alg::EdDsa)),
            ("Ed25519", Some(Alg::EdDsa)),
            ("none", None),
            ("rs256", None),
            ("RS512", None),
            ("PS256", None),
            ("ES384", None),
            ("", None),
        ] {
            assert_eq!(Alg::parse(name), alg, "{name}");
        }
    }
}
