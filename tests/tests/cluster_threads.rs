//! Threads across the nodes of a cluster: one creation when two nodes
//! create the same id at once, a grant revoked on one node ends a
//! subscription on another (to the thread, or to a subthread that
//! inherits the grant), the clients of a killed node resume on
//! another node with `fromSeq` and lose nothing, and an event or a thread
//! one node acknowledged (and a grant it gave) is there for a snapshot, a
//! page, a `fromSeq` or a request on another at once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bubble_tests::threads::{
    append, append_until, create_subthread, create_thread, error_frame, expect_event, grant,
    page_all, run_started, subscribe,
};
use bubble_tests::{Deployment, WsClient, ALICE, DAVE, HANG_TIMEOUT, TEST_CONFIG};
use serde_json::{json, Value};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_created_on_two_nodes_at_once_is_created_once() {
    let mut deployment = Deployment::new();
    let (a, b) = (deployment.node(TEST_CONFIG), deployment.node(TEST_CONFIG));
    for i in 0..20 {
        let body = json!({"threadId": format!("race-{i}")});
        let (on_a, on_b) = (a.http(ALICE), b.http(ALICE));
        let (first, second) = tokio::join!(
            on_a.post("/v1/threads", &body),
            on_b.post("/v1/threads", &body)
        );
        let mut statuses = [first.0, second.0];
        statuses.sort_unstable();
        assert_eq!(statuses, [200, 201], "race-{i}: {first:?} {second:?}");
        assert_eq!(first.1, second.1, "both answers describe the one thread");
    }
    let count = deployment.sql("SELECT count(*) FROM threads WHERE thread_id LIKE 'race-%'");
    assert_eq!(count, ["20"]);
}

/// Dave reads `granted` (a thread) through a grant alice gives on node A,
/// and follows `followed` (`granted` or a subthread of it) on node B;
/// alice revokes the grant on A. The subscription on B ends.
async fn revoked_on_a_ends_on_b(granted: &str, followed: &str) {
    let mut deployment = Deployment::new();
    let (a, b) = (deployment.node(TEST_CONFIG), deployment.node(TEST_CONFIG));
    let alice = a.http(ALICE);
    create_thread(&alice, granted).await;
    if followed != granted {
        create_subthread(&alice, followed, granted).await;
    }
    grant(&alice, granted, "dave", "reader").await;
    let mut dave = b.ws(DAVE).await;
    subscribe(&mut dave, followed, None).await;
    let path = format!("/v1/threads/{granted}/grants/dave");
    let (status, body) = alice.delete(&path).await;
    assert_eq!(status, 204, "{body}");
    error_frame(&dave.recv_json().await, "not_found", Some(followed));
    assert_eq!(
        dave.recv_json().await,
        json!({"type": "thread.subscription_closed", "threadId": followed, "reason": "not_found"})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_revoked_on_one_node_ends_a_subscription_on_another() {
    revoked_on_a_ends_on_b("shared", "shared").await;
}

/// A subthread's subscription rests on its parent's grants: a grant
/// revoked on the parent on one node ends a subscription to the subthread
/// on another node, where nobody follows the parent itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grant_revoked_on_a_parent_on_one_node_ends_a_subthread_subscription_on_another() {
    revoked_on_a_ends_on_b("family", "family-sub").await;
}

/// Reads events of `thread` until the socket ends; returns their seqs.
async fn follow(mut ws: WsClient, thread: &str, until: Option<u64>) -> Vec<u64> {
    let mut seqs = Vec::new();
    loop {
        if until.is_some_and(|h| seqs.last().copied() == Some(h)) {
            return seqs;
        }
        let bubble_tests::WsMessage::Text(text) = ws.recv().await else {
            return seqs;
        };
        let frame: Value = serde_json::from_str(&text).expect("JSON frame");
        assert_eq!(frame["type"], "thread.event", "{frame}");
        assert_eq!(frame["threadId"], thread);
        seqs.push(frame["event"]["seq"].as_u64().expect("seq"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_of_a_killed_node_resume_elsewhere_and_lose_nothing() {
    let mut deployment = Deployment::new();
    let mut doomed = deployment.node(TEST_CONFIG);
    let survivor = deployment.node(TEST_CONFIG);
    create_thread(&survivor.http(ALICE), "busy").await;

    let mut ws = doomed.ws(ALICE).await;
    subscribe(&mut ws, "busy", Some(1)).await;
    let before_kill = tokio::spawn(follow(ws, "busy", None));

    // Appends keep going on the surviving node throughout.
    let stop = Arc::new(AtomicBool::new(false));
    let writer = append_until(survivor.http(ALICE), "busy", stop.clone());
    let (events, _) = loop {
        let page = page_all(&survivor.http(ALICE), "busy", 1000).await;
        if page.0.len() >= 50 {
            break page;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert!(events.len() >= 50);
    doomed.kill9();
    let seen = tokio::time::timeout(HANG_TIMEOUT, before_kill)
        .await
        .expect("the socket ends with the node")
        .expect("follower");
    assert_eq!(seen, (1..=seen.len() as u64).collect::<Vec<_>>());

    // Resume on the survivor from the next unseen seq.
    let next = seen.len() as u64 + 1;
    let mut ws = survivor.ws(ALICE).await;
    subscribe(&mut ws, "busy", Some(next)).await;
    stop.store(true, Ordering::SeqCst);
    let acked = writer.await.expect("writer");
    let marker = run_started("end");
    let (status, body) = survivor
        .http(ALICE)
        .post("/v1/threads/busy/events", &marker)
        .await;
    assert_eq!(status, 201, "{body}");
    let head = body["event"]["seq"].as_u64().expect("seq");
    assert_eq!(head, acked + 1, "every acknowledged append is stored");
    let resumed = tokio::time::timeout(HANG_TIMEOUT, follow(ws, "busy", Some(head)))
        .await
        .expect("the resumed subscription reaches the head");
    assert_eq!(resumed, (next..=head).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscription_opened_during_appends_elsewhere_gets_backlog_then_live_once() {
    let mut deployment = Deployment::new();
    let (a, b) = (deployment.node(TEST_CONFIG), deployment.node(TEST_CONFIG));
    create_thread(&a.http(ALICE), "moving").await;
    let stop = Arc::new(AtomicBool::new(false));
    let writer = append_until(a.http(ALICE), "moving", stop.clone());
    while page_all(&a.http(ALICE), "moving", 1000).await.0.len() < 20 {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let mut ws = b.ws(ALICE).await;
    let through = subscribe(&mut ws, "moving", Some(1)).await;
    assert!(
        through >= 20,
        "throughSeq is the head at registration: {through}"
    );
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    stop.store(true, Ordering::SeqCst);
    let head = writer.await.expect("writer");
    let seen = tokio::time::timeout(HANG_TIMEOUT, follow(ws, "moving", Some(head)))
        .await
        .expect("backlog then live reach the head");
    assert_eq!(seen, (1..=head).collect::<Vec<_>>());
}

/// Right after node A acknowledges seq N, before node B may have heard of
/// it: a page from N on B holds it, and a subscription on B from N + 1
/// opens at `throughSeq` ≥ N and delivers N + 1 first (never N, which is
/// below its `fromSeq`). B follows the thread all along, so it answers from
/// its cache, which learns of A's commits from the broker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_acknowledged_on_one_node_is_there_at_once_on_another() {
    let mut deployment = Deployment::new();
    let (a, b) = (deployment.node(TEST_CONFIG), deployment.node(TEST_CONFIG));
    let (on_a, on_b) = (a.http(ALICE), b.http(ALICE));
    create_thread(&on_a, "hop").await;
    let mut follower = b.ws(ALICE).await;
    subscribe(&mut follower, "hop", Some(1)).await;
    for round in 0..30 {
        let mut late = b.ws(ALICE).await;
        let seq = append(&on_a, "hop", &run_started(&format!("a-{round}"))).await["seq"]
            .as_u64()
            .expect("seq");
        let (status, page) = on_b
            .get(&format!("/v1/threads/hop/events?fromSeq={seq}"))
            .await;
        assert_eq!(status, 200, "{page}");
        assert_eq!(page["events"][0]["seq"], seq, "round {round}: {page}");
        let through = subscribe(&mut late, "hop", Some(seq + 1)).await;
        assert!(
            through >= seq,
            "round {round}: throughSeq {through} < {seq}"
        );
        append(&on_a, "hop", &run_started(&format!("a-{round}-next"))).await;
        expect_event(&mut late, "hop", seq + 1).await;
    }
    let head = 60;
    let seen = tokio::time::timeout(HANG_TIMEOUT, follow(follower, "hop", Some(head)))
        .await
        .expect("the follower reaches the head");
    assert_eq!(seen, (1..=head).collect::<Vec<_>>());
}

/// A client behind a load balancer looks for a thread (node B answers
/// `404` and remembers it absent), creates it (node A), then uses it (node
/// B again) before B may have heard of the creation: B reads the record
/// rather than trust its cached absence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_created_on_one_node_is_there_at_once_on_another() {
    let mut deployment = Deployment::new();
    let (a, b) = (deployment.node(TEST_CONFIG), deployment.node(TEST_CONFIG));
    let (on_a, on_b) = (a.http(ALICE), b.http(ALICE));
    for round in 0..30 {
        let thread = format!("looked-for-{round}");
        let path = format!("/v1/threads/{thread}");
        let (status, body) = on_b.get(&path).await;
        assert_eq!(status, 404, "{body}");
        create_thread(&on_a, &thread).await;
        let (status, body) = on_b.get(&path).await;
        assert_eq!(status, 200, "round {round}: {body}");
        let event = append(&on_b, &thread, &run_started("first")).await;
        assert_eq!(event["seq"], 1, "{event}");
    }
}

/// Node B follows a thread, so it answers from its cache, which learns of
/// node A's commits from the broker. What A just acknowledged is there on
/// B at once all the same: the thread's `headSeq`, a page from below B's
/// cached head reaching the new event, and a grant A gave (on the thread,
/// and inherited by a subthread) honoured by B.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_or_a_grant_from_one_node_is_there_at_once_on_another() {
    let mut deployment = Deployment::new();
    let (a, b) = (deployment.node(TEST_CONFIG), deployment.node(TEST_CONFIG));
    let (on_a, on_b, dave_on_b) = (a.http(ALICE), b.http(ALICE), b.http(DAVE));
    create_thread(&on_a, "seen").await;
    let mut follower = b.ws(ALICE).await;
    subscribe(&mut follower, "seen", Some(1)).await;
    for round in 0..30 {
        let seq = append(&on_a, "seen", &run_started(&format!("a-{round}"))).await["seq"]
            .as_u64()
            .expect("seq");
        let (status, thread) = on_b.get("/v1/threads/seen").await;
        assert_eq!(status, 200, "{thread}");
        assert_eq!(thread["headSeq"], seq, "round {round}: {thread}");
        let from = seq.saturating_sub(1).max(1);
        let (status, page) = on_b
            .get(&format!("/v1/threads/seen/events?fromSeq={from}"))
            .await;
        assert_eq!(status, 200, "{page}");
        let last = page["events"].as_array().and_then(|e| e.last()).cloned();
        assert_eq!(
            last.map(|e| e["seq"].clone()),
            Some(json!(seq)),
            "round {round}: {page}"
        );
        assert_eq!(page["nextSeq"], Value::Null, "round {round}: {page}");

        let (parent, child) = (format!("granted-{round}"), format!("granted-{round}-sub"));
        create_thread(&on_a, &parent).await;
        create_subthread(&on_a, &child, &parent).await;
        for path in [
            format!("/v1/threads/{parent}"),
            format!("/v1/threads/{child}"),
        ] {
            let (status, body) = on_b.get(&path).await;
            assert_eq!(status, 200, "{body}");
            let (status, body) = dave_on_b.get(&path).await;
            assert_eq!(status, 404, "no grant yet: {body}");
        }
        grant(&on_a, &parent, "dave", "reader").await;
        for path in [
            format!("/v1/threads/{parent}"),
            format!("/v1/threads/{child}"),
        ] {
            let (status, body) = dave_on_b.get(&path).await;
            assert_eq!(status, 200, "round {round}, {path}: {body}");
        }
    }
}
