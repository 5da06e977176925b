//! Channels across the nodes of a cluster: publications reach subscribers
//! on every node, a publication `Idempotency-Key` holds cluster-wide, and
//! presence counts one member per user over all nodes, removing the
//! members of a node that was killed.

mod channels_common;

use bubble_tests::{Deployment, Server, TEST_CONFIG};
use channels_common::*;
use serde_json::{json, Value};

/// Publishes `marker` on `node` and expects it next on every socket: any
/// frame the node's bus brought earlier would arrive first.
async fn expect_marker(node: &Server, sockets: &mut [&mut Socket], channel: &str, n: u64) {
    publish(
        node,
        &json!({"channel": channel, "name": "marker", "data": n}),
    )
    .await;
    for socket in sockets.iter_mut() {
        assert_eq!(
            socket.ws.recv_json().await,
            envelope(channel, "marker", &json!(n))
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_publication_reaches_every_node_once_per_key() {
    let mut deployment = Deployment::new();
    let (a, b) = (deployment.node(TEST_CONFIG), deployment.node(TEST_CONFIG));
    let mut on_a = connect(&a).await;
    subscribe(&mut on_a.ws, "news").await;
    let mut on_b = connect(&b).await;
    subscribe(&mut on_b.ws, "news").await;

    let body = json!({"channel": "news", "name": "story", "data": 1});
    let (status, first) = backend(&a)
        .post_idempotent(&events_path(), &body, "story-1")
        .await;
    assert_eq!(
        (status, &first["duplicate"]),
        (202, &json!(false)),
        "{first}"
    );
    let (status, again) = backend(&b)
        .post_idempotent(&events_path(), &body, "story-1")
        .await;
    assert_eq!(status, 202, "{again}");
    assert_eq!(again["duplicate"], true, "the key was claimed on node a");
    assert_eq!(again["publicationId"], first["publicationId"]);
    for socket in [&mut on_a, &mut on_b] {
        assert_eq!(
            recv_event(&mut socket.ws).await,
            ("news".into(), "story".into(), json!(1))
        );
    }
    // The duplicate was delivered nowhere: the next frame is the marker.
    expect_marker(&b, &mut [&mut on_a, &mut on_b], "news", 1).await;

    // The publisher's own socket is left out on whichever node it is.
    let body = json!({"channel": "news", "name": "echo", "data": 2, "socket_id": on_b.socket_id});
    publish(&a, &body).await;
    assert_eq!(recv_event(&mut on_a.ws).await.1, "echo");
    expect_marker(&a, &mut [&mut on_a, &mut on_b], "news", 2).await;
}

fn ids(snapshot: &Value) -> Vec<String> {
    let mut ids: Vec<String> = snapshot["ids"]
        .as_array()
        .expect("ids")
        .iter()
        .map(|v| v.as_str().unwrap_or_default().to_owned())
        .collect();
    ids.sort();
    ids
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn presence_counts_each_user_once_across_nodes() {
    let channel = "presence-room";
    let mut deployment = Deployment::new();
    let mut a = deployment.node(TEST_CONFIG);
    let b = deployment.node(TEST_CONFIG);
    let mut observer = connect(&b).await;
    join_presence(&mut observer, channel, "obs", "obs").await;

    // A user's first socket anywhere is a new member for everyone.
    let mut u_on_a = connect(&a).await;
    let snapshot = join_presence(&mut u_on_a, channel, "u", "u").await;
    let added = |user: &str| {
        json!({"event": "pubb:member_added", "channel": channel,
               "data": {"user_id": user, "user_info": {"name": user}}})
    };
    assert_eq!(observer.ws.recv_json().await, added("u"));
    // Whether a had heard of obs yet depends on timing; u is there.
    assert!(ids(&snapshot).contains(&"u".to_owned()));

    // The same user on a second node is no new member.
    let mut u_on_b = connect(&b).await;
    let snapshot = join_presence(&mut u_on_b, channel, "u", "u").await;
    assert_eq!(ids(&snapshot), ["obs", "u"]);
    assert_eq!(snapshot["count"], 2);
    expect_marker(&b, &mut [&mut observer, &mut u_on_b], channel, 1).await;

    // Closing one of the user's sockets does not remove the member.
    u_on_a.ws.close(1000).await;
    expect_marker(&a, &mut [&mut observer, &mut u_on_b], channel, 2).await;

    // A member only on a killed node is removed on the others.
    let mut k_on_a = connect(&a).await;
    join_presence(&mut k_on_a, channel, "k", "k").await;
    assert_eq!(observer.ws.recv_json().await, added("k"));
    assert_eq!(u_on_b.ws.recv_json().await, added("k"));
    a.kill9();
    let removed =
        json!({"event": "pubb:member_removed", "channel": channel, "data": {"user_id": "k"}});
    assert_eq!(observer.ws.recv_json().await, removed);
    assert_eq!(u_on_b.ws.recv_json().await, removed);
    // "u" is still connected on b: it was not removed with node a.
    expect_marker(&b, &mut [&mut observer, &mut u_on_b], channel, 3).await;
    let mut late = connect(&b).await;
    let snapshot = join_presence(&mut late, channel, "late", "late").await;
    assert_eq!(ids(&snapshot), ["late", "obs", "u"]);
}
