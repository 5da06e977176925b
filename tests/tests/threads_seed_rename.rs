//! bubble-threads.txt, "Renaming a Thread": PATCH sets, clears or leaves
//! the title, needs `thread.manage`, and appends `thread_title_updated`
//! only when the title changes.

use bubble_tests::threads::{create_thread, error_code, grant, page_all};
use bubble_tests::{Server, ALICE, BOB, CAROL, DAVE, TEST_CONFIG};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rename_set_clear_and_untouched() {
    let server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);
    let bob = server.http(BOB);
    create_thread(&alice, "thread-42").await;
    grant(&alice, "thread-42", "bob", "thread_manager").await;

    // await store.updateThread('thread-42', { title: 'Q3 planning' });
    let (status, thread) = bob
        .patch("/v1/threads/thread-42", &json!({"title": "Q3 planning"}))
        .await;
    assert_eq!(status, 200, "{thread}");
    assert_eq!(thread["title"], "Q3 planning");
    assert_eq!(thread["headSeq"], 1);

    // Omitting the key leaves the title untouched and appends nothing.
    let (status, thread) = bob.patch("/v1/threads/thread-42", &json!({})).await;
    assert_eq!(status, 200, "{thread}");
    assert_eq!(thread["title"], "Q3 planning");
    assert_eq!(thread["headSeq"], 1);

    // The same title again is not a change: nothing is appended.
    let (status, thread) = bob
        .patch("/v1/threads/thread-42", &json!({"title": "Q3 planning"}))
        .await;
    assert_eq!(status, 200, "{thread}");
    assert_eq!(thread["headSeq"], 1);

    // await store.updateThread('thread-42', { title: null }); // clear
    let (status, thread) = bob
        .patch("/v1/threads/thread-42", &json!({"title": null}))
        .await;
    assert_eq!(status, 200, "{thread}");
    assert!(
        thread.get("title").is_none(),
        "a cleared title has no key: {thread}"
    );
    assert_eq!(thread["headSeq"], 2);

    let (events, _) = page_all(&alice, "thread-42", 100).await;
    assert_eq!(events.len(), 2);
    // { type: 'thread_title_updated', byPrincipalId: 'bob', title: 'Q3 planning' }
    assert_eq!(events[0]["type"], "thread_title_updated");
    assert_eq!(events[0]["byPrincipalId"], "bob");
    assert_eq!(events[0]["title"], "Q3 planning");
    assert_eq!(events[0]["seq"], 1);
    assert_eq!(events[0]["threadId"], "thread-42");
    // The same event is emitted with title: null when the title is cleared.
    assert_eq!(events[1]["type"], "thread_title_updated");
    assert_eq!(events[1]["byPrincipalId"], "bob");
    assert_eq!(events[1]["title"], json!(null));
    assert!(
        events[1].as_object().unwrap().contains_key("title"),
        "title: null is present"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_with_a_title() {
    let server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);
    let (status, thread) = alice
        .post(
            "/v1/threads",
            &json!({"threadId": "t", "title": "Kick-off"}),
        )
        .await;
    assert_eq!(status, 201, "{thread}");
    assert_eq!(thread["title"], "Kick-off");
    let (_, got) = alice.get("/v1/threads/t").await;
    assert_eq!(got["title"], "Kick-off");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_and_readers_cannot_rename() {
    let server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);
    create_thread(&alice, "thread-42").await;
    grant(&alice, "thread-42", "carol", "member").await;
    grant(&alice, "thread-42", "dave", "reader").await;

    for (client, who) in [(server.http(CAROL), "carol"), (server.http(DAVE), "dave")] {
        let (status, body) = client
            .patch("/v1/threads/thread-42", &json!({"title": "x"}))
            .await;
        assert_eq!(status, 403, "{who}: {body}");
        let message = error_code(&body, "forbidden");
        assert_eq!(
            message,
            format!("Principal \"{who}\" lacks \"thread.manage\" on thread \"thread-42\".")
        );
    }
    let (_, thread) = alice.get("/v1/threads/thread-42").await;
    assert!(thread.get("title").is_none());
    assert_eq!(thread["headSeq"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn title_must_be_a_string_or_null() {
    let server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);
    create_thread(&alice, "t").await;
    for bad in [
        json!({"title": 5}),
        json!({"title": ["a"]}),
        json!({"title": {"x": 1}}),
    ] {
        let (status, body) = alice.patch("/v1/threads/t", &bad).await;
        assert_eq!(status, 400, "{bad}: {body}");
        error_code(&body, "invalid_request");
    }
}
