//! The rate of HTTP API requests per caller: at most
//! [`Limits::http_rate`](crate::Limits::http_rate) requests of one caller
//! in any sliding window of `http_rate_window_ms`. The caller is the
//! principal on the threads API and the app on the channels APIs
//! (`/api/apps/:appId/…` and Pusher's `/apps/:appId/…`); each API answers
//! the request that would exceed it with `429` and `Retry-After`, the
//! seconds until the oldest request in the window leaves it. Time is the
//! engine's input; nothing here reads a clock.

use std::collections::VecDeque;
use std::hash::Hash;

use crate::error::BubbleError;
use crate::http::HttpResponse;
use crate::ids::Millis;
use crate::maps::HashMap;

/// A request refused by [`HttpRates::check`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RateLimited {
    /// The limit in force.
    pub(crate) limit: u32,
    /// Its window, in milliseconds.
    pub(crate) window_ms: u64,
    /// Seconds until the oldest request leaves the window (at least 1).
    pub(crate) retry_after_s: u64,
}

impl RateLimited {
    /// The sentence every API answers with.
    pub(crate) fn message(&self, caller: &str) -> String {
        format!(
            "Too many requests: at most {} per {} ms for one {caller}.",
            self.limit, self.window_ms
        )
    }

    /// The threads API's answer: `429 rate_limited` with `Retry-After`.
    pub(crate) fn threads_response(&self) -> HttpResponse {
        let mut response =
            HttpResponse::error(&BubbleError::RateLimited(self.message("principal")));
        response.retry_after = Some(self.retry_after_s);
        response
    }
}

/// The times of each caller's recent requests (at most the limit each).
#[derive(Debug)]
pub(crate) struct HttpRates<K> {
    recent: HashMap<K, VecDeque<Millis>>,
    /// Callers held after the last sweep of idle ones.
    swept: usize,
}

impl<K> Default for HttpRates<K> {
    fn default() -> HttpRates<K> {
        HttpRates {
            recent: HashMap::default(),
            swept: 0,
        }
    }
}

impl<K: Hash + Eq + Clone> HttpRates<K> {
    /// Counts a request of `caller` at `now`, or refuses it when it would
    /// be more than `limit` within `window_ms`. A `limit` of 0 counts
    /// nothing and refuses nothing; a refused request is not counted.
    pub(crate) fn check(
        &mut self,
        caller: &K,
        now: Millis,
        limit: u32,
        window_ms: u64,
    ) -> Result<(), RateLimited> {
        if limit == 0 {
            return Ok(());
        }
        self.sweep(now, window_ms);
        let recent = self.recent.entry(caller.clone()).or_default();
        while recent.front().is_some_and(|at| at.plus(window_ms) <= now) {
            recent.pop_front();
        }
        if recent.len() < usize::try_from(limit).unwrap_or(usize::MAX) {
            recent.push_back(now);
            return Ok(());
        }
        let oldest = recent.front().copied().unwrap_or(now);
        let wait_ms = oldest.plus(window_ms).0.saturating_sub(now.0);
        Err(RateLimited {
            limit,
            window_ms,
            retry_after_s: wait_ms.div_ceil(1000).max(1),
        })
    }

    /// Forgets callers with no request left in the window, once the map
    /// has doubled since the last sweep (memory stays bounded by the
    /// callers active within one window).
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
    use crate::ids::PrincipalId;

    fn alice() -> PrincipalId {
        PrincipalId::new("alice")
    }

    #[test]
    fn the_request_past_the_limit_waits_for_the_oldest_to_leave() {
        let mut rates = HttpRates::default();
        for i in 0..5 {
            assert!(rates
                .check(&alice(), Millis(1_000 + i * 100), 5, 10_000)
                .is_ok());
        }
        let refused = rates
            .check(&alice(), Millis(1_500), 5, 10_000)
            .expect_err("refused");
        let response = refused.threads_response();
        assert_eq!(response.status, 429);
        assert!(
            response.body.contains("\"code\":\"rate_limited\""),
            "{}",
            response.body
        );
        // The oldest (at 1000) leaves the window at 11000: 9.5 s, rounded up.
        assert_eq!(response.retry_after, Some(10));
        assert_eq!(refused.retry_after_s, 10);
        // Refusals are not counted: once the oldest left, one more fits.
        assert!(rates.check(&alice(), Millis(11_000), 5, 10_000).is_ok());
        assert!(rates.check(&alice(), Millis(11_000), 5, 10_000).is_err());
    }

    #[test]
    fn callers_are_counted_apart_and_zero_is_no_limit() {
        let mut rates = HttpRates::default();
        assert!(rates.check(&alice(), Millis(0), 1, 1_000).is_ok());
        assert!(rates.check(&alice(), Millis(1), 1, 1_000).is_err());
        assert!(rates
            .check(&PrincipalId::new("bob"), Millis(1), 1, 1_000)
            .is_ok());
        for i in 0..10_000 {
            assert!(rates.check(&alice(), Millis(i), 0, 1_000).is_ok());
        }
    }

    #[test]
    fn idle_callers_are_forgotten() {
        let mut rates = HttpRates::default();
        for i in 0..5_000u64 {
            let p = PrincipalId::new(format!("p{i}"));
            assert!(rates.check(&p, Millis(i * 10), 3, 1_000).is_ok());
        }
        assert!(rates.recent.len() < 2_500, "{} held", rates.recent.len());
    }
}
