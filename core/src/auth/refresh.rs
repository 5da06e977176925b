//! When the host is asked to fetch the key set again
//! ([`Output::FetchKeys`](crate::Output::FetchKeys)): at once when the
//! engine starts, then every `every_ms` after each fetch settles, and when
//! a token names an unknown `kid`, unless a fetch was asked for less than
//! `min_interval_ms` before (so a flood of made-up `kid`s costs the
//! identity provider at most one fetch per interval). One fetch is in
//! flight at a time; a host that has not answered within
//! [`FETCH_TIMEOUT_MS`] is taken to have failed.

use crate::config::KeyRefresh;
use crate::ids::Millis;

/// How long a fetch may stay unanswered before it counts as failed.
pub const FETCH_TIMEOUT_MS: u64 = 30_000;

/// What a tick decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Due {
    /// Nothing is due.
    Nothing,
    /// Ask the host for the key set.
    Fetch,
    /// The fetch in flight timed out: whoever waits for it is answered.
    TimedOut,
}

/// Whether a token with an unknown `kid` may wait for a fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Wait {
    /// A fetch starts now: ask the host, and wait for it.
    Started,
    /// A fetch is in flight: wait for it.
    InFlight,
    /// No fetch may start now: refuse the token.
    No,
}

/// The refresh schedule of a key set the host can fetch.
#[derive(Debug, Clone)]
pub(crate) struct Refresh {
    rules: KeyRefresh,
    /// When the fetch in flight was asked for.
    in_flight: Option<Millis>,
    /// When the latest fetch was asked for.
    last_asked: Option<Millis>,
    /// When the scheduled fetch is due.
    due: Millis,
}

impl Refresh {
    /// A schedule whose first fetch is due at once.
    pub(crate) fn new(rules: KeyRefresh) -> Refresh {
        Refresh {
            rules,
            in_flight: None,
            last_asked: None,
            due: Millis(0),
        }
    }

    /// When [`Refresh::tick`] has something to do.
    pub(crate) fn deadline(&self) -> Millis {
        match self.in_flight {
            Some(asked) => asked.plus(FETCH_TIMEOUT_MS),
            None => self.due,
        }
    }

    /// What is due at `now`.
    pub(crate) fn tick(&mut self, now: Millis) -> Due {
        match self.in_flight {
            Some(asked) if now >= asked.plus(FETCH_TIMEOUT_MS) => {
                self.settled(now);
                Due::TimedOut
            }
            Some(_) => Due::Nothing,
            None if now >= self.due => {
                self.ask(now);
                Due::Fetch
            }
            None => Due::Nothing,
        }
    }

    /// A token named a `kid` the set lacks.
    pub(crate) fn unknown_key(&mut self, now: Millis) -> Wait {
        if self.in_flight.is_some() {
            return Wait::InFlight;
        }
        if self
            .last_asked
            .is_some_and(|at| now < at.plus(self.rules.min_interval_ms))
        {
            return Wait::No;
        }
        self.ask(now);
        Wait::Started
    }

    /// The fetch settled (loaded, failed or timed out): the next one is
    /// scheduled `every_ms` from `now`. A late answer after a time-out
    /// settles again; its keys are used all the same.
    pub(crate) fn settled(&mut self, now: Millis) {
        self.due = now.plus(self.rules.every_ms);
        self.in_flight = None;
    }

    fn ask(&mut self, now: Millis) {
        self.in_flight = Some(now);
        self.last_asked = Some(now);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refresh() -> Refresh {
        Refresh::new(KeyRefresh {
            every_ms: 300_000,
            min_interval_ms: 10_000,
        })
    }

    #[test]
    fn first_fetch_at_once_then_on_schedule() {
        let mut r = refresh();
        assert_eq!(r.deadline(), Millis(0));
        assert_eq!(r.tick(Millis(5)), Due::Fetch);
        assert_eq!(r.tick(Millis(6)), Due::Nothing);
        r.settled(Millis(100));
        assert_eq!(r.deadline(), Millis(300_100));
        assert_eq!(r.tick(Millis(300_099)), Due::Nothing);
        assert_eq!(r.tick(Millis(300_100)), Due::Fetch);
    }

    #[test]
    fn unknown_kids_share_one_fetch_then_wait_out_the_interval() {
        let mut r = refresh();
        assert_eq!(r.tick(Millis(0)), Due::Fetch);
        assert_eq!(r.unknown_key(Millis(1)), Wait::InFlight);
        r.settled(Millis(50));
        assert_eq!(r.unknown_key(Millis(9_999)), Wait::No);
        assert_eq!(r.unknown_key(Millis(10_000)), Wait::Started);
        assert_eq!(r.unknown_key(Millis(10_001)), Wait::InFlight);
        r.settled(Millis(10_002));
        assert_eq!(r.unknown_key(Millis(10_003)), Wait::No);
    }

    #[test]
    fn an_unanswered_fetch_times_out() {
        let mut r = refresh();
        assert_eq!(r.tick(Millis(0)), Due::Fetch);
        assert_eq!(r.deadline(), Millis(FETCH_TIMEOUT_MS));
        assert_eq!(r.tick(Millis(FETCH_TIMEOUT_MS - 1)), Due::Nothing);
        assert_eq!(r.tick(Millis(FETCH_TIMEOUT_MS)), Due::TimedOut);
        r.settled(Millis(FETCH_TIMEOUT_MS + 1));
        assert_eq!(r.unknown_key(Millis(FETCH_TIMEOUT_MS + 2)), Wait::Started);
    }
}
