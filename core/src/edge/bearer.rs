//! Bearer credentials (RFC 6750 §2.1 over RFC 7235 §2.1):
//! `credentials = "Bearer" 1*SP token`. The scheme is case-insensitive and
//! is followed by one or more spaces; a tab is not a space there, so
//! `Bearer<TAB>token` is not a bearer credential. Whitespace around the
//! whole value is not part of it (RFC 9110 §5.5). The token is everything
//! after the spaces and must hold no whitespace or control character; any
//! other character is accepted, so every configured token works even where
//! it is not a strict `b64token`.

use crate::auth::AuthError;

use super::query::Query;

/// The token of an `Authorization` header value.
pub fn bearer(header: Option<&str>) -> Result<&str, AuthError> {
    let value = header.ok_or(AuthError::Missing)?.trim_matches([' ', '\t']);
    let (scheme, rest) = value.split_once(' ').ok_or(AuthError::Invalid)?;
    let token = rest.trim_start_matches(' ');
    if !scheme.eq_ignore_ascii_case("bearer") || !is_token(token) {
        return Err(AuthError::Invalid);
    }
    Ok(token)
}

fn is_token(token: &str) -> bool {
    !token.is_empty() && !token.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// The bearer of a WebSocket upgrade: the `Authorization` header's when it
/// holds one, otherwise `?access_token=` (browsers cannot set headers).
pub(crate) fn socket_token(authorization: Option<&str>, query: &Query) -> Option<String> {
    match bearer(authorization) {
        Ok(token) => Some(token.to_owned()),
        Err(_) => query.get("access_token").map(str::to_owned),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scheme_then_spaces_then_token() {
        assert_eq!(bearer(Some("Bearer abc")), Ok("abc"));
        assert_eq!(bearer(Some("bearer abc")), Ok("abc"));
        assert_eq!(bearer(Some("BEARER   abc")), Ok("abc"));
        assert_eq!(bearer(Some(" Bearer abc \t")), Ok("abc"));
        assert_eq!(
            bearer(Some("Bearer a.b-c_d~e+f/g==")),
            Ok("a.b-c_d~e+f/g==")
        );
        assert_eq!(bearer(None), Err(AuthError::Missing));
    }

    #[test]
    fn anything_else_is_invalid() {
        for bad in [
            "Bearer\tabc",
            "Bearer \tabc",
            "Bearer",
            "Bearer ",
            "Bearer abc def",
            "Bearer abc\tdef",
            "Basic abc",
            "Bearerabc",
            "abc",
            "",
        ] {
            assert_eq!(bearer(Some(bad)), Err(AuthError::Invalid), "{bad:?}");
        }
    }

    #[test]
    fn sockets_fall_back_to_the_query() {
        let q = Query::parse("access_token=from-query").unwrap();
        assert_eq!(socket_token(Some("Bearer h"), &q).as_deref(), Some("h"));
        assert_eq!(socket_token(None, &q).as_deref(), Some("from-query"));
        assert_eq!(
            socket_token(Some("Bearer\th"), &q).as_deref(),
            Some("from-query")
        );
        assert_eq!(socket_token(Some("Bearer\th"), &Query::default()), None);
        assert_eq!(socket_token(None, &Query::default()), None);
    }
}
