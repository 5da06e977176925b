//! JSON Web Key Sets (RFC 7517) of the asymmetric JWT driver: RSA keys
//! for `RS256`, P-256 keys for `ES256`, Ed25519 keys for `EdDSA`.
//!
//! A key is used only for the algorithm its type fits (an RSA key never
//! verifies an `ES256` or `HS256` token, whatever the token's header says),
//! and only for that algorithm's exact `alg` when the key names one. Keys
//! that cannot verify a Bubble algorithm (`oct` secrets, `use: "enc"`,
//! other curves, RSA moduli under 2048 bits, an `alg` such as `RS512`) are
//! skipped: identity providers publish such keys beside their signing keys.

use std::fmt;
use std::sync::Arc;

use base64::Engine as _;
use ed25519_dalek::Verifier as _; // the `signature` crate's trait, which every key type here implements
use serde::Deserialize;

use super::jwt::{Alg, Token};
use super::AuthError;

/// The smallest RSA modulus accepted, in bits.
const RSA_MIN_BITS: usize = 2048;
/// The largest RSA modulus accepted, in bits.
const RSA_MAX_BITS: usize = 8192;

/// A JWKS document that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a JSON Web Key Set: {0}")]
pub struct JwksError(String);

/// The verification keys of one JWKS document, cheap to clone.
#[derive(Clone, Default)]
pub struct KeySet {
    keys: Arc<[Jwk]>,
}

impl fmt::Debug for KeySet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list()
            .entries(self.keys.iter().map(|k| (k.kid.as_deref(), k.key.kty())))
            .finish()
    }
}

struct Jwk {
    kid: Option<String>,
    alg: Option<String>,
    key: PublicKey,
}

enum PublicKey {
    Rsa(Box<rsa::pkcs1v15::VerifyingKey<rsa::sha2::Sha256>>),
    P256(p256::ecdsa::VerifyingKey),
    Ed25519(ed25519_dalek::VerifyingKey),
}

impl PublicKey {
    fn kty(&self) -> &'static str {
        match self {
            PublicKey::Rsa(_) => "RSA",
            PublicKey::P256(_) => "EC",
            PublicKey::Ed25519(_) => "OKP",
        }
    }

    fn fits(&self, alg: Alg) -> bool {
        matches!(
            (self, alg),
            (PublicKey::Rsa(_), Alg::Rs256)
                | (PublicKey::P256(_), Alg::Es256)
                | (PublicKey::Ed25519(_), Alg::EdDsa)
        )
    }

    fn verifies(&self, message: &[u8], signature: &[u8]) -> bool {
        match self {
            PublicKey::Rsa(key) => rsa::pkcs1v15::Signature::try_from(signature)
                .is_ok_and(|sig| key.verify(message, &sig).is_ok()),
            // JWS carries ES256 signatures as R || S, 32 bytes each (RFC 7518 §3.4).
            PublicKey::P256(key) => {
                signature.len() == 64
                    && p256::ecdsa::Signature::from_slice(signature)
                        .is_ok_and(|sig| key.verify(message, &sig).is_ok())
            }
            PublicKey::Ed25519(key) => ed25519_dalek::Signature::from_slice(signature)
                .is_ok_and(|sig| key.verify_strict(message, &sig).is_ok()),
        }
    }
}

/// One key of the document as written; every field is optional here so
/// that a key Bubble cannot use is skipped, not fatal.
#[derive(Deserialize)]
struct RawKey {
    kty: Option<String>,
    kid: Option<String>,
    alg: Option<String>,
    #[serde(rename = "use")]
    usage: Option<String>,
    key_ops: Option<Vec<String>>,
    crv: Option<String>,
    n: Option<String>,
    e: Option<String>,
    x: Option<String>,
    y: Option<String>,
}

#[derive(Deserialize)]
struct Document {
    keys: Vec<serde_json::Value>,
}

fn bytes(field: Option<&String>) -> Option<Vec<u8>> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(field?)
        .ok()
}

impl RawKey {
    /// The key, when Bubble can verify tokens with it.
    fn usable(self) -> Option<Jwk> {
        if self.usage.as_deref().is_some_and(|u| u != "sig") {
            return None;
        }
        if self
            .key_ops
            .as_ref()
            .is_some_and(|ops| !ops.iter().any(|op| op == "verify"))
        {
            return None;
        }
        let (key, algs): (PublicKey, &[&str]) = match (self.kty.as_deref()?, self.crv.as_deref()) {
            ("RSA", _) => (self.rsa()?, &["RS256"]),
            ("EC", Some("P-256")) => (self.p256()?, &["ES256"]),
            ("OKP", Some("Ed25519")) => (self.ed25519()?, &["EdDSA", "Ed25519"]),
            _ => return None,
        };
        if self.alg.as_deref().is_some_and(|alg| !algs.contains(&alg)) {
            return None;
        }
        Some(Jwk {
            kid: self.kid,
            alg: self.alg,
            key,
        })
    }

    fn rsa(&self) -> Option<PublicKey> {
        let n = bytes(self.n.as_ref())?;
        let e = bytes(self.e.as_ref())?;
        let bits = |b: &[u8]| u32::try_from(b.len().checked_mul(8)?).ok();
        let n = rsa::BoxedUint::from_be_slice(&n, bits(&n)?).ok()?;
        let e = rsa::BoxedUint::from_be_slice(&e, bits(&e)?).ok()?;
        let key = rsa::PublicKey::new_with_size_limits(n, e, RSA_MIN_BITS..=RSA_MAX_BITS).ok()?;
        Some(PublicKey::Rsa(Box::new(rsa::pkcs1v15::VerifyingKey::new(
            key,
        ))))
    }

    fn p256(&self) -> Option<PublicKey> {
        let (x, y) = (bytes(self.x.as_ref())?, bytes(self.y.as_ref())?);
        if x.len() != 32 || y.len() != 32 {
            return None;
        }
        let mut point = Vec::with_capacity(65);
        point.push(0x04);
        point.extend_from_slice(&x);
        point.extend_from_slice(&y);
        p256::ecdsa::VerifyingKey::from_sec1_bytes(&point)
            .ok()
            .map(PublicKey::P256)
    }

    fn ed25519(&self) -> Option<PublicKey> {
        let x: [u8; 32] = bytes(self.x.as_ref())?.try_into().ok()?;
        ed25519_dalek::VerifyingKey::from_bytes(&x)
            .ok()
            .map(PublicKey::Ed25519)
    }
}

impl KeySet {
    /// The usable keys of a JWKS document (`{"keys": [...]}`). The
    /// document must be JSON with a `keys` array; keys in it that Bubble
    /// cannot use are skipped.
    pub fn parse(document: &str) -> Result<KeySet, JwksError> {
        let doc: Document = serde_json::from_str(document).map_err(|e| JwksError(e.to_string()))?;
        let keys: Vec<Jwk> = doc
            .keys
            .into_iter()
            .filter_map(|key| serde_json::from_value::<RawKey>(key).ok()?.usable())
            .collect();
        Ok(KeySet { keys: keys.into() })
    }

    /// How many usable keys the set holds.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Whether the set holds no usable key.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Checks `token`'s signature. A token naming a `kid` is checked with
    /// the keys of that id (none: [`AuthError::UnknownKey`]); one without,
    /// with every key. Only keys that fit its `alg` are tried; no key
    /// that fits, or no valid signature, is [`AuthError::Invalid`].
    pub(super) fn verify(&self, token: &Token<'_>) -> Result<(), AuthError> {
        let kid = token.kid.as_deref();
        // The header's `alg`: public, compared as any name is.
        let header_alg = token.alg_name.as_str();
        let mut named = false;
        for jwk in self.keys.iter() {
            if kid.is_some() && jwk.kid.as_deref() != kid {
                continue;
            }
            named = true;
            let fits =
                jwk.key.fits(token.alg) && jwk.alg.as_deref().is_none_or(|alg| alg == header_alg);
            if fits && jwk.key.verifies(token.signing_input, &token.signature) {
                return Ok(());
            }
        }
        if kid.is_some() && !named {
            return Err(AuthError::UnknownKey);
        }
        Err(AuthError::Invalid)
    }
}
