//! Subthread inheritance (SPEC §3): a grant on an ancestor confers
//! `thread.read`, `events.subscribe` and `thread.manage` (when it has them)
//! on descendants, transitively, and nothing else.

use bubble_tests::threads::{
    create_subthread, create_thread, error_code, grant, run_started, subscribe,
};
use bubble_tests::{config_with_eve, Server, ALICE, BOB, CAROL, DAVE, EVE};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parent_grants_reach_children_and_grandchildren() {
    let server = Server::start(&config_with_eve());
    let alice = server.http(ALICE);
    create_thread(&alice, "root").await;
    grant(&alice, "root", "bob", "thread_manager").await;
    grant(&alice, "root", "carol", "member").await;
    grant(&alice, "root", "dave", "reader").await;
    create_subthread(&alice, "child", "root").await;
    create_subthread(&alice, "grandchild", "child").await;

    for thread in ["child", "grandchild"] {
        let events = format!("/v1/threads/{thread}/events");
        for (token, who, manage) in [
            (BOB, "bob", true),
            (CAROL, "carol", false),
            (DAVE, "dave", false),
        ] {
            let c = server.http(token);
            let (status, body) = c.get(&format!("/v1/threads/{thread}")).await;
            assert_eq!(status, 200, "{who} reads {thread}: {body}");
            let (status, _) = c.get(&events).await;
            assert_eq!(status, 200, "{who} reads events of {thread}");

            let (status, body) = c
                .patch(
                    &format!("/v1/threads/{thread}"),
                    &json!({"title": format!("by {who}")}),
                )
                .await;
            if manage {
                assert_eq!(status, 200, "{who} manages {thread}: {body}");
            } else {
                assert_eq!(status, 403, "{who} cannot manage {thread}: {body}");
            }

            // Appends, grants, participants and subthreads are never inherited.
            let (status, body) = c.post(&events, &run_started("r")).await;
            assert_eq!(status, 403, "{who} appends to {thread}: {body}");
            assert_eq!(
                error_code(&body, "forbidden"),
                format!("Principal \"{who}\" lacks \"events.run_started\" on thread \"{thread}\".")
            );
            let (status, _) = c.get(&format!("/v1/threads/{thread}/grants")).await;
            assert_eq!(status, 403, "{who} lists grants of {thread}");
            let (status, _) = c
                .post(
                    &format!("/v1/threads/{thread}/participants"),
                    &json!({"principalId": "x"}),
                )
                .await;
            assert_eq!(status, 403, "{who} adds participants to {thread}");
            let (status, _) = c
                .post(
                    "/v1/threads",
                    &json!({"threadId": format!("{thread}-{who}"), "parentThreadId": thread}),
                )
                .await;
            assert_eq!(status, 403, "{who} creates a subthread of {thread}");

            let mut ws = server.ws(token).await;
            subscribe(&mut ws, thread, None).await;
        }

        let eve = server.http(EVE);
        let (status, body) = eve.get(&format!("/v1/threads/{thread}")).await;
        assert_eq!(status, 404, "{body}");
        error_code(&body, "not_found");
    }

    // Listing by parent shows the readable children.
    let (status, body) = server
        .http(DAVE)
        .get("/v1/threads?parentThreadId=root")
        .await;
    assert_eq!(status, 200, "{body}");
    let ids: Vec<&str> = body["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["threadId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec!["child"]);
}

/// A member of the parent may create a subthread (subthreads.create);
/// the creator owns the child.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_create_subthreads_they_own() {
    let server = Server::start(&config_with_eve());
    let alice = server.http(ALICE);
    create_thread(&alice, "root").await;
    grant(&alice, "root", "carol", "member").await;
    let carol = server.http(CAROL);
    let child = create_subthread(&carol, "side", "root").await;
    assert_eq!(child["parentThreadId"], "root");
    let (status, grants) = carol.get("/v1/threads/side/grants").await;
    assert_eq!(status, 200, "{grants}");
    assert_eq!(
        grants["grants"],
        json!([{"threadId": "side", "principalId": "carol", "role": "owner"}])
    );
    let (status, _) = carol
        .post("/v1/threads/side/events", &run_started("r"))
        .await;
    assert_eq!(status, 201);
    // The parent's owner reads and manages the child by inheritance.
    let (status, _) = alice
        .patch("/v1/threads/side", &json!({"title": "t"}))
        .await;
    assert_eq!(status, 200);
}
