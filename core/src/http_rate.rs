//! The per-principal rate of threads API requests: at most
//! [`Limits::http_rate`](crate::Limits::http_rate) requests of one
//! principal in any sliding window of `http_rate_window_ms`; the request
//! that would exceed it is answered `429 rate_limited` with `Retry-After`,
//! the seconds until the oldest request in the window leaves it. Time is
//! the engine's input; nothing here reads a clock.

use std::collections::{HashMap, VecDeque};

use crate::error::BubbleError;
use crate::http::HttpResponse;
use crate::ids::{Millis, PrincipalId};

/// The times of each principal's recent requests (at most the limit each).
#[derive(Debug, Default)]
pub(crate) struct HttpRates {
    recent: HashMap<PrincipalId, VecDeque<Millis>>,
    /// Principals held after the last sweep of idle ones.
    swept: usize,
}

impl HttpRates {
    /// Counts a request of `principal` at `now`, or returns the `429` that
    /// answers it when it would be more than `limit` within `window_ms`.
    /// A `limit` of 0 counts nothing and refuses nothing.
    pub(crate) fn check(
        &mut self,
        principal: &PrincipalId,
        now: Millis,
        limit: u32,
        window_ms: u64,
    ) -> Option<HttpResponse> {
        if limit == 0 {
            return None;
        }
        self.sweep(now, window_ms);
        let recent = self.recent.entry(principal.clone()).or_default();
        while recent.front().is_some_and(|at| at.plus(window_ms) <= now) {
            recent.pop_front();
        }
        if recent.len() < usize::try_from(limit).unwrap_or(usize::MAX) {
            recent.push_back(now);
            return None;
        }
        let oldest = recent.front().copied().unwrap_or(now);
        let wait_ms = oldest.plus(window_ms).0.saturating_sub(now.0);
        let mut response = HttpResponse::error(&BubbleError::RateLimited(format!(
            "Too many requests: at most {limit} per {window_ms} ms for one principal."
        )));
        response.retry_after = Some(wait_ms.div_ceil(1000).max(1));
        Some(response)
    }

    /// Forgets principals with no request left in the window, once the map
    /// has doubled since the last sweep (memory stays bounded by the
    /// principals active within one window).
    fn sweep(&mut self, now: Millis, window_ms: u64) {
        if self.recent.len() <= self.swept.saturating_mul(2).max(1024) {
            return;
        }
        self.recent
            .retain(|_, recent| recent.back().is_some_and(|at| at.plus(window_ms) > now));
        self.swept = self.recent.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alice() -> PrincipalId {
        PrincipalId::new("alice")
    }

    #[test]
    fn the_request_past_the_limit_waits_for_the_oldest_to_leave() {
        let mut rates = HttpRates::default();
        for i in 0..5 {
            assert!(rates
                .check(&alice(), Millis(1_000 + i * 100), 5, 10_000)
                .is_none());
        }
        let refused = rates
            .check(&alice(), Millis(1_500), 5, 10_000)
            .expect("refused");
        assert_eq!(refused.status, 429);
        assert!(
            refused.body.contains("\"code\":\"rate_limited\""),
            "{}",
            refused.body
        );
        // The oldest (at 1000) leaves the window at 11000: 9.5 s, rounded up.
        assert_eq!(refused.retry_after, Some(10));
        // Refusals are not counted: once the oldest left, one more fits.
        assert!(rates.check(&alice(), Millis(11_000), 5, 10_000).is_none());
        assert!(rates.check(&alice(), Millis(11_000), 5, 10_000).is_some());
    }

    #[test]
    fn principals_are_counted_apart_and_zero_is_no_limit() {
        let mut rates = HttpRates::default();
        assert!(rates.check(&alice(), Millis(0), 1, 1_000).is_none());
        assert!(rates.check(&alice(), Millis(1), 1, 1_000).is_some());
        assert!(rates
            .check(&PrincipalId::new("bob"), Millis(1), 1, 1_000)
            .is_none());
        for i in 0..10_000 {
            assert!(rates.check(&alice(), Millis(i), 0, 1_000).is_none());
        }
    }

    #[test]
    fn idle_principals_are_forgotten() {
        let mut rates = HttpRates::default();
        for i in 0..5_000u64 {
            let p = PrincipalId::new(format!("p{i}"));
            assert!(rates.check(&p, Millis(i * 10), 3, 1_000).is_none());
        }
        assert!(rates.recent.len() < 2_500, "{} held", rates.recent.len());
    }
}
