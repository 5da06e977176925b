//! The per-socket command rate: at most N commands in any sliding window.

use std::collections::VecDeque;

use crate::ids::Millis;

/// The times of a socket's recent commands (at most `limit` are kept).
#[derive(Debug, Clone, Default)]
pub(crate) struct CommandRate {
    recent: VecDeque<Millis>,
}

impl CommandRate {
    /// Counts one command at `now`. Returns false when it would be more
    /// than `limit` commands within `window_ms`.
    pub(crate) fn allow(&mut self, now: Millis, limit: u32, window_ms: u64) -> bool {
        while self
            .recent
            .front()
            .is_some_and(|at| at.plus(window_ms) <= now)
        {
            self.recent.pop_front();
        }
        if self.recent.len() >= usize::try_from(limit).unwrap_or(usize::MAX) {
            return false;
        }
        self.recent.push_back(now);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn twenty_per_second_then_refused() {
        let mut rate = CommandRate::default();
        for i in 0..20 {
            assert!(rate.allow(Millis(1_000 + i * 10), 20, 1_000));
        }
        assert!(!rate.allow(Millis(1_500), 20, 1_000));
        // The first command (at 1000) leaves the window at 2000.
        assert!(rate.allow(Millis(2_000), 20, 1_000));
        assert!(!rate.allow(Millis(2_000), 20, 1_000));
    }

    #[test]
    fn spread_commands_never_refused() {
        let mut rate = CommandRate::default();
        for i in 0..200 {
            assert!(rate.allow(Millis(i * 50), 20, 1_000));
        }
    }
}
