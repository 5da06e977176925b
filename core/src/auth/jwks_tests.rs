//! The JWKS driver with real keys of each type: which tokens pass, and
//! which are refused with which error.

use base64::Engine as _;
use rsa::signature::{SignatureEncoding as _, Signer as _};
use rsa::traits::PublicKeyParts as _;
use serde_json::{json, Value};

use super::*;
use crate::config::JwksConfig;

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// One signing key and its public JWK.
enum Signer {
    Rsa(Box<rsa::pkcs1v15::SigningKey<rsa::sha2::Sha256>>),
    P256(p256::ecdsa::SigningKey),
    Ed25519(ed25519_dalek::SigningKey),
}

impl Signer {
    fn rsa() -> Signer {
        let key = <rsa::PrivateKey as rsa::Generate>::generate();
        Signer::Rsa(Box::new(rsa::pkcs1v15::SigningKey::new(key)))
    }

    fn p256(seed: u8) -> Signer {
        Signer::P256(p256::ecdsa::SigningKey::from_slice(&[seed; 32]).unwrap())
    }

    fn ed25519(seed: u8) -> Signer {
        Signer::Ed25519(ed25519_dalek::SigningKey::from_bytes(&[seed; 32]))
    }

    fn alg(&self) -> &'static str {
        match self {
            Signer::Rsa(_) => "RS256",
            Signer::P256(_) => "ES256",
            Signer::Ed25519(_) => "EdDSA",
        }
    }

    fn jwk(&self, kid: &str) -> Value {
        match self {
            Signer::Rsa(key) => {
                let public = key.as_ref().as_ref().to_public_key();
                json!({"kty": "RSA", "kid": kid, "use": "sig", "alg": "RS256",
                       "n": b64(&public.n().to_be_bytes_trimmed_vartime()),
                       "e": b64(&public.e().to_be_bytes_trimmed_vartime())})
            }
            Signer::P256(key) => {
                let point = key.verifying_key().to_sec1_point(false);
                let bytes = point.as_bytes();
                json!({"kty": "EC", "kid": kid, "crv": "P-256",
                       "x": b64(&bytes[1..33]), "y": b64(&bytes[33..])})
            }
            Signer::Ed25519(key) => json!({"kty": "OKP", "kid": kid, "crv": "Ed25519",
                                           "x": b64(key.verifying_key().as_bytes())}),
        }
    }

    fn sign(&self, message: &[u8]) -> Vec<u8> {
        match self {
            Signer::Rsa(key) => key.sign(message).to_vec(),
            Signer::P256(key) => {
                let sig: p256::ecdsa::Signature = key.sign(message);
                sig.to_bytes().to_vec()
            }
            Signer::Ed25519(key) => key.sign(message).to_bytes().to_vec(),
        }
    }

    /// A token with `header` (its `alg` and `kid` as given) and `claims`.
    fn token(&self, header: &Value, claims: &Value) -> String {
        let input = format!(
            "{}.{}",
            b64(header.to_string().as_bytes()),
            b64(claims.to_string().as_bytes())
        );
        format!("{input}.{}", b64(&self.sign(input.as_bytes())))
    }

    fn token_for(&self, kid: &str, claims: &Value) -> String {
        self.token(
            &json!({"alg": self.alg(), "kid": kid, "typ": "JWT"}),
            claims,
        )
    }
}

fn driver(keys: &[Value], claims: ClaimRules) -> Authenticator {
    Authenticator::new(&AuthConfig {
        jwt_secret: Some("hs-secret".into()),
        jwks: Some(JwksConfig {
            keys: Some(json!({ "keys": keys }).to_string()),
            refresh: None,
            claims,
        }),
        ..AuthConfig::default()
    })
}

fn rules() -> ClaimRules {
    ClaimRules {
        issuer: Some("https://idp.test".into()),
        audience: Some("bubble".into()),
    }
}

fn claims(sub: &str) -> Value {
    json!({"sub": sub, "iss": "https://idp.test", "aud": "bubble", "exp": 2_000})
}

const NOW: Millis = Millis(1_000_000);

#[test]
fn each_algorithm_verifies_with_its_key() {
    let signers = [Signer::rsa(), Signer::p256(7), Signer::ed25519(9)];
    let keys: Vec<Value> = signers
        .iter()
        .enumerate()
        .map(|(i, s)| s.jwk(&format!("k{i}")))
        .collect();
    let auth = driver(&keys, rules());
    for (i, signer) in signers.iter().enumerate() {
        let token = signer.token_for(&format!("k{i}"), &claims("alice"));
        assert_eq!(
            auth.authenticate(&token, NOW),
            Ok(PrincipalId::new("alice")),
            "{}",
            signer.alg()
        );
        let no_kid = signer.token(&json!({"alg": signer.alg()}), &claims("bob"));
        assert_eq!(
            auth.authenticate(&no_kid, NOW),
            Ok(PrincipalId::new("bob")),
            "{} without kid",
            signer.alg()
        );
        assert_eq!(
            auth.authenticate(&token, Millis(2_000_000)),
            Err(AuthError::Expired),
            "{}",
            signer.alg()
        );
    }
    let ed = Signer::ed25519(9);
    let fully_specified = ed.token(&json!({"alg": "Ed25519", "kid": "k2"}), &claims("carol"));
    assert_eq!(
        auth.authenticate(&fully_specified, NOW),
        Ok(PrincipalId::new("carol"))
    );
}

#[test]
fn claims_are_checked_after_the_signature() {
    let signer = Signer::p256(3);
    let auth = driver(&[signer.jwk("k")], rules());
    let wrong_iss = json!({"sub": "a", "iss": "https://other.test", "aud": "bubble"});
    let wrong_aud = json!({"sub": "a", "iss": "https://idp.test", "aud": "other"});
    let no_aud = json!({"sub": "a", "iss": "https://idp.test"});
    assert_eq!(
        auth.authenticate(&signer.token_for("k", &wrong_iss), NOW),
        Err(AuthError::WrongIssuer)
    );
    assert_eq!(
        auth.authenticate(&signer.token_for("k", &wrong_aud), NOW),
        Err(AuthError::WrongAudience)
    );
    assert_eq!(
        auth.authenticate(&signer.token_for("k", &no_aud), NOW),
        Err(AuthError::WrongAudience)
    );
    let forged = Signer::p256(4).token_for("k", &wrong_iss);
    assert_eq!(auth.authenticate(&forged, NOW), Err(AuthError::Invalid));
}

#[test]
fn unknown_kid_is_its_own_error() {
    let signer = Signer::ed25519(1);
    let auth = driver(&[signer.jwk("k1")], ClaimRules::default());
    assert_eq!(
        auth.authenticate(&signer.token_for("k2", &claims("a")), NOW),
        Err(AuthError::UnknownKey)
    );
    let mut auth = auth;
    auth.set_keys(KeySet::parse(&json!({"keys": [signer.jwk("k2")]}).to_string()).unwrap());
    assert_eq!(
        auth.authenticate(&signer.token_for("k2", &claims("a")), NOW),
        Ok(PrincipalId::new("a"))
    );
    assert_eq!(
        auth.authenticate(&signer.token_for("k1", &claims("a")), NOW),
        Err(AuthError::UnknownKey)
    );
}

/// No algorithm confusion: a token is verified only by a key of the type
/// its `alg` names, HS256 only by the configured secret, `none` never.
#[test]
fn algorithm_confusion_is_refused() {
    let rsa = Signer::rsa();
    let ec = Signer::p256(5);
    let ed = Signer::ed25519(6);
    let auth = driver(
        &[rsa.jwk("rsa"), ec.jwk("ec"), ed.jwk("ed")],
        ClaimRules::default(),
    );
    let body = json!({"sub": "mallory"});
    let header_input = |header: &Value| {
        format!(
            "{}.{}",
            b64(header.to_string().as_bytes()),
            b64(body.to_string().as_bytes())
        )
    };
    // HS256, its HMAC key the RSA public key's bytes (modulus, JWK text).
    let Signer::Rsa(rsa_key) = &rsa else {
        unreachable!()
    };
    let public = rsa_key.as_ref().as_ref().to_public_key();
    for secret in [
        public.n().to_be_bytes_trimmed_vartime().to_vec(),
        rsa.jwk("rsa").to_string().into_bytes(),
    ] {
        for header in [
            json!({"alg": "HS256", "kid": "rsa"}),
            json!({"alg": "HS256"}),
        ] {
            let input = header_input(&header);
            let mut mac = Hmac::<Sha256>::new_from_slice(&secret).unwrap();
            mac.update(input.as_bytes());
            let token = format!("{input}.{}", b64(&mac.finalize().into_bytes()));
            assert_eq!(
                auth.authenticate(&token, NOW),
                Err(AuthError::Invalid),
                "{header}"
            );
        }
    }
    // `none`, with and without a signature.
    for alg in ["none", "None", "NONE"] {
        let input = header_input(&json!({"alg": alg, "kid": "rsa"}));
        for token in [
            format!("{input}."),
            format!("{input}.{}", b64(&rsa.sign(input.as_bytes()))),
        ] {
            assert_eq!(
                auth.authenticate(&token, NOW),
                Err(AuthError::Invalid),
                "{alg}"
            );
        }
    }
    // A header naming one key type's algorithm with another type's kid,
    // signed by that other key.
    for (signer, alg, kid) in [
        (&ec, "RS256", "ec"),
        (&rsa, "ES256", "rsa"),
        (&ed, "ES256", "ed"),
        (&ec, "EdDSA", "ec"),
        (&rsa, "EdDSA", "rsa"),
        (&ed, "RS256", "ed"),
    ] {
        let token = signer.token(&json!({"alg": alg, "kid": kid}), &body);
        assert_eq!(
            auth.authenticate(&token, NOW),
            Err(AuthError::Invalid),
            "{alg} with {kid}"
        );
    }
    // Algorithms Bubble does not verify, whatever the key.
    for alg in ["RS512", "PS256", "ES384", "HS512", "rs256"] {
        let token = rsa.token(&json!({"alg": alg, "kid": "rsa"}), &body);
        assert_eq!(
            auth.authenticate(&token, NOW),
            Err(AuthError::Invalid),
            "{alg}"
        );
    }
    // A header with `crit`.
    let token = ec.token(
        &json!({"alg": "ES256", "kid": "ec", "crit": ["exp"]}),
        &body,
    );
    assert_eq!(auth.authenticate(&token, NOW), Err(AuthError::Invalid));
}

#[test]
fn a_key_naming_another_alg_is_not_used_for_this_one() {
    let ed = Signer::ed25519(2);
    let mut jwk = ed.jwk("k");
    jwk["alg"] = json!("EdDSA");
    let auth = driver(&[jwk], ClaimRules::default());
    assert_eq!(
        auth.authenticate(&ed.token_for("k", &claims("a")), NOW),
        Ok(PrincipalId::new("a"))
    );
    let fully_specified = ed.token(&json!({"alg": "Ed25519", "kid": "k"}), &claims("a"));
    assert_eq!(
        auth.authenticate(&fully_specified, NOW),
        Err(AuthError::Invalid)
    );
}

#[test]
fn keys_bubble_cannot_use_are_skipped() {
    let ec = Signer::p256(8);
    let mut enc = ec.jwk("enc");
    enc["use"] = json!("enc");
    let mut wrong_alg = ec.jwk("alg");
    wrong_alg["alg"] = json!("ES384");
    let mut no_verify = ec.jwk("ops");
    no_verify["key_ops"] = json!(["encrypt"]);
    let mut other_curve = ec.jwk("crv");
    other_curve["crv"] = json!("P-384");
    let small_rsa = json!({"kty": "RSA", "kid": "small", "n": b64(&[0xc1; 128]), "e": "AQAB"});
    let doc = json!({"keys": [
        enc, wrong_alg, no_verify, other_curve, small_rsa,
        {"kty": "oct", "kid": "oct", "k": b64(b"secret")},
        {"kty": "EC", "kid": "bad", "crv": "P-256", "x": b64(&[1; 32]), "y": b64(&[2; 32])},
        "not an object",
        ec.jwk("good"),
    ]});
    let set = KeySet::parse(&doc.to_string()).unwrap();
    assert_eq!(set.len(), 1, "{set:?}");
    for bad in ["", "[]", "{}", r#"{"keys": {}}"#, "not json"] {
        assert!(KeySet::parse(bad).is_err(), "{bad:?}");
    }
    assert!(KeySet::parse(r#"{"keys": []}"#).unwrap().is_empty());
}
