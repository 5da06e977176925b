//! Bearer authentication: the input is a token. Whatever it is, the
//! authenticator answers without panicking, and it accepts a JWT only when
//! its header names HS256 and its signature is the HMAC-SHA256 of its
//! first two parts under the secret (checked here independently).
#![no_main]

use base64::Engine as _;
use bubble_core::auth::Authenticator;
use bubble_core::{AuthConfig, Millis, PrincipalId};
use bubble_fuzz::{JWT_SECRET, NOW};
use hmac::{Hmac, Mac};
use libfuzzer_sys::fuzz_target;
use sha2::Sha256;

fn signed_with_the_secret(token: &str) -> bool {
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let Some((input, signature)) = token.rsplit_once('.') else {
        return false;
    };
    let Some(header) = input.split('.').next() else {
        return false;
    };
    let header: Option<serde_json::Value> = b64
        .decode(header)
        .ok()
        .and_then(|h| serde_json::from_slice(&h).ok());
    if header.as_ref().and_then(|h| h["alg"].as_str()) != Some("HS256") {
        return false;
    }
    let mut mac = Hmac::<Sha256>::new_from_slice(JWT_SECRET.as_bytes()).expect("any key");
    mac.update(input.as_bytes());
    b64.decode(signature)
        .is_ok_and(|s| mac.verify_slice(&s).is_ok())
}

fuzz_target!(|data: &[u8]| {
    let Ok(token) = std::str::from_utf8(data) else {
        return;
    };
    let auth = Authenticator::new(&AuthConfig {
        tokens: vec![("token-alice".into(), PrincipalId::new("alice"))],
        jwt_secret: Some(JWT_SECRET.into()),
        ..AuthConfig::default()
    });
    let verdict = auth.authenticate(token, Millis(NOW.0));
    if let Ok(principal) = verdict {
        assert!(
            token == "token-alice" || signed_with_the_secret(token),
            "accepted {token:?} as {principal:?}"
        );
    }
});
