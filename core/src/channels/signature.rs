//! Subscription signatures: `APP_KEY:hex(HMAC_SHA256(secret, "socket_id:channel[:channel_data]"))`.

use hmac::{Hmac, Mac};
use sha2::Sha256;
use subtle::ConstantTimeEq;

/// The lowercase hex HMAC-SHA256 of `socket_id:channel[:channel_data]`
/// keyed with the app secret.
pub fn sign(secret: &str, socket_id: &str, channel: &str, channel_data: Option<&str>) -> String {
    let mut mac =
        Hmac::<Sha256>::new_from_slice(secret.as_bytes()).expect("HMAC accepts keys of any length");
    mac.update(socket_id.as_bytes());
    mac.update(b":");
    mac.update(channel.as_bytes());
    if let Some(data) = channel_data {
        mac.update(b":");
        mac.update(data.as_bytes());
    }
    hex(&mac.finalize().into_bytes())
}

/// The `auth` string a client presents: `APP_KEY:signature`.
pub fn auth_string(
    key: &str,
    secret: &str,
    socket_id: &str,
    channel: &str,
    channel_data: Option<&str>,
) -> String {
    format!("{key}:{}", sign(secret, socket_id, channel, channel_data))
}

/// Whether `auth` is the right `APP_KEY:signature` for this subscription.
/// The signature is compared in constant time.
pub fn verify(
    key: &str,
    secret: &str,
    socket_id: &str,
    channel: &str,
    channel_data: Option<&str>,
    auth: &str,
) -> bool {
    let Some((given_key, given_sig)) = auth.rsplit_once(':') else {
        return false;
    };
    let expected = sign(secret, socket_id, channel, channel_data);
    let sig_ok: bool = expected.as_bytes().ct_eq(given_sig.as_bytes()).into();
    sig_ok && given_key == key
}

/// Lowercase hexadecimal of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(char::from(DIGITS[usize::from(b >> 4)]));
        s.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOCKET: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn known_vector() {
        // HMAC-SHA256(key="key", "The quick brown fox jumps over the lazy dog")
        let mut mac = Hmac::<Sha256>::new_from_slice(b"key").unwrap();
        mac.update(b"The quick brown fox jumps over the lazy dog");
        assert_eq!(
            hex(&mac.finalize().into_bytes()),
            "f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8"
        );
    }

    #[test]
    fn private_signature_round_trip() {
        let auth = auth_string("app-key", "secret", SOCKET, "private-user-42", None);
        assert!(auth.starts_with("app-key:"));
        let sig = &auth["app-key:".len()..];
        assert_eq!(sig.len(), 64);
        assert!(sig
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
        assert!(verify(
            "app-key",
            "secret",
            SOCKET,
            "private-user-42",
            None,
            &auth
        ));
    }

    #[test]
    fn rejects_wrong_signatures() {
        let auth = auth_string("app-key", "secret", SOCKET, "private-user-42", None);
        let auth = auth.as_str();
        let other_socket = "ffffffffffffffffffffffffffffffff";
        let mangled = auth.to_uppercase().replacen("APP-KEY", "app-key", 1);
        let refused = [
            ("app-key", "other-secret", SOCKET, "private-user-42", auth),
            ("app-key", "secret", other_socket, "private-user-42", auth),
            ("app-key", "secret", SOCKET, "private-user-43", auth),
            ("other-key", "secret", SOCKET, "private-user-42", auth),
            ("app-key", "secret", SOCKET, "private-user-42", "garbage"),
            ("app-key", "secret", SOCKET, "private-user-42", "app-key:"),
            ("app-key", "secret", SOCKET, "private-user-42", &mangled),
        ];
        for (key, secret, socket, channel, given) in refused {
            assert!(
                !verify(key, secret, socket, channel, None, given),
                "{key} {secret} {socket} {channel} {given}"
            );
        }
    }

    #[test]
    fn presence_signature_covers_exact_channel_data() {
        let data = r#"{"user_id":"42","user_info":{"name":"Alex"}}"#;
        let reformatted = r#"{"user_id": "42", "user_info": {"name": "Alex"}}"#;
        let auth = auth_string("app-key", "secret", SOCKET, "presence-team-42", Some(data));
        assert!(verify(
            "app-key",
            "secret",
            SOCKET,
            "presence-team-42",
            Some(data),
            &auth
        ));
        assert!(!verify(
            "app-key",
            "secret",
            SOCKET,
            "presence-team-42",
            Some(reformatted),
            &auth
        ));
        assert!(!verify(
            "app-key",
            "secret",
            SOCKET,
            "presence-team-42",
            None,
            &auth
        ));
    }
}
