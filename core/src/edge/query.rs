//! Query strings: `application/x-www-form-urlencoded` pairs, decoded
//! strictly. An invalid `%` escape or a value that is not UTF-8 refuses the
//! whole query (browsers' lenient parsing would pass it through unchanged,
//! and two hosts would then read two different values).

use crate::error::BubbleError;

/// A query string that is not validly percent-encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("The query string is not validly percent-encoded.")]
pub struct BadQuery;

impl From<BadQuery> for BubbleError {
    fn from(err: BadQuery) -> BubbleError {
        BubbleError::InvalidRequest(err.to_string())
    }
}

/// A decoded query string. An empty value counts as absent; when a name
/// repeats, the last value wins.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Query(Vec<(String, String)>);

impl Query {
    /// Decodes `raw` (the query without its `?`): `&`-separated pairs,
    /// `+` for a space, `%XX` escapes of UTF-8.
    pub fn parse(raw: &str) -> Result<Query, BadQuery> {
        let mut pairs = Vec::new();
        for part in raw.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = part.split_once('=').unwrap_or((part, ""));
            let name = decode(name, true).ok_or(BadQuery)?;
            let value = decode(value, true).ok_or(BadQuery)?;
            pairs.push((name, value));
        }
        Ok(Query(pairs))
    }

    /// Every decoded pair, in order (repeats and empty values included).
    pub(crate) fn pairs(&self) -> &[(String, String)] {
        &self.0
    }

    /// The value of `name`, if present and non-empty.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }
}

/// Percent-decodes `raw` (and `+` as a space where `plus_is_space`);
/// `None` for an invalid escape or bytes that are not UTF-8.
pub(crate) fn decode(raw: &str, plus_is_space: bool) -> Option<String> {
    if !(raw.contains('%') || plus_is_space && raw.contains('+')) {
        return Some(raw.to_owned());
    }
    let mut bytes = Vec::with_capacity(raw.len());
    let mut input = raw.bytes();
    while let Some(b) = input.next() {
        match b {
            b'+' if plus_is_space => bytes.push(b' '),
            b'%' => {
                let hi = hex(input.next()?)?;
                let lo = hex(input.next()?)?;
                bytes.push(hi << 4 | lo);
            }
            _ => bytes.push(b),
        }
    }
    String::from_utf8(bytes).ok()
}

fn hex(digit: u8) -> Option<u8> {
    char::from(digit)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_are_decoded_and_the_last_wins() {
        let q = Query::parse("parentThreadId=a%3Ab&cursor=&limit=5&limit=7&x=a+b&flag").unwrap();
        assert_eq!(q.get("parentThreadId"), Some("a:b"));
        assert_eq!(q.get("cursor"), None, "empty is absent");
        assert_eq!(q.get("flag"), None);
        assert_eq!(q.get("limit"), Some("7"));
        assert_eq!(q.get("x"), Some("a b"));
        assert_eq!(q.get("nope"), None);
        assert_eq!(Query::parse("").unwrap(), Query::default());
    }

    #[test]
    fn invalid_escapes_refuse_the_query() {
        for bad in ["a=%zz", "a=%f", "a=%", "a=%ff", "%C3=1", "a=%C3%28"] {
            assert_eq!(Query::parse(bad), Err(BadQuery), "{bad}");
        }
        assert_eq!(Query::parse("a=%C3%A9").unwrap().get("a"), Some("é"));
    }

    #[test]
    fn plus_is_literal_outside_queries() {
        assert_eq!(decode("a+b%2Bc", false).as_deref(), Some("a+b+c"));
        assert_eq!(decode("a+b", true).as_deref(), Some("a b"));
    }
}
