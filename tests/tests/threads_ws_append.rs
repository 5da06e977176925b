//! bubble-websocket-protocol.txt, "Fire-and-Forget Append": `thread.append`
//! writes one event with no ack; subscribers on any connection receive it;
//! append and subscribe are independent.

use std::time::Duration;

use bubble_tests::threads::{create_thread, expect_event, grant, page_all, subscribe};
use bubble_tests::{Server, ALICE, BOB, TEST_CONFIG};
use serde_json::{json, Value};

const BOT: &str = "token-bot-research";

fn config() -> String {
    format!("{TEST_CONFIG}\n[[auth.tokens]]\ntoken = \"{BOT}\"\nprincipal = \"bot-research\"\n")
}

fn seed_append_frame() -> Value {
    json!({ "type": "thread.append", "threadId": "thread-1",
            "event": { "type": "message_part", "principalId": "bot-research",
                       "runId": "run-001",
                       "part": { "type": "text-delta", "id": "t1", "delta": "Hello" },
                       "version": "ai-sdk-v6" } })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_append_reaches_every_subscriber() {
    let server = Server::start(&config());
    let alice = server.http(ALICE);
    create_thread(&alice, "thread-1").await;
    grant(&alice, "thread-1", "bot-research", "member").await;

    let mut watcher = server.ws(ALICE).await;
    subscribe(&mut watcher, "thread-1", None).await;
    let mut bot = server.ws(BOT).await;
    subscribe(&mut bot, "thread-1", None).await;

    bot.send_json(&seed_append_frame()).await;

    for ws in [&mut bot, &mut watcher] {
        // The persisted event comes back through the subscription, with its
        // seq and createdAt; the part is stored verbatim.
        let event = expect_event(ws, "thread-1", 1).await;
        assert_eq!(event["type"], "message_part");
        assert_eq!(event["principalId"], "bot-research");
        assert_eq!(event["runId"], "run-001");
        assert_eq!(
            event["part"],
            json!({ "type": "text-delta", "id": "t1", "delta": "Hello" })
        );
        assert_eq!(event["version"], "ai-sdk-v6");
        assert_eq!(event["threadId"], "thread-1");
        assert!(event["createdAt"].is_string());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn append_without_subscription_has_no_response() {
    let server = Server::start(&config());
    let alice = server.http(ALICE);
    create_thread(&alice, "thread-1").await;
    grant(&alice, "thread-1", "bot-research", "member").await;

    let mut bot = server.ws(BOT).await;
    bot.send_json(&seed_append_frame()).await;
    // No ack and no echo: the connection holds no subscription.
    bot.expect_no_frame_within(Duration::from_millis(500)).await;

    // The only way to learn the seq is to page history over HTTP. The
    // append is fire-and-forget, so wait for it to land.
    let mut events = Vec::new();
    for _ in 0..600 {
        (events, _) = page_all(&alice, "thread-1", 100).await;
        if !events.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(events.len(), 1, "the appended event is in history");
    assert_eq!(events[0]["seq"], 1);
    assert_eq!(events[0]["runId"], "run-001");
}

/// "Human input uses the same frame shape as agent output: start a
/// user-authored run, append one or more message_part events with that
/// runId, then finish the run." principalId may be omitted: it is filled
/// with the caller.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_human_run_over_the_socket() {
    let server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);
    create_thread(&alice, "thread-1").await;
    grant(&alice, "thread-1", "bob", "member").await;

    let mut ws = server.ws(BOB).await;
    subscribe(&mut ws, "thread-1", None).await;
    let events = [
        json!({"type": "run_started", "runId": "run-h1"}),
        json!({"type": "message_part", "runId": "run-h1", "version": "ai-sdk-v6",
               "part": {"type": "text-start", "id": "m1"}}),
        json!({"type": "message_part", "runId": "run-h1", "version": "ai-sdk-v6",
               "part": {"type": "text-delta", "id": "m1", "delta": "Hi there"}}),
        json!({"type": "message_part", "runId": "run-h1", "version": "ai-sdk-v6",
               "part": {"type": "text-end", "id": "m1"}}),
        json!({"type": "tool_call_approval", "runId": "run-h1", "toolCallId": "call-1",
               "approved": false, "reason": "not now"}),
        json!({"type": "run_finished", "runId": "run-h1", "status": "completed"}),
    ];
    for event in &events {
        ws.send_json(&json!({"type": "thread.append", "threadId": "thread-1", "event": event}))
            .await;
    }
    for (i, sent) in events.iter().enumerate() {
        let got = expect_event(&mut ws, "thread-1", i as u64 + 1).await;
        assert_eq!(got["principalId"], "bob", "filled with the caller: {got}");
        for (key, value) in sent.as_object().unwrap() {
            assert_eq!(&got[key], value, "field {key} stored verbatim: {got}");
        }
    }
}

/// The connection does not need to be subscribed to the thread it appends
/// to, and can append to several threads.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn append_and_subscribe_are_independent() {
    let server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);
    create_thread(&alice, "thread-1").await;
    create_thread(&alice, "thread-2").await;
    let mut reader = server.ws(ALICE).await;
    subscribe(&mut reader, "thread-2", None).await;

    let mut writer = server.ws(ALICE).await;
    subscribe(&mut writer, "thread-1", None).await;
    writer
        .send_json(&json!({"type": "thread.append", "threadId": "thread-2",
                           "event": {"type": "run_started", "runId": "r"}}))
        .await;
    let event = expect_event(&mut reader, "thread-2", 1).await;
    assert_eq!(event["principalId"], "alice");
    writer
        .expect_no_frame_within(Duration::from_millis(300))
        .await;
}
