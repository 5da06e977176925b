//! Heartbeats on `/v1/ws`: a Ping every 20 s; no Pong for 60 s closes the
//! socket. Time is simulated: the harness jumps to `poll_timeout`.

mod common;

use common::{Harness, T0};

#[test]
fn pings_every_20_seconds_and_closes_without_pong() {
    let mut h = Harness::new();
    let conn = h.connect("alice");
    let mut pings = Vec::new();
    while h.is_open(conn) {
        assert!(h.advance_to_timeout(), "an open socket has a deadline");
        if !h.pings().is_empty() {
            pings.push(h.now().0 - T0);
        }
        assert!(
            h.now().0 - T0 <= 60_000,
            "still open after 60 s without a Pong"
        );
    }
    assert_eq!(pings, [20_000, 40_000]);
    assert_eq!(h.now().0 - T0, 60_000);
    assert!(h.close_code(conn).is_some());
    assert_eq!(
        h.engine.poll_timeout(),
        None,
        "no timers for a closed socket"
    );
}

#[test]
fn pongs_keep_the_socket_open() {
    let mut h = Harness::new();
    let conn = h.connect("alice");
    let other = h.connect("bob");
    for _ in 0..10 {
        assert!(h.advance_to_timeout());
        if h.pings().contains(&conn) {
            h.pong(conn);
        }
    }
    assert!(h.now().0 - T0 >= 60_000);
    assert!(h.is_open(conn), "answered pings keep the socket open");
    assert!(!h.is_open(other), "the silent socket was closed");
}

#[test]
fn early_and_repeated_ticks_are_harmless() {
    let mut h = Harness::new();
    let conn = h.connect("alice");
    for _ in 0..5 {
        h.input(bubble_core::Input::Tick);
    }
    h.advance(19_999);
    h.input(bubble_core::Input::Tick);
    assert!(h.pings().is_empty());
    assert!(h.is_open(conn));
    h.advance(1);
    h.input(bubble_core::Input::Tick);
    h.input(bubble_core::Input::Tick);
    assert_eq!(h.pings(), [conn]);
}
