//! Shortcuts for the threads API: event bodies, thread set-up, paging and
//! subscriptions, each asserting the happy-path status it expects.

use serde_json::{json, Value};

use crate::http::HttpClient;
use crate::ws::WsClient;

/// A `run_started` body (principalId omitted: the server fills the caller).
pub fn run_started(run_id: &str) -> Value {
    json!({"type": "run_started", "runId": run_id})
}

/// A `message_part` body carrying a `text-delta` chunk.
pub fn message_part(run_id: &str, delta: &str) -> Value {
    json!({
        "type": "message_part",
        "runId": run_id,
        "part": {"type": "text-delta", "id": "text-1", "delta": delta},
        "version": "ai-sdk-v6",
    })
}

/// A `tool_call_approval` body.
pub fn tool_call_approval(run_id: &str, tool_call_id: &str, approved: bool) -> Value {
    json!({
        "type": "tool_call_approval",
        "runId": run_id,
        "toolCallId": tool_call_id,
        "approved": approved,
    })
}

/// A `run_finished` body with `status: "completed"`.
pub fn run_finished(run_id: &str) -> Value {
    json!({"type": "run_finished", "runId": run_id, "status": "completed"})
}

/// `/v1/threads/{thread}{rest}`.
pub fn thread_path(thread: &str, rest: &str) -> String {
    format!("/v1/threads/{thread}{rest}")
}

/// Creates a top-level thread `id`; asserts `201` and returns the snapshot.
pub async fn create_thread(client: &HttpClient, id: &str) -> Value {
    let (status, body) = client.post("/v1/threads", &json!({"threadId": id})).await;
    assert_eq!(status, 201, "create thread {id}: {body}");
    body
}

/// Creates subthread `id` of `parent`; asserts `201`.
pub async fn create_subthread(client: &HttpClient, id: &str, parent: &str) -> Value {
    let (status, body) = client
        .post(
            "/v1/threads",
            &json!({"threadId": id, "parentThreadId": parent}),
        )
        .await;
    assert_eq!(status, 201, "create subthread {id} of {parent}: {body}");
    body
}

/// Appends `event` over HTTP; asserts `201` and returns the persisted event.
pub async fn append(client: &HttpClient, thread: &str, event: &Value) -> Value {
    let (status, body) = client.post(&thread_path(thread, "/events"), event).await;
    assert_eq!(status, 201, "append to {thread}: {body}");
    body["event"].clone()
}

/// Grants `role` to `principal` on `thread`; asserts `200`.
pub async fn grant(client: &HttpClient, thread: &str, principal: &str, role: &str) -> Value {
    let path = thread_path(thread, &format!("/grants/{principal}"));
    let (status, body) = client.put(&path, &json!({"role": role})).await;
    assert_eq!(
        status, 200,
        "grant {role} to {principal} on {thread}: {body}"
    );
    body
}

/// Creates `thread` as alice (`owner`) and grants bob `thread_manager`,
/// carol `member` and dave `reader`: one principal per role.
pub async fn create_with_roles(alice: &HttpClient, thread: &str) {
    create_thread(alice, thread).await;
    grant(alice, thread, "bob", "thread_manager").await;
    grant(alice, thread, "carol", "member").await;
    grant(alice, thread, "dave", "reader").await;
}

/// Every event of `thread`, paged over HTTP with `limit` until `nextSeq`
/// is null (the seed's catch-up loop). Returns the events and the seq to
/// subscribe from next.
pub async fn page_all(client: &HttpClient, thread: &str, limit: u32) -> (Vec<Value>, u64) {
    let mut events = Vec::new();
    let mut from = 1u64;
    loop {
        let path = thread_path(thread, &format!("/events?fromSeq={from}&limit={limit}"));
        let (status, body) = client.get(&path).await;
        assert_eq!(status, 200, "page {path}: {body}");
        let page = body["events"].as_array().expect("events array").clone();
        if let Some(last) = page.last() {
            from = last["seq"].as_u64().expect("seq") + 1;
        }
        events.extend(page);
        match &body["nextSeq"] {
            Value::Null => return (events, from),
            next => from = next.as_u64().expect("nextSeq is a number or null"),
        }
    }
}

/// Sends `thread.subscribe` and expects `thread.subscription_opened` as the
/// next frame; returns its `throughSeq`.
pub async fn subscribe(ws: &mut WsClient, thread: &str, from_seq: Option<u64>) -> u64 {
    let mut frame = json!({"type": "thread.subscribe", "threadId": thread});
    if let Some(from) = from_seq {
        frame["fromSeq"] = json!(from);
    }
    ws.send_json(&frame).await;
    let opened = ws.recv_json().await;
    assert_eq!(
        opened["type"], "thread.subscription_opened",
        "subscribe {thread}: {opened}"
    );
    assert_eq!(opened["threadId"], thread);
    opened["throughSeq"].as_u64().expect("throughSeq")
}

/// Receives the next frame and asserts it is the `thread.event` of `thread`
/// with `seq`; returns the event.
pub async fn expect_event(ws: &mut WsClient, thread: &str, seq: u64) -> Value {
    let frame = ws.recv_json().await;
    assert_eq!(
        frame["type"], "thread.event",
        "expected seq {seq} of {thread}: {frame}"
    );
    assert_eq!(frame["threadId"], thread, "{frame}");
    assert_eq!(frame["event"]["seq"], seq, "{frame}");
    frame["event"].clone()
}

/// Asserts `body` is the error body `{error: {code, message}}` with `code`;
/// returns the message.
pub fn error_code<'a>(body: &'a Value, code: &str) -> &'a str {
    assert_eq!(body["error"]["code"], code, "expected error {code}: {body}");
    body["error"]["message"]
        .as_str()
        .expect("error message is a string")
}

/// Asserts `frame` is an `error` frame with `code`, scoped to `thread` (or
/// unscoped: no `threadId` key at all, when `thread` is None); returns the
/// message.
pub fn error_frame<'a>(frame: &'a Value, code: &str, thread: Option<&str>) -> &'a str {
    assert_eq!(frame["type"], "error", "expected an error frame: {frame}");
    assert_eq!(frame["code"], code, "{frame}");
    match thread {
        Some(t) => assert_eq!(frame["threadId"], t, "{frame}"),
        None => assert!(
            frame.get("threadId").is_none(),
            "expected unscoped: {frame}"
        ),
    }
    frame["message"]
        .as_str()
        .expect("error message is a string")
}

/// Appends `message_part` events to `thread` until `stop` is set, each
/// acknowledged with 201; returns how many were acknowledged.
pub fn append_until(
    client: HttpClient,
    thread: &'static str,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> tokio::task::JoinHandle<u64> {
    tokio::spawn(async move {
        let path = format!("/v1/threads/{thread}/events");
        let mut acked = 0u64;
        while !stop.load(std::sync::atomic::Ordering::SeqCst) {
            let event = message_part("r", &format!("d{acked}"));
            let (status, body) = client.post(&path, &event).await;
            assert_eq!(status, 201, "{body}");
            acked += 1;
        }
        acked
    })
}
