//! HS256 JWTs and HMAC signatures, computed independently of the server.

use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::Sha256;

fn hmac_sha256(secret: &[u8], message: &[u8]) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC accepts any key length");
    mac.update(message);
    mac.finalize().into_bytes().to_vec()
}

/// An HS256 JWT of `claims` signed with `secret`.
pub fn sign_jwt(secret: &str, claims: &serde_json::Value) -> String {
    sign_jwt_with_header(
        secret,
        &serde_json::json!({"alg": "HS256", "typ": "JWT"}),
        claims,
    )
}

/// A JWT with this exact `header` (whatever `alg` it names), HMAC-SHA256
/// signed with `secret`: for algorithm-confusion tests.
pub fn sign_jwt_with_header(
    secret: &str,
    header: &serde_json::Value,
    claims: &serde_json::Value,
) -> String {
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let header = b64.encode(header.to_string());
    let payload = b64.encode(claims.to_string());
    let signing_input = format!("{header}.{payload}");
    let signature = b64.encode(hmac_sha256(secret.as_bytes(), signing_input.as_bytes()));
    format!("{signing_input}.{signature}")
}

/// HMAC-SHA256 of `message` under `secret`, as lowercase hex (the channel
/// signature format).
pub fn hmac_sha256_hex(secret: &str, message: &str) -> String {
    hmac_sha256(secret.as_bytes(), message.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
