//! The paging parameters of the thread routes (`limit`, `fromSeq`), read
//! from the query string as the edge decodes it.

pub(crate) use crate::edge::Query;
use crate::error::BubbleError;

/// Default page size of list and history routes.
pub(crate) const DEFAULT_LIMIT: usize = 100;
/// Largest page size.
pub(crate) const MAX_LIMIT: usize = 1000;

impl Query {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages() {
        let q = Query::parse("limit=5&limit=7").unwrap();
        assert_eq!(q.limit().unwrap(), 7);
        assert_eq!(Query::parse("").unwrap().limit().unwrap(), DEFAULT_LIMIT);
        assert_eq!(Query::parse("").unwrap().start_seq().unwrap(), 1);
        for bad in ["limit=0", "limit=1001", "limit=x", "limit=-1", "limit=1.5"] {
            assert!(Query::parse(bad).unwrap().limit().is_err(), "{bad}");
        }
        for bad in ["fromSeq=0", "fromSeq=-2", "fromSeq=a"] {
            assert!(Query::parse(bad).unwrap().start_seq().is_err(), "{bad}");
        }
    }
}
