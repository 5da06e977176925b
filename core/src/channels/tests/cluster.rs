//! Two clustered engines whose broadcasts are relayed to each other, as a
//! broker would: publications, presence and publication keys cluster-wide.

use serde_json::{json, Value};

use super::{app, subscribe, Harness};
use crate::cluster::{ClaimOutcome, ClusterMessage, MemberRow, NodeState};
use crate::config::Config;
use crate::{ChannelProtocol, Input, Output};

const CHANNEL: &str = "presence-room";

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
fn join(h: &mut Harness, conn: u64, user: &str) {
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

fn state(node: &str, seq: u64, users: &[&str]) -> NodeState {
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

/// A clustered node `name` of an app whose webhook hears every event,
/// each input's events sent at once.
fn hooked(name: &str) -> Harness {
    let mut app = app(1, None);
    app.webhooks = vec![crate::config::WebhookConfig {
        url: "http://hooks.test/".into(),
        event_types: crate::config::WEBHOOK_EVENT_TYPES
            .iter()
            .map(|t| (*t).to_owned())
            .collect(),
    }];
    let mut config = Config {
        apps: vec![app],
        cluster: true,
        node: name.into(),
        ..Config::default()
    };
    config.limits.webhook_batch_ms = 0;
    Harness::with(config)
}

/// Starts nodes that know each other (each gets its first snapshot and
/// the others' hellos), once all of them report.
fn cluster(names: &[&str]) -> Vec<Harness> {
    let mut nodes: Vec<Harness> = names
        .iter()
        .map(|me| {
            let mut h = hooked(me);
            let nodes = names
                .iter()
                .filter(|n| *n != me)
                .map(|n| state(n, 0, &[]))
                .collect();
            h.handle(Input::ClusterState { nodes });
            h
        })
        .collect();
    relay_all(&mut nodes, names);
    for node in &mut nodes {
        node.now = node.now.plus(crate::channels::peers::REPORTER_GRACE_MS);
    }
    nodes
}

/// Relays every node's broadcasts to every other, until none is left.
fn relay_all(nodes: &mut [Harness], names: &[&str]) {
    loop {
        let mut moved = false;
        for from in 0..nodes.len() {
            let messages = std::mem::take(&mut nodes[from].broadcasts);
            moved |= !messages.is_empty();
            for message in messages {
                for (to, node) in nodes.iter_mut().enumerate() {
                    if to != from {
                        node.handle(Input::Remote {
                            node: names[from],
                            message: message.clone(),
                        });
                    }
                }
            }
        }
        if !moved {
            return;
        }
    }
}

/// Every webhook event the nodes sent, as `name channel user?`.
fn hooks(nodes: &mut [Harness]) -> Vec<String> {
    nodes
        .iter_mut()
        .flat_map(|n| std::mem::take(&mut n.hooks))
        .map(|e| {
            let user = e["user_id"].as_str().unwrap_or("");
            format!(
                "{} {} {user}",
                e["name"].as_str().unwrap(),
                e["channel"].as_str().unwrap()
            )
            .trim_end()
            .to_owned()
        })
        .collect()
}

#[test]
fn occupied_and_vacated_once_when_two_nodes_race() {
    let names = ["a", "b"];
    let mut nodes = cluster(&names);
    for node in nodes.iter_mut() {
        node.open(1, 1, ChannelProtocol::V2);
        node.send(1, subscribe("news"));
    }
    relay_all(&mut nodes, &names);
    assert_eq!(hooks(&mut nodes), ["channel_occupied news"]);
    for node in nodes.iter_mut() {
        node.close(1);
    }
    relay_all(&mut nodes, &names);
    assert_eq!(hooks(&mut nodes), ["channel_vacated news"]);
}

#[test]
fn one_node_reports_every_event_of_a_channel_in_order() {
    let names = ["a", "b", "c"];
    let mut nodes = cluster(&names);
    for (n, user) in ["ann", "bob", "cid"].iter().enumerate() {
        join(&mut nodes[n], 1, user);
        relay_all(&mut nodes, &names);
    }
    for n in 0..3 {
        nodes[n].close(1);
        relay_all(&mut nodes, &names);
    }
    let owner: Vec<usize> = (0..3).filter(|&n| !nodes[n].hooks.is_empty()).collect();
    assert_eq!(owner.len(), 1, "one node reports {CHANNEL}");
    let expected = [
        "channel_occupied presence-room",
        "member_added presence-room ann",
        "member_added presence-room bob",
        "member_added presence-room cid",
        "member_removed presence-room ann",
        "member_removed presence-room bob",
        "member_removed presence-room cid",
        "channel_vacated presence-room",
    ];
    assert_eq!(hooks(&mut nodes), expected);
}

#[test]
fn client_events_are_reported_by_the_channels_reporter() {
    let names = ["a", "b"];
    let mut nodes = cluster(&names);
    let channel = "private-chat";
    let sender = super::pusher::open_pusher(&mut nodes[0], 1, 1);
    let auth = super::auth_string("key-1", "secret-1", &sender, channel, None);
    nodes[0].send(
        1,
        json!({"event":"pusher:subscribe","data":{"channel":channel,"auth":auth}}),
    );
    nodes[0].send(
        1,
        json!({"event":"client-x","channel":channel,"data":{"n":1}}),
    );
    relay_all(&mut nodes, &names);
    let events: Vec<Value> = nodes
        .iter_mut()
        .flat_map(|n| std::mem::take(&mut n.hooks))
        .collect();
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0]["name"], "channel_occupied");
    assert_eq!(
        events[1],
        json!({"name":"client_event","channel":channel,"event":"client-x","data":"{\"n\":1}","socket_id":sender})
    );
}

#[test]
fn a_gone_node_s_members_and_channels_are_reported_by_the_others() {
    let names = ["a", "b"];
    let mut nodes = cluster(&names);
    join(&mut nodes[0], 1, "ann");
    join(&mut nodes[1], 1, "bob");
    nodes[1].open(2, 1, ChannelProtocol::V2);
    nodes[1].send(2, subscribe("solo"));
    relay_all(&mut nodes, &names);
    hooks(&mut nodes);
    nodes[0].handle(Input::Remote {
        node: "a",
        message: ClusterMessage::NodeGone { node: "b".into() },
    });
    assert_eq!(
        hooks(&mut nodes),
        ["member_removed presence-room bob", "channel_vacated solo"]
    );
    nodes[0].close(1);
    assert_eq!(
        hooks(&mut nodes),
        [
            "member_removed presence-room ann",
            "channel_vacated presence-room"
        ]
    );
}

#[test]
fn a_node_that_starts_does_not_report_what_the_cluster_holds() {
    let names = ["a", "c"];
    let mut a = cluster(&["a"]).remove(0);
    join(&mut a, 1, "ann");
    a.hooks.clear();
    a.broadcasts.clear();
    let mut c = hooked("c");
    c.handle(Input::ClusterState {
        nodes: vec![a.engine.local_state(a.now)],
    });
    assert!(c.take().is_empty(), "nobody subscribes on c");
    let mut nodes = vec![a, c];
    join(&mut nodes[1], 1, "cid");
    relay_all(&mut nodes, &names);
    assert_eq!(
        hooks(&mut nodes),
        ["member_added presence-room cid"],
        "occupied already: not again"
    );
}

#[test]
fn counts_are_cluster_wide() {
    let names = ["a", "b"];
    let mut nodes = cluster(&names);
    for conn in 1..=2 {
        nodes[0].open(conn, 1, ChannelProtocol::V2);
        nodes[0].send(conn, subscribe("news"));
    }
    nodes[1].open(1, 1, ChannelProtocol::V2);
    nodes[1].send(1, subscribe("news"));
    relay_all(&mut nodes, &names);
    let info = |h: &mut Harness| {
        let (status, body) =
            super::pusher::signed_get(h, "/apps/app-1/channels/news", "info=subscription_count");
        assert_eq!(status, 200);
        body
    };
    for node in nodes.iter_mut() {
        assert_eq!(
            info(node),
            json!({"occupied": true, "subscription_count": 3})
        );
    }
    nodes[0].close(1);
    nodes[0].close(2);
    relay_all(&mut nodes, &names);
    assert_eq!(
        info(&mut nodes[1]),
        json!({"occupied": true, "subscription_count": 1})
    );
    nodes[1].close(1);
    relay_all(&mut nodes, &names);
    assert_eq!(
        info(&mut nodes[0]),
        json!({"occupied": false, "subscription_count": 0})
    );
}

#[test]
fn a_node_that_said_hello_reports_from_its_time() {
    let mut a = cluster(&["a"]).remove(0);
    let channel = (0..100)
        .map(|i| format!("c{i}"))
        .find(|c| {
            crate::cluster::owner_score("b", "app-1", c)
                > crate::cluster::owner_score("a", "app-1", c)
        })
        .expect("a channel b reports");
    a.handle(Input::Remote {
        node: "b",
        message: ClusterMessage::Hello { since: a.now.0 },
    });
    a.open(1, 1, ChannelProtocol::V2);
    a.send(1, subscribe(&channel));
    assert!(a.hooks.is_empty(), "b reports {channel}");
    a.handle(Input::Remote {
        node: "a",
        message: ClusterMessage::NodeGone { node: "b".into() },
    });
    a.close(1);
    assert_eq!(a.hooks.len(), 1, "b is gone: a reports {channel}");
}
