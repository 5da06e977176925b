//! bubble-websocket-protocol.txt, "Fire-and-Forget Append" failures and
//! "Errors and Recovery": a refused append is a scoped error frame and
//! tears nothing down.

use std::time::Duration;

use bubble_tests::threads::{
    append, create_thread, error_frame, expect_event, grant, run_started, subscribe,
};
use bubble_tests::{Server, ALICE, BOB, TEST_CONFIG};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forbidden_append_is_a_scoped_error_and_the_subscription_goes_on() {
    let server = Server::start(TEST_CONFIG);
    let bob = server.http(BOB);
    create_thread(&bob, "thread-1").await;
    grant(&bob, "thread-1", "alice", "reader").await;

    let mut ws = server.ws(ALICE).await;
    subscribe(&mut ws, "thread-1", None).await;
    ws.send_json(&json!({ "type": "thread.append", "threadId": "thread-1",
        "event": { "type": "message_part", "principalId": "alice", "runId": "run-001",
                   "part": { "type": "text-delta", "id": "x", "delta": "hi" },
                   "version": "ai-sdk-v6" } }))
        .await;
    // { "type": "error", "threadId": "thread-1", "code": "forbidden",
    //   "message": "Principal \"alice\" lacks \"events.message_part\" on thread \"thread-1\"." }
    let error = ws.recv_json().await;
    assert_eq!(
        error,
        json!({ "type": "error", "threadId": "thread-1", "code": "forbidden",
                "message": "Principal \"alice\" lacks \"events.message_part\" on thread \"thread-1\"." })
    );
    // The connection stays open and the subscription keeps working.
    append(&bob, "thread-1", &run_started("run-1")).await;
    let event = expect_event(&mut ws, "thread-1", 1).await;
    assert_eq!(event["principalId"], "bob");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_appendable_type_needs_its_own_capability() {
    let server = Server::start(TEST_CONFIG);
    let bob = server.http(BOB);
    create_thread(&bob, "thread-1").await;
    grant(&bob, "thread-1", "alice", "reader").await;
    let mut ws = server.ws(ALICE).await;
    let bodies = [
        ("run_started", json!({"type": "run_started", "runId": "r"})),
        (
            "tool_call_approval",
            json!({"type": "tool_call_approval", "runId": "r", "toolCallId": "c", "approved": true}),
        ),
        (
            "run_finished",
            json!({"type": "run_finished", "runId": "r", "status": "failed"}),
        ),
    ];
    for (ty, event) in bodies {
        ws.send_json(&json!({"type": "thread.append", "threadId": "thread-1", "event": event}))
            .await;
        let frame = ws.recv_json().await;
        let message = error_frame(&frame, "forbidden", Some("thread-1"));
        assert_eq!(
            message,
            format!("Principal \"alice\" lacks \"events.{ty}\" on thread \"thread-1\".")
        );
    }
}

/// A refused `thread.subscribe` (unknown or unreadable thread) gets a
/// scoped `not_found` error, then `thread.subscription_closed`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_subscribe_is_error_then_closed() {
    let server = Server::start(TEST_CONFIG);
    create_thread(&server.http(BOB), "bobs-thread").await;
    let mut ws = server.ws(ALICE).await;
    for thread in ["no-such-thread", "bobs-thread"] {
        ws.send_json(&json!({"type": "thread.subscribe", "threadId": thread, "fromSeq": 1}))
            .await;
        let error = ws.recv_json().await;
        error_frame(&error, "not_found", Some(thread));
        let closed = ws.recv_json().await;
        assert_eq!(
            closed,
            json!({ "type": "thread.subscription_closed", "threadId": thread, "reason": "not_found" })
        );
    }
    // Unknown and unreadable threads are indistinguishable.
    ws.expect_no_frame_within(Duration::from_millis(300)).await;
}

/// The seed's example error: `invalid_request`, "Frame body must be a
/// JSON object." For a frame that is not an object there is no threadId to
/// scope to: the error is unscoped (SPEC §5); a `thread.append` whose
/// `event` is not an object is scoped to its thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn frame_body_must_be_a_json_object() {
    let server = Server::start(TEST_CONFIG);
    create_thread(&server.http(ALICE), "thread-1").await;
    let mut ws = server.ws(ALICE).await;
    for text in ["[1,2]", "42", "\"thread.subscribe\"", "null", "true"] {
        ws.send_text(text).await;
        let frame = ws.recv_json().await;
        assert_eq!(
            frame,
            json!({"type": "error", "code": "invalid_request",
                   "message": "Frame body must be a JSON object."}),
            "for {text}"
        );
    }
    for event in [json!([]), json!("run_started"), json!(1), json!(null)] {
        ws.send_json(&json!({"type": "thread.append", "threadId": "thread-1", "event": event}))
            .await;
        let frame = ws.recv_json().await;
        error_frame(&frame, "invalid_request", Some("thread-1"));
    }
    subscribe(&mut ws, "thread-1", None).await;
}
