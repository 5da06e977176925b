//! Webhooks in a cluster: every event of a channel reported once, by the
//! node that reports the channel at the event's time, in order; counts and
//! occupancy over every node's subscribers.

use serde_json::{json, Value};

use super::cluster::{join, state, CHANNEL};
use super::{app, subscribe, Harness};
use crate::cluster::ClusterMessage;
use crate::config::Config;
use crate::{ChannelProtocol, Input};

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
