//! WebSocket Ping cadence and Pong deadlines for every connection.

use std::collections::{BTreeSet, HashMap};

use crate::config::Heartbeat;
use crate::ids::{ConnId, Millis};

/// What a due heartbeat asks the host to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Beat {
    /// Send a WebSocket Ping.
    Ping(ConnId),
    /// No Pong before the deadline: drop the connection.
    Expired(ConnId),
}

#[derive(Debug, Clone, Copy)]
struct Timers {
    next_ping: Millis,
    deadline: Millis,
}

/// Per-connection timers, indexed by their next due time.
#[derive(Debug, Default)]
pub(crate) struct Heartbeats {
    config: Heartbeat,
    conns: HashMap<ConnId, Timers>,
    due: BTreeSet<(Millis, ConnId)>,
}

impl Heartbeats {
    pub(crate) fn new(config: Heartbeat) -> Heartbeats {
        Heartbeats {
            config,
            ..Heartbeats::default()
        }
    }

    /// Starts the timers of a new connection.
    pub(crate) fn open(&mut self, now: Millis, conn: ConnId) {
        let timers = Timers {
            next_ping: now.plus(self.config.ping_interval_ms),
            deadline: now.plus(self.config.pong_timeout_ms),
        };
        self.conns.insert(conn, timers);
        self.due
            .insert((timers.next_ping.min(timers.deadline), conn));
    }

    /// A Pong arrived: the read deadline moves to `now + pong_timeout`.
    pub(crate) fn pong(&mut self, now: Millis, conn: ConnId) {
        if let Some(t) = self.conns.get_mut(&conn) {
            t.deadline = now.plus(self.config.pong_timeout_ms);
        }
    }

    /// Forgets a closed connection.
    pub(crate) fn close(&mut self, conn: ConnId) {
        if let Some(t) = self.conns.remove(&conn) {
            self.due.remove(&(t.next_ping.min(t.deadline), conn));
        }
    }

    /// The earliest time a heartbeat is due.
    pub(crate) fn next_due(&self) -> Option<Millis> {
        self.due.first().map(|(at, _)| *at)
    }

    /// Everything due at `now`. Early or repeated calls are harmless.
    pub(crate) fn poll(&mut self, now: Millis, out: &mut Vec<Beat>) {
        while let Some(&(at, conn)) = self.due.first() {
            if at > now {
                break;
            }
            self.due.remove(&(at, conn));
            let Some(t) = self.conns.get_mut(&conn) else {
                continue;
            };
            if t.deadline <= now {
                self.conns.remove(&conn);
                out.push(Beat::Expired(conn));
                continue;
            }
            if t.next_ping <= now {
                out.push(Beat::Ping(conn));
                t.next_ping = now.plus(self.config.ping_interval_ms);
            }
            self.due.insert((t.next_ping.min(t.deadline), conn));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pings_then_expires_without_pong() {
        let mut hb = Heartbeats::new(Heartbeat {
            ping_interval_ms: 20,
            pong_timeout_ms: 60,
        });
        let c = ConnId(1);
        hb.open(Millis(0), c);
        let mut out = Vec::new();
        hb.poll(Millis(19), &mut out);
        assert!(out.is_empty());
        hb.poll(Millis(20), &mut out);
        assert_eq!(out, vec![Beat::Ping(c)]);
        out.clear();
        hb.poll(Millis(40), &mut out);
        assert_eq!(out, vec![Beat::Ping(c)]);
        out.clear();
        hb.poll(Millis(60), &mut out);
        assert_eq!(out, vec![Beat::Expired(c)]);
        assert_eq!(hb.next_due(), None);
    }

    #[test]
    fn pong_extends_deadline() {
        let mut hb = Heartbeats::new(Heartbeat {
            ping_interval_ms: 20,
            pong_timeout_ms: 60,
        });
        let c = ConnId(1);
        hb.open(Millis(0), c);
        hb.pong(Millis(50), c);
        let mut out = Vec::new();
        hb.poll(Millis(100), &mut out);
        assert!(!out.contains(&Beat::Expired(c)));
        out.clear();
        hb.poll(Millis(110), &mut out);
        assert!(out.contains(&Beat::Expired(c)));
    }
}
