//! WebSocket Ping cadence and Pong deadlines for every connection.
//!
//! Two kinds of connection: most are pinged every `ping_interval_ms` and
//! dropped `pong_timeout_ms` after their last Pong. An idle-pinged one (a
//! Pusher socket) is pinged only after `ping_interval_ms` without hearing
//! anything from it (a message or a Pong), and expires `pong_timeout_ms`
//! after it was last heard.

use std::collections::BTreeSet;

use crate::config::Heartbeat;
use crate::ids::{ConnId, Millis};
use crate::maps::HashMap;

/// What a due heartbeat asks the host to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Beat {
    /// Send a WebSocket Ping.
    Ping(ConnId),
    /// No Pong before the deadline: drop the connection.
    Expired(ConnId),
    /// An idle-pinged connection was silent for the ping interval.
    IdlePing(ConnId),
    /// An idle-pinged connection stayed silent until its deadline.
    IdleExpired(ConnId),
}

#[derive(Debug, Clone, Copy)]
struct Timers {
    next_ping: Millis,
    deadline: Millis,
    /// Its entry in [`Heartbeats::due`] (activity moves the timers later
    /// without moving the entry; the entry is rescheduled when it comes up).
    scheduled: Millis,
    /// Pinged after silence rather than periodically.
    idle: bool,
}

impl Timers {
    fn next(&self) -> Millis {
        self.next_ping.min(self.deadline)
    }
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

    /// Starts the timers of a new connection (`idle`: pinged after silence).
    pub(crate) fn open(&mut self, now: Millis, conn: ConnId, idle: bool) {
        let next_ping = now.plus(self.config.ping_interval_ms);
        let deadline = now.plus(self.config.pong_timeout_ms);
        let scheduled = next_ping.min(deadline);
        let timers = Timers {
            next_ping,
            deadline,
            scheduled,
            idle,
        };
        self.conns.insert(conn, timers);
        self.due.insert((scheduled, conn));
    }

    /// A Pong arrived: the read deadline moves to `now + pong_timeout`.
    pub(crate) fn pong(&mut self, now: Millis, conn: ConnId) {
        if let Some(t) = self.conns.get_mut(&conn) {
            t.deadline = now.plus(self.config.pong_timeout_ms);
            if t.idle {
                t.next_ping = now.plus(self.config.ping_interval_ms);
            }
        }
    }

    /// A message arrived: an idle-pinged connection was heard.
    pub(crate) fn activity(&mut self, now: Millis, conn: ConnId) {
        if self.conns.get(&conn).is_some_and(|t| t.idle) {
            self.pong(now, conn);
        }
    }

    /// Forgets a closed connection.
    pub(crate) fn close(&mut self, conn: ConnId) {
        if let Some(t) = self.conns.remove(&conn) {
            self.due.remove(&(t.scheduled, conn));
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
                let idle = t.idle;
                self.conns.remove(&conn);
                out.push(if idle {
                    Beat::IdleExpired(conn)
                } else {
                    Beat::Expired(conn)
                });
                continue;
            }
            if t.next_ping <= now {
                out.push(if t.idle {
                    Beat::IdlePing(conn)
                } else {
                    Beat::Ping(conn)
                });
                t.next_ping = now.plus(self.config.ping_interval_ms);
            }
            t.scheduled = t.next();
            self.due.insert((t.scheduled, conn));
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
        hb.open(Millis(0), c, false);
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
        hb.open(Millis(0), c, false);
        hb.pong(Millis(50), c);
        let mut out = Vec::new();
        hb.poll(Millis(100), &mut out);
        assert!(!out.contains(&Beat::Expired(c)));
        out.clear();
        hb.poll(Millis(110), &mut out);
        assert!(out.contains(&Beat::Expired(c)));
    }

    #[test]
    fn idle_connections_are_pinged_after_silence() {
        let mut hb = Heartbeats::new(Heartbeat {
            ping_interval_ms: 20,
            pong_timeout_ms: 60,
        });
        let c = ConnId(1);
        hb.open(Millis(0), c, true);
        let mut out = Vec::new();
        hb.activity(Millis(15), c);
        hb.poll(Millis(20), &mut out);
        assert!(out.is_empty(), "heard at 15: silent for 5 only");
        hb.poll(Millis(35), &mut out);
        assert_eq!(out, vec![Beat::IdlePing(c)]);
        out.clear();
        hb.poll(Millis(74), &mut out);
        assert_eq!(out, vec![Beat::IdlePing(c)], "pinged again while silent");
        out.clear();
        hb.poll(Millis(75), &mut out);
        assert_eq!(
            out,
            vec![Beat::IdleExpired(c)],
            "60 after it was last heard"
        );
        assert_eq!(hb.next_due(), None);
        hb.close(c);
    }

    #[test]
    fn an_answer_keeps_an_idle_connection() {
        let mut hb = Heartbeats::new(Heartbeat {
            ping_interval_ms: 20,
            pong_timeout_ms: 60,
        });
        let c = ConnId(1);
        hb.open(Millis(0), c, true);
        let mut out = Vec::new();
        hb.poll(Millis(20), &mut out);
        assert_eq!(out, vec![Beat::IdlePing(c)]);
        hb.activity(Millis(21), c);
        out.clear();
        hb.poll(Millis(40), &mut out);
        assert!(out.is_empty(), "heard at 21");
        hb.poll(Millis(80), &mut out);
        assert_eq!(out, vec![Beat::IdlePing(c)], "alive until 81");
        hb.close(c);
        assert_eq!(hb.next_due(), None);
    }
}
