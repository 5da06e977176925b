//! Two clustered engines whose broadcasts are relayed to each other, as a
//! broker would: publications, presence and publication keys cluster-wide.

use serde_json::{json, Value};

use super::{app, subscribe, Harness};
use crate::cluster::{ClaimOutcome, ClusterMessage, MemberRow, NodeState};
use crate::config::Config;
use crate::{ChannelProtocol, Input, Output};

pub(super) const CHANNEL: &str = "presence-room";

fn node() -> Harness {
    Harness::with(Config {
        apps: vec![app(1, None)],
        cluster: true,
        ..Config::default()
    })
}

/// Delivers what `from` (node `name`) broadcast to `to`.
fn relay(from: &mut Harness, name: &str, to: &mut Harness) {
    for message in std::mem::take(&mut from.broadcasts) {
        to.handle(Input::Remote {
            node: name,
            message,
        });
    }
}

/// Opens socket `conn` and subscribes it to [`CHANNEL`] as `user`.
pub(super) fn join(h: &mut Harness, conn: u64, user: &str) {
    let socket_id = h.open(conn, 1, ChannelProtocol::V2);
    let (status, body) = h.post(
        "/api/apps/app-1/auth",
        "secret-1",
        None,
        json!({"socket_id":socket_id,"channel_name":CHANNEL,"user_id":user,"user_info":{"name":user}}),
    );
    assert_eq!(status, 200);
    h.send(
        conn,
        json!({"action":"subscribe","channel":CHANNEL,"auth":body["auth"],"channel_data":body["channel_data"]}),
    );
}

fn events(h: &mut Harness, event: &str) -> Vec<(u64, Value)> {
    h.take()
        .into_iter()
        .filter(|(_, f)| f["event"] == event)
        .map(|(c, f)| (c, f["data"].clone()))
        .collect()
}

#[test]
fn publications_reach_the_other_node_once_without_the_publisher() {
    let (mut a, mut b) = (node(), node());
    b.open(1, 1, ChannelProtocol::V2);
    b.send(1, subscribe("news"));
    let publisher = b.open(2, 1, ChannelProtocol::V2);
    b.send(2, subscribe("news"));
    b.take();
    b.broadcasts.clear();
    let (status, _) = a.publish(json!({"channel":"news","name":"n","data":{"x":1}}));
    assert_eq!(status, 202);
    assert!(a.take().is_empty(), "nobody subscribes on a");
    relay(&mut a, "a", &mut b);
    let delivered = b.take();
    assert_eq!(delivered.len(), 2);
    let payload: Value = serde_json::from_str(delivered[0].1["data"].as_str().unwrap()).unwrap();
    assert_eq!(payload, json!({"name":"n","data":{"x":1}}));
    a.publish(json!({"channel":"news","name":"n","data":2,"socket_id":publisher}));
    relay(&mut a, "a", &mut b);
    let delivered: Vec<u64> = b.take().into_iter().map(|(c, _)| c).collect();
    assert_eq!(delivered, [1], "the publisher's socket on b is left out");
    assert!(
        b.broadcasts.is_empty(),
        "a relayed publication is not sent on"
    );
}

#[test]
fn one_member_per_user_across_nodes() {
    let (mut a, mut b) = (node(), node());
    join(&mut b, 1, "observer");
    b.take();
    relay(&mut b, "b", &mut a);
    join(&mut a, 1, "alex");
    let ack = a.take();
    assert_eq!(
        ack[0].1["data"]["presence"]["count"], 2,
        "b's observer is listed"
    );
    relay(&mut a, "a", &mut b);
    let added = events(&mut b, "pubb:member_added");
    assert_eq!(
        added,
        [(1, json!({"user_id":"alex","user_info":{"name":"alex"}}))]
    );

    join(&mut b, 2, "alex");
    let frames = b.take();
    assert_eq!(frames.len(), 1, "alex is a member already: no member_added");
    assert_eq!(frames[0].1["data"]["presence"]["count"], 2);
    relay(&mut b, "b", &mut a);
    assert!(events(&mut a, "pubb:member_added").is_empty());

    a.close(1);
    assert!(events(&mut a, "pubb:member_removed").is_empty());
    relay(&mut a, "a", &mut b);
    assert!(
        events(&mut b, "pubb:member_removed").is_empty(),
        "alex is still connected on b"
    );
    b.close(2);
    assert_eq!(
        events(&mut b, "pubb:member_removed"),
        [(1, json!({"user_id":"alex"}))]
    );
}

#[test]
fn a_gone_node_takes_its_members_with_it() {
    let (mut a, mut b) = (node(), node());
    join(&mut b, 1, "observer");
    join(&mut a, 1, "alex");
    join(&mut a, 2, "sam");
    relay(&mut a, "a", &mut b);
    b.take();
    b.handle(Input::Remote {
        node: "c",
        message: ClusterMessage::NodeGone { node: "a".into() },
    });
    let mut removed: Vec<Value> = events(&mut b, "pubb:member_removed")
        .into_iter()
        .map(|(_, d)| d["user_id"].clone())
        .collect();
    removed.sort_by_key(Value::to_string);
    assert_eq!(removed, [json!("alex"), json!("sam")]);
}

fn member(user: &str) -> MemberRow {
    MemberRow {
        app_id: "app-1".into(),
        channel: CHANNEL.into(),
        user_id: user.into(),
        user_info: Some(json!({"name": user}).to_string()),
    }
}

/// `node`'s rows on the broker: `users` in [`CHANNEL`], as of `seq`.
pub(super) fn state(node: &str, seq: u64, users: &[&str]) -> NodeState {
    NodeState {
        node: node.into(),
        seq,
        since: None,
        members: users.iter().map(|u| member(u)).collect(),
        channels: Vec::new(),
    }
}

#[test]
fn the_cluster_state_replaces_what_was_known() {
    let mut b = node();
    join(&mut b, 1, "observer");
    b.take();
    b.handle(Input::ClusterState {
        nodes: vec![state("a", 1, &["alex", "sam"]), state("c", 1, &["alex"])],
    });
    assert_eq!(events(&mut b, "pubb:member_added").len(), 2);
    assert_eq!(
        b.broadcasts.last(),
        Some(&ClusterMessage::Hello {
            since: b.now.0 + crate::channels::peers::REPORTER_GRACE_MS
        }),
        "settled: it says so at once, and when it reports"
    );
    b.broadcasts.clear();
    b.handle(Input::ClusterState {
        nodes: vec![state("a", 2, &[]), state("c", 2, &["alex", "kim"])],
    });
    assert!(b.broadcasts.is_empty(), "hello only once");
    let frames = b.take();
    let names: Vec<(&str, &str)> = frames
        .iter()
        .map(|(_, f)| {
            (
                f["event"].as_str().unwrap_or(""),
                f["data"]["user_id"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(
        names,
        [("pubb:member_removed", "sam"), ("pubb:member_added", "kim")]
    );
    let local = b.engine.local_state(b.now);
    assert_eq!(local.members, [member("observer")]);
    assert_eq!(local.channels.len(), 1);
    assert_eq!(
        (local.channels[0].channel.as_str(), local.channels[0].count),
        (CHANNEL, 1)
    );
    assert!(local.seq > 0);
    assert!(
        b.engine.local_state(b.now).seq > local.seq,
        "each snapshot of itself under a new seq"
    );
}

#[test]
fn a_snapshot_older_than_a_message_does_not_undo_it() {
    let mut b = node();
    join(&mut b, 1, "observer");
    b.handle(Input::ClusterState {
        nodes: vec![state("a", 1, &[])],
    });
    b.take();
    b.handle(Input::Remote {
        node: "a",
        message: ClusterMessage::MemberJoined {
            app_id: "app-1".into(),
            channel: CHANNEL.into(),
            user_id: "alex".into(),
            user_info: None,
            seq: 10,
        },
    });
    assert_eq!(events(&mut b, "pubb:member_added").len(), 1);
    b.handle(Input::ClusterState {
        nodes: vec![state("a", 9, &[])],
    });
    assert!(b.take().is_empty(), "read before the join: ignored");
    b.handle(Input::ClusterState {
        nodes: vec![state("a", 11, &[])],
    });
    assert_eq!(events(&mut b, "pubb:member_removed").len(), 1);
    b.handle(Input::Remote {
        node: "a",
        message: ClusterMessage::MemberLeft {
            app_id: "app-1".into(),
            channel: CHANNEL.into(),
            user_id: "alex".into(),
            seq: 11,
        },
    });
    assert!(b.take().is_empty(), "the snapshot held it already");
}

#[test]
fn a_node_missing_from_two_snapshots_is_gone() {
    let mut b = node();
    join(&mut b, 1, "observer");
    b.handle(Input::ClusterState {
        nodes: vec![state("a", 1, &["alex"])],
    });
    b.take();
    b.handle(Input::ClusterState { nodes: Vec::new() });
    assert!(b.take().is_empty(), "missing once: maybe not written yet");
    b.handle(Input::ClusterState { nodes: Vec::new() });
    assert_eq!(
        events(&mut b, "pubb:member_removed"),
        [(1, json!({"user_id":"alex"}))]
    );
}

/// Publishes with `key` and returns the claim it asked for.
fn claim(h: &mut Harness, key: &str) -> (crate::ClaimId, String) {
    let outs = h.request(
        "/api/apps/app-1/events",
        "secret-1",
        Some(key),
        json!({"channel":"news","name":"n","data":1}),
    );
    assert!(
        !outs.iter().any(|o| matches!(o, Output::Respond { .. })),
        "a keyed publication waits for its claim"
    );
    match outs.as_slice() {
        [Output::Claim {
            claim,
            app_id,
            key: claimed,
            value,
            ttl_ms,
        }] => {
            assert_eq!((app_id.as_str(), claimed.as_str()), ("app-1", key));
            assert_eq!(*ttl_ms, 24 * 60 * 60 * 1000);
            (*claim, value.clone())
        }
        other => panic!("expected one claim, got {other:?}"),
    }
}

fn settle(h: &mut Harness, claim: crate::ClaimId, outcome: ClaimOutcome) -> (u16, Value) {
    for out in h.handle(Input::Claimed { claim, outcome }) {
        if let Output::Respond { response, .. } = out {
            return (
                response.status,
                serde_json::from_str(&response.body).unwrap(),
            );
        }
    }
    panic!("no response");
}

#[test]
fn a_publication_key_is_claimed_once_for_the_cluster() {
    let (mut a, mut b) = (node(), node());
    b.open(1, 1, ChannelProtocol::V2);
    b.send(1, subscribe("news"));
    b.take();
    b.broadcasts.clear();
    let (first, record) = claim(&mut a, "k1");
    let (status, body) = settle(&mut a, first, ClaimOutcome::Won);
    assert_eq!((status, &body["duplicate"]), (202, &json!(false)));
    relay(&mut a, "a", &mut b);
    assert_eq!(b.take().len(), 1, "delivered once");

    let (second, _) = claim(&mut b, "k1");
    let (status, again) = settle(&mut b, second, ClaimOutcome::Taken(record));
    assert_eq!(status, 202);
    assert_eq!(again["duplicate"], true);
    assert_eq!(again["publicationId"], body["publicationId"]);
    assert!(b.take().is_empty(), "a duplicate is not delivered");
    assert!(b.broadcasts.is_empty());

    let (third, _) = b
        .request(
            "/api/apps/app-1/events",
            "secret-1",
            Some("k1"),
            json!({"channel":"news","name":"n","data":1}),
        )
        .into_iter()
        .find_map(|o| match o {
            Output::Respond { response, .. } => Some((response.status, response.body)),
            _ => None,
        })
        .expect("a key this node saw answers at once");
    assert_eq!(third, 202);

    let (lost, _) = claim(&mut b, "k2");
    let (status, body) = settle(&mut b, lost, ClaimOutcome::Unavailable);
    assert_eq!((status, &body["duplicate"]), (202, &json!(false)));
    assert_eq!(
        b.take().len(),
        1,
        "without the broker the node decides alone"
    );
}

#[test]
fn a_single_node_tells_nobody() {
    let mut h = Harness::new();
    join(&mut h, 1, "alex");
    h.post(
        "/api/apps/app-1/events",
        "secret-1",
        Some("k"),
        json!({"channel":"news","name":"n"}),
    );
    assert!(h.broadcasts.is_empty());
}
