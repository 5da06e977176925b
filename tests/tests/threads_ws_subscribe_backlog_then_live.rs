//! bubble-websocket-protocol.txt, "Opening a Subscription" and the worked
//! example: `subscription_opened` pins `throughSeq`, then the backlog
//! `fromSeq..=throughSeq` in order, then live events `> throughSeq`.

use std::time::Duration;

use bubble_tests::threads::{append, create_thread, expect_event, message_part, subscribe};
use bubble_tests::{Server, ALICE, BOB, TEST_CONFIG};
use serde_json::json;

async fn thread_with_events(server: &Server, id: &str, n: u64) {
    let alice = server.http(ALICE);
    create_thread(&alice, id).await;
    for i in 1..=n {
        let event = append(&alice, id, &message_part("run-1", &format!("part {i}"))).await;
        assert_eq!(event["seq"], i);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_seq_18_with_head_42() {
    let server = Server::start(TEST_CONFIG);
    thread_with_events(&server, "thread-1", 42).await;
    let mut ws = server.ws(ALICE).await;

    // { "type": "thread.subscribe", "threadId": "thread-1", "fromSeq": 18 }
    ws.send_json(&json!({"type": "thread.subscribe", "threadId": "thread-1", "fromSeq": 18}))
        .await;
    // { "type": "thread.subscription_opened", "threadId": "thread-1", "throughSeq": 42 }
    let opened = ws.recv_json().await;
    assert_eq!(
        opened,
        json!({"type": "thread.subscription_opened", "threadId": "thread-1", "throughSeq": 42})
    );
    // Backlog: seq 18 through 42, in order.
    for seq in 18..=42 {
        let event = expect_event(&mut ws, "thread-1", seq).await;
        assert_eq!(event["threadId"], "thread-1");
        assert_eq!(event["type"], "message_part");
        assert_eq!(event["part"]["delta"], format!("part {seq}"));
        assert!(event["createdAt"].is_string());
    }
    // Live: seq 43, appended by someone else after registration.
    append(
        &server.http(ALICE),
        "thread-1",
        &message_part("run-1", "part 43"),
    )
    .await;
    let live = expect_event(&mut ws, "thread-1", 43).await;
    assert_eq!(live["part"]["delta"], "part 43");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_seq_defaults_to_1() {
    let server = Server::start(TEST_CONFIG);
    thread_with_events(&server, "thread-1", 3).await;
    let mut ws = server.ws(ALICE).await;
    assert_eq!(subscribe(&mut ws, "thread-1", None).await, 3);
    for seq in 1..=3 {
        expect_event(&mut ws, "thread-1", seq).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn from_seq_beyond_the_head_is_live_only() {
    let server = Server::start(TEST_CONFIG);
    thread_with_events(&server, "thread-1", 5).await;
    let mut ws = server.ws(ALICE).await;
    assert_eq!(subscribe(&mut ws, "thread-1", Some(1_000_000)).await, 5);
    ws.expect_no_frame_within(Duration::from_millis(300)).await;
    append(
        &server.http(ALICE),
        "thread-1",
        &message_part("run-1", "live"),
    )
    .await;
    let live = expect_event(&mut ws, "thread-1", 6).await;
    assert_eq!(live["part"]["delta"], "live");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_thread_opens_at_zero() {
    let server = Server::start(TEST_CONFIG);
    create_thread(&server.http(ALICE), "thread-1").await;
    let mut ws = server.ws(ALICE).await;
    assert_eq!(subscribe(&mut ws, "thread-1", Some(1)).await, 0);
    append(
        &server.http(ALICE),
        "thread-1",
        &message_part("run-1", "first"),
    )
    .await;
    expect_event(&mut ws, "thread-1", 1).await;
}

/// The worked example: a client that tags each event `backlog` or `live`
/// by comparing its seq with `throughSeq`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worked_example_phases() {
    let server = Server::start(TEST_CONFIG);
    thread_with_events(&server, "thread-1", 4).await;
    let mut ws = server.ws(ALICE).await;
    ws.send_json(&json!({"type": "thread.subscribe", "threadId": "thread-1", "fromSeq": 1}))
        .await;

    let mut through_seq: Option<u64> = None;
    let mut phases = Vec::new();
    let alice = server.http(ALICE);
    while phases.len() < 6 {
        let frame = ws.recv_json().await;
        match frame["type"].as_str() {
            Some("thread.subscription_opened") => {
                through_seq = frame["throughSeq"].as_u64();
                append(&alice, "thread-1", &message_part("run-2", "a")).await;
                append(&alice, "thread-1", &message_part("run-2", "b")).await;
            }
            Some("thread.event") => {
                let seq = frame["event"]["seq"].as_u64().unwrap();
                let backlog = seq <= through_seq.expect("opened comes first");
                phases.push((seq, if backlog { "backlog" } else { "live" }));
            }
            _ => panic!("unexpected frame {frame}"),
        }
    }
    assert_eq!(through_seq, Some(4));
    assert_eq!(
        phases,
        vec![
            (1, "backlog"),
            (2, "backlog"),
            (3, "backlog"),
            (4, "backlog"),
            (5, "live"),
            (6, "live")
        ]
    );
}

/// "Subscribing does not require participant presence": a reader who never
/// joined subscribes and receives participant events like any other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readers_subscribe_without_joining() {
    let server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);
    create_thread(&alice, "thread-1").await;
    bubble_tests::threads::grant(&alice, "thread-1", "bob", "reader").await;
    let mut ws = server.ws(BOB).await;
    assert_eq!(subscribe(&mut ws, "thread-1", None).await, 0);

    let (status, _) = alice
        .post("/v1/threads/thread-1/participants", &json!({}))
        .await;
    assert_eq!(status, 201);
    let joined = expect_event(&mut ws, "thread-1", 1).await;
    assert_eq!(joined["type"], "participant_joined");
    assert_eq!(joined["principalId"], "alice");
    assert_eq!(joined["role"], "owner");

    let (status, _) = alice
        .delete("/v1/threads/thread-1/participants/alice")
        .await;
    assert_eq!(status, 204);
    let left = expect_event(&mut ws, "thread-1", 2).await;
    assert_eq!(left["type"], "participant_left");
    assert_eq!(left["principalId"], "alice");
}
