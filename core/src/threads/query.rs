//! Query strings of the thread routes: percent-decoding and the paging
//! parameters (`limit`, `fromSeq`).

use crate::error::BubbleError;

/// Default page size of list and history routes.
pub(crate) const DEFAULT_LIMIT: usize = 100;
/// Largest page size.
pub(crate) const MAX_LIMIT: usize = 1000;

/// A decoded query string. An empty value counts as absent; when a name
/// repeats, the last value wins.
#[derive(Debug, Default)]
pub(crate) struct Query(Vec<(String, String)>);

impl Query {
    /// Decodes `raw` (without `?`).
    pub(crate) fn parse(raw: &str) -> Result<Query, BubbleError> {
        let mut pairs = Vec::new();
        for part in raw.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = part.split_once('=').unwrap_or((part, ""));
            pairs.push((decode(name)?, decode(value)?));
        }
        Ok(Query(pairs))
    }

    /// The value of `name`, if present and non-empty.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }

    /// `limit`: an integer in 1..=1000, default 100.
    pub(crate) fn limit(&self) -> Result<usize, BubbleError> {
        match self.get("limit") {
            None => Ok(DEFAULT_LIMIT),
            Some(raw) => raw
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=MAX_LIMIT).contains(n))
                .ok_or_else(|| {
                    BubbleError::InvalidRequest(format!(
                        "Query parameter \"limit\" must be an integer from 1 to {MAX_LIMIT}."
                    ))
                }),
        }
    }

    /// `fromSeq`: an integer >= 1, default 1.
    pub(crate) fn start_seq(&self) -> Result<u64, BubbleError> {
        match self.get("fromSeq") {
            None => Ok(1),
            Some(raw) => raw.parse::<u64>().ok().filter(|n| *n >= 1).ok_or_else(|| {
                BubbleError::InvalidRequest(
                    "Query parameter \"fromSeq\" must be an integer >= 1.".into(),
                )
            }),
        }
    }
}

fn decode(raw: &str) -> Result<String, BubbleError> {
    let bad =
        || BubbleError::InvalidRequest("The query string is not validly percent-encoded.".into());
    let mut bytes = Vec::with_capacity(raw.len());
    let mut input = raw.bytes();
    while let Some(b) = input.next() {
        match b {
            b'+' => bytes.push(b' '),
            b'%' => {
                let hi = input
                    .next()
                    .and_then(|h| (h as char).to_digit(16))
                    .ok_or_else(bad)?;
                let lo = input
                    .next()
                    .and_then(|l| (l as char).to_digit(16))
                    .ok_or_else(bad)?;
                bytes.push(u8::try_from(hi * 16 + lo).map_err(|_| bad())?);
            }
            _ => bytes.push(b),
        }
    }
    String::from_utf8(bytes).map_err(|_| bad())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_and_pages() {
        let q = Query::parse("parentThreadId=a%3Ab&cursor=&limit=5&limit=7").unwrap();
        assert_eq!(q.get("parentThreadId"), Some("a:b"));
        assert_eq!(q.get("cursor"), None);
        assert_eq!(q.limit().unwrap(), 7);
        assert_eq!(Query::parse("").unwrap().limit().unwrap(), DEFAULT_LIMIT);
        assert_eq!(Query::parse("").unwrap().start_seq().unwrap(), 1);
        for bad in ["limit=0", "limit=1001", "limit=x", "limit=-1", "limit=1.5"] {
            assert!(Query::parse(bad).unwrap().limit().is_err(), "{bad}");
        }
        for bad in ["fromSeq=0", "fromSeq=-2", "fromSeq=a"] {
            assert!(Query::parse(bad).unwrap().start_seq().is_err(), "{bad}");
        }
        assert!(Query::parse("a=%zz").is_err());
        assert!(Query::parse("a=%ff").is_err());
    }
}
