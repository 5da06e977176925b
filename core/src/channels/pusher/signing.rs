//! Pusher's HTTP API request signing (`auth_version=1.0`): an
//! HMAC-SHA256, keyed with the app secret, of
//! `METHOD\npath\nquery`, where the query is every parameter but
//! `auth_signature`, names lowercased, sorted by name, `name=value` joined
//! with `&`, values as decoded. A body comes with `body_md5`, its MD5 in
//! lowercase hex. `auth_timestamp` (Unix seconds) must be within 600 s of
//! the host's clock.

use hmac::{Hmac, Mac};
use md5::{Digest, Md5};
use sha2::Sha256;
use subtle::ConstantTimeEq;

use crate::config::AppConfig;
use crate::edge::Query;
use crate::ids::Millis;

use crate::hex::lower as hex;

/// How far `auth_timestamp` may be from the server's clock, in seconds.
pub(crate) const MAX_CLOCK_SKEW_S: u64 = 600;

/// Why a request's signature was refused (all answered 401).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum SigningError {
    /// A required `auth_` parameter is missing.
    #[error("Missing auth_key, auth_timestamp, auth_version or auth_signature")]
    Missing,
    /// `auth_key` is not the app's key.
    #[error("Unknown auth_key")]
    WrongKey,
    /// `auth_version` is not `1.0`.
    #[error("Unsupported auth_version: only 1.0 is supported")]
    WrongVersion,
    /// `auth_timestamp` is not a number of seconds, or too far from now.
    #[error(
        "Timestamp expired: Given timestamp ({given}) not within {MAX_CLOCK_SKEW_S}s of server time ({now})"
    )]
    Stale {
        /// The request's `auth_timestamp`.
        given: String,
        /// The server's time in seconds.
        now: u64,
    },
    /// `body_md5` is missing for a body, or is not the body's MD5.
    #[error("Invalid body_md5")]
    BodyMd5,
    /// The signature does not match.
    #[error(
        "Invalid signature: you should have sent HmacSHA256Hex({signed:?}, your_secret_key), but you sent {given:?}"
    )]
    Signature {
        /// The string the signature covers.
        signed: String,
        /// The signature the request carried.
        given: String,
    },
}

/// The lowercase hex HMAC-SHA256 of `text` keyed with `secret`.
pub(crate) fn hmac_hex(secret: &str, text: &[u8]) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC accepts keys of any length");
    mac.update(text);
    hex(&mac.finalize().into_bytes())
}

/// The string a request's `auth_signature` covers.
pub(crate) fn string_to_sign(method: &str, path: &str, query: &Query) -> String {
    let mut pairs: Vec<(String, &str)> = query
        .pairs()
        .iter()
        .filter(|(name, _)| name != "auth_signature")
        .map(|(name, value)| (name.to_ascii_lowercase(), value.as_str()))
        .collect();
    pairs.sort();
    let joined: Vec<String> = pairs.iter().map(|(n, v)| format!("{n}={v}")).collect();
    format!("{method}\n{path}\n{}", joined.join("&"))
}

/// Checks a signed request of `app` at `now`.
pub(crate) fn verify(
    app: &AppConfig,
    method: &str,
    path: &str,
    query: &Query,
    body: &[u8],
    now: Millis,
) -> Result<(), SigningError> {
    let (Some(key), Some(timestamp), Some(version), Some(signature)) = (
        query.get("auth_key"),
        query.get("auth_timestamp"),
        query.get("auth_version"),
        query.get("auth_signature"),
    ) else {
        return Err(SigningError::Missing);
    };
    if key != app.key {
        return Err(SigningError::WrongKey);
    }
    if version != "1.0" {
        return Err(SigningError::WrongVersion);
    }
    let now_s = now.0 / 1000;
    let fresh = timestamp
        .parse::<u64>()
        .is_ok_and(|given| given.abs_diff(now_s) <= MAX_CLOCK_SKEW_S);
    if !fresh {
        return Err(SigningError::Stale {
            given: timestamp.to_owned(),
            now: now_s,
        });
    }
    if !body.is_empty() || query.get("body_md5").is_some() {
        let md5 = hex(&Md5::digest(body));
        if query.get("body_md5") != Some(md5.as_str()) {
            return Err(SigningError::BodyMd5);
        }
    }
    let signed = string_to_sign(method, path, query);
    let expected = hmac_hex(&app.secret, signed.as_bytes());
    if !bool::from(expected.as_bytes().ct_eq(signature.as_bytes())) {
        return Err(SigningError::Signature {
            signed,
            given: signature.to_owned(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn app() -> AppConfig {
        AppConfig {
            id: "3".into(),
            key: "278d425bdf160c739803".into(),
            secret: "7ad3773142a6692b25b8".into(),
            max_connections: None,
            client_events: false,
            webhooks: Vec::new(),
        }
    }

    /// The worked example of Pusher's HTTP API reference.
    #[test]
    fn pusher_reference_example() {
        let body = br#"{"name":"foo","channels":["project-3"],"data":"{\"some\":\"data\"}"}"#;
        assert_eq!(hex(&Md5::digest(body)), "ec365a775a4cd0599faeb73354201b6f");
        let query = Query::parse(
            "auth_key=278d425bdf160c739803&auth_timestamp=1353088179&auth_version=1.0\
             &body_md5=ec365a775a4cd0599faeb73354201b6f\
             &auth_signature=da454824c97ba181a32ccc17a72625ba02771f50b50e1e7430e47a1f3f457e6c",
        )
        .unwrap();
        let signed = string_to_sign("POST", "/apps/3/events", &query);
        assert_eq!(
            signed,
            "POST\n/apps/3/events\nauth_key=278d425bdf160c739803&auth_timestamp=1353088179\
             &auth_version=1.0&body_md5=ec365a775a4cd0599faeb73354201b6f"
        );
        let at = Millis(1_353_088_179_000);
        assert_eq!(
            verify(&app(), "POST", "/apps/3/events", &query, body, at),
            Ok(())
        );
        let late = Millis(at.0 + 601_000);
        assert!(matches!(
            verify(&app(), "POST", "/apps/3/events", &query, body, late),
            Err(SigningError::Stale { .. })
        ));
        assert_eq!(
            verify(&app(), "POST", "/apps/3/events", &query, b"{}", at),
            Err(SigningError::BodyMd5)
        );
        assert!(matches!(
            verify(&app(), "POST", "/apps/4/events", &query, body, at),
            Err(SigningError::Signature { .. })
        ));
    }
}
