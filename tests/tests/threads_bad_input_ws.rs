//! Bad input on `/v1/ws`: each bad frame gets its exact code (scoped to the
//! frame's thread when it names one), appends nothing, and leaves the same
//! connection and other connections working.

use std::time::Duration;

use bubble_tests::threads::{create_thread, error_frame, expect_event, grant, subscribe};
use bubble_tests::{Server, WsClient, ALICE, BOB, TEST_CONFIG};
use serde_json::{json, Value};

/// Where an error is expected to be scoped.
enum Scope {
    Unscoped,
    Thread(&'static str),
}

/// What a bad frame is.
enum Bad {
    Text(String),
    Binary(Vec<u8>),
}

fn append(event: Value) -> Bad {
    Bad::Text(json!({"type": "thread.append", "threadId": "thread-1", "event": event}).to_string())
}

fn cases() -> Vec<(&'static str, Bad, &'static str, Scope)> {
    use Scope::{Thread, Unscoped};
    let text = |s: &str| Bad::Text(s.to_owned());
    let part = json!({"type": "text-delta", "id": "x", "delta": "hi"});
    vec![
        ("malformed JSON", text("{\"type\": \"thread.subscribe\","), "invalid_request", Unscoped),
        ("not JSON at all", text("hello"), "invalid_request", Unscoped),
        ("array frame", text("[]"), "invalid_request", Unscoped),
        ("number frame", text("7"), "invalid_request", Unscoped),
        ("binary frame", Bad::Binary(vec![0x7b, 0x7d]), "invalid_request", Unscoped),
        ("unknown frame type", text(r#"{"type":"thread.delete","threadId":"thread-1"}"#), "invalid_request", Unscoped),
        ("missing type", text(r#"{"threadId":"thread-1"}"#), "invalid_request", Unscoped),
        ("type not a string", text(r#"{"type":5,"threadId":"thread-1"}"#), "invalid_request", Unscoped),
        ("missing threadId", text(r#"{"type":"thread.subscribe"}"#), "invalid_request", Unscoped),
        ("threadId not a string", text(r#"{"type":"thread.subscribe","threadId":42}"#), "invalid_request", Unscoped),
        ("fromSeq zero", text(r#"{"type":"thread.subscribe","threadId":"thread-1","fromSeq":0}"#), "invalid_request", Thread("thread-1")),
        ("fromSeq negative", text(r#"{"type":"thread.subscribe","threadId":"thread-1","fromSeq":-3}"#), "invalid_request", Thread("thread-1")),
        ("fromSeq fractional", text(r#"{"type":"thread.subscribe","threadId":"thread-1","fromSeq":1.5}"#), "invalid_request", Thread("thread-1")),
        ("fromSeq string", text(r#"{"type":"thread.subscribe","threadId":"thread-1","fromSeq":"1"}"#), "invalid_request", Thread("thread-1")),
        ("fromSeq null", text(r#"{"type":"thread.subscribe","threadId":"thread-1","fromSeq":null}"#), "invalid_request", Thread("thread-1")),
        ("append without event", text(r#"{"type":"thread.append","threadId":"thread-1"}"#), "invalid_request", Thread("thread-1")),
        ("event not an object", append(json!("run_started")), "invalid_request", Thread("thread-1")),
        ("event without type", append(json!({"runId": "r"})), "invalid_request", Thread("thread-1")),
        ("unknown event type", append(json!({"type": "run_paused", "runId": "r"})), "invalid_request", Thread("thread-1")),
        ("missing runId", append(json!({"type": "run_started"})), "invalid_request", Thread("thread-1")),
        ("runId not a string", append(json!({"type": "run_started", "runId": 7})), "invalid_request", Thread("thread-1")),
        ("part not an object", append(json!({"type": "message_part", "runId": "r", "part": "hi", "version": "ai-sdk-v6"})), "invalid_request", Thread("thread-1")),
        ("part without string type", append(json!({"type": "message_part", "runId": "r", "part": {"delta": "hi"}, "version": "ai-sdk-v6"})), "invalid_request", Thread("thread-1")),
        ("wrong version", append(json!({"type": "message_part", "runId": "r", "part": part, "version": "ai-sdk-v5"})), "invalid_request", Thread("thread-1")),
        ("approved not a bool", append(json!({"type": "tool_call_approval", "runId": "r", "toolCallId": "c", "approved": "yes"})), "invalid_request", Thread("thread-1")),
        ("unknown run status", append(json!({"type": "run_finished", "runId": "r", "status": "done"})), "invalid_request", Thread("thread-1")),
        ("server-emitted participant_joined", append(json!({"type": "participant_joined", "principalId": "alice", "role": "owner"})), "invalid_request", Thread("thread-1")),
        ("server-emitted participant_left", append(json!({"type": "participant_left", "principalId": "alice"})), "invalid_request", Thread("thread-1")),
        ("server-emitted thread_title_updated", append(json!({"type": "thread_title_updated", "byPrincipalId": "alice", "title": "x"})), "invalid_request", Thread("thread-1")),
        ("principal mismatch", append(json!({"type": "run_started", "principalId": "bob", "runId": "r"})), "forbidden", Thread("thread-1")),
        ("principalId not a string", append(json!({"type": "run_started", "principalId": 1, "runId": "r"})), "invalid_request", Thread("thread-1")),
        ("bad idempotencyKey", append(json!({"type": "run_started", "runId": "r", "idempotencyKey": ""})), "invalid_request", Thread("thread-1")),
        ("append to an unknown thread", Bad::Text(json!({"type": "thread.append", "threadId": "nope", "event": {"type": "run_started", "runId": "r"}}).to_string()), "not_found", Thread("nope")),
    ]
}

/// Appends a probe over `ws` and checks it arrives, in order, on both the
/// sender's and the watcher's subscription.
async fn probe(ws: &mut WsClient, watcher: &mut WsClient, seq: u64, case: &str) {
    ws.send_json(&json!({"type": "thread.append", "threadId": "thread-1",
                         "event": {"type": "run_started", "runId": format!("probe-{seq}")}}))
        .await;
    for socket in [ws, watcher] {
        let event = expect_event(socket, "thread-1", seq).await;
        assert_eq!(event["runId"], format!("probe-{seq}"), "after {case}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_frame_gets_its_code_and_nothing_breaks() {
    let server = Server::start(TEST_CONFIG);
    let alice = server.http(ALICE);
    create_thread(&alice, "thread-1").await;
    grant(&alice, "thread-1", "bob", "reader").await;

    let mut ws = server.ws(ALICE).await;
    subscribe(&mut ws, "thread-1", None).await;
    let mut watcher = server.ws(BOB).await;
    subscribe(&mut watcher, "thread-1", None).await;

    let mut seq = 0;
    for (case, bad, code, scope) in cases() {
        match bad {
            Bad::Text(text) => ws.send_text(&text).await,
            Bad::Binary(bytes) => ws.send_binary(bytes).await,
        }
        let frame = ws.recv_json().await;
        let scope = match scope {
            Scope::Unscoped => None,
            Scope::Thread(t) => Some(t),
        };
        let message = error_frame(&frame, code, scope);
        assert!(!message.is_empty(), "{case}: {frame}");
        // Nothing was appended: the next probe takes the next seq.
        seq += 1;
        probe(&mut ws, &mut watcher, seq, case).await;
    }
    ws.expect_no_frame_within(Duration::from_millis(300)).await;
    watcher
        .expect_no_frame_within(Duration::from_millis(100))
        .await;
}

/// Invalid thread ids are refused before anything else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_thread_ids() {
    let server = Server::start(TEST_CONFIG);
    let mut ws = server.ws(ALICE).await;
    let too_long = "a".repeat(129);
    for id in ["", "has space", "slash/id", "ünïcode", too_long.as_str()] {
        ws.send_json(&json!({"type": "thread.subscribe", "threadId": id}))
            .await;
        let frame = ws.recv_json().await;
        assert_eq!(frame["type"], "error", "{id}: {frame}");
        assert_eq!(frame["code"], "invalid_request", "{id}: {frame}");
    }
    let longest = "a".repeat(128);
    create_thread(&server.http(ALICE), &longest).await;
    subscribe(&mut ws, &longest, None).await;
}
