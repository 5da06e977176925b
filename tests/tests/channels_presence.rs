//! Presence with two users and three sockets (user "a" twice, user "b"
//! once): every order of joins, then every order of leaves, leaving by
//! unsubscribe and by disconnect. One member per user id; member_added to
//! the others on a user's first socket, member_removed on their last.

mod channels_common;

use std::collections::BTreeSet;

use bubble_tests::{Server, TEST_CONFIG};
use channels_common::*;
use serde_json::{json, Value};

const USERS: [&str; 3] = ["a", "a", "b"];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Leave {
    Unsubscribe,
    Disconnect,
}

fn permutations() -> Vec<[usize; 3]> {
    let mut all = Vec::new();
    for i in 0..3 {
        for j in 0..3 {
            for k in 0..3 {
                if i != j && j != k && i != k {
                    all.push([i, j, k]);
                }
            }
        }
    }
    all
}

fn users_in(inside: &[bool; 3]) -> BTreeSet<&'static str> {
    (0..3).filter(|&i| inside[i]).map(|i| USERS[i]).collect()
}

/// Each socket still inside must receive `marker` next: nothing else is pending.
async fn expect_marker(
    server: &Server,
    sockets: &mut [Option<Socket>],
    inside: &[bool; 3],
    channel: &str,
    n: u32,
) {
    publish(
        server,
        &json!({"channel": channel, "name": "marker", "data": n}),
    )
    .await;
    for i in (0..3).filter(|&i| inside[i]) {
        let ws = &mut sockets[i].as_mut().unwrap().ws;
        assert_eq!(
            ws.recv_json().await,
            envelope(channel, "marker", &json!(n)),
            "socket {i}"
        );
    }
}

async fn scenario(
    server: &Server,
    channel: &str,
    joins: [usize; 3],
    leaves: [usize; 3],
    mode: Leave,
) {
    let mut sockets: Vec<Option<Socket>> = Vec::new();
    for _ in 0..3 {
        sockets.push(Some(connect(server).await));
    }
    let mut inside = [false; 3];
    let mut marker = 0;
    for &i in &joins {
        let user = USERS[i];
        let before = users_in(&inside);
        let snapshot = join_presence(sockets[i].as_mut().unwrap(), channel, user, user).await;
        inside[i] = true;
        let now = users_in(&inside);
        let ids: BTreeSet<&str> = snapshot["ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(ids, now, "snapshot ids after joins {joins:?}");
        assert_eq!(snapshot["count"], now.len());
        for u in &now {
            assert_eq!(snapshot["hash"][u], json!({"name": u}));
        }
        if !before.contains(user) {
            let added = json!({
                "event": "pubb:member_added",
                "channel": channel,
                "data": {"user_id": user, "user_info": {"name": user}}
            });
            for other in (0..3).filter(|&o| o != i && inside[o]) {
                assert_eq!(sockets[other].as_mut().unwrap().ws.recv_json().await, added);
            }
        }
        marker += 1;
        expect_marker(server, &mut sockets, &inside, channel, marker).await;
    }
    for &i in &leaves {
        let user = USERS[i];
        inside[i] = false;
        let mut socket = sockets[i].take().unwrap();
        match mode {
            Leave::Unsubscribe => {
                socket
                    .ws
                    .send_json(&json!({"action": "unsubscribe", "channel": channel}))
                    .await;
                // A later command's acknowledgement proves the unsubscribe was handled.
                subscribe(&mut socket.ws, "sync").await;
                sockets[i] = Some(socket);
            }
            Leave::Disconnect => {
                socket.ws.close(1000).await;
            }
        }
        if !users_in(&inside).contains(user) {
            let removed = json!({"event": "pubb:member_removed", "channel": channel, "data": {"user_id": user}});
            for other in (0..3).filter(|&o| inside[o]) {
                assert_eq!(
                    sockets[other].as_mut().unwrap().ws.recv_json().await,
                    removed
                );
            }
        }
        marker += 1;
        expect_marker(server, &mut sockets, &inside, channel, marker).await;
    }
}

async fn every_order(mode: Leave) {
    let server = Server::start(TEST_CONFIG);
    let mut n = 0;
    for joins in permutations() {
        for leaves in permutations() {
            n += 1;
            scenario(&server, &format!("presence-order-{n}"), joins, leaves, mode).await;
        }
    }
    assert_eq!(n, 36);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joins_and_unsubscribes_in_every_order() {
    every_order(Leave::Unsubscribe).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn joins_and_disconnects_in_every_order() {
    every_order(Leave::Disconnect).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnecting_rebuilds_from_a_new_snapshot() {
    let server = Server::start(TEST_CONFIG);
    let channel = "presence-team-42";
    let mut alex = connect(&server).await;
    join_presence(&mut alex, channel, "42", "Alex").await;
    let mut sam = connect(&server).await;
    join_presence(&mut sam, channel, "43", "Sam").await;
    alex.ws.recv_json().await;
    sam.ws.close(1000).await;
    let removed: Value = alex.ws.recv_json().await;
    assert_eq!(removed["event"], "pubb:member_removed");
    let mut sam = connect(&server).await;
    let snapshot = join_presence(&mut sam, channel, "43", "Sam").await;
    assert_eq!(snapshot["count"], 2);
    assert_eq!(alex.ws.recv_json().await["event"], "pubb:member_added");
}
