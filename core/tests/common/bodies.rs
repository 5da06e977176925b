//! Event bodies to append and helpers to read received frames.

use serde_json::{json, Value};

// --- event bodies -----------------------------------------------------------------

/// A `run_started` body without `principalId` (the engine fills the caller).
pub fn run_started(run: &str) -> Value {
    json!({ "type": "run_started", "runId": run })
}

/// A `message_part` body without `principalId`.
pub fn message_part(run: &str, text: &str) -> Value {
    json!({
        "type": "message_part",
        "runId": run,
        "part": { "type": "text-delta", "id": "m1", "delta": text },
        "version": "ai-sdk-v6",
    })
}

/// A `tool_call_approval` body without `principalId`.
pub fn tool_call_approval(run: &str) -> Value {
    json!({ "type": "tool_call_approval", "runId": run, "toolCallId": "call-1", "approved": true })
}

/// A `run_finished` body without `principalId`.
pub fn run_finished(run: &str) -> Value {
    json!({ "type": "run_finished", "runId": run, "status": "completed" })
}

/// A body of appendable `kind` (`run_started`, `message_part`, …).
pub fn body_of(kind: &str, run: &str) -> Value {
    match kind {
        "run_started" => run_started(run),
        "message_part" => message_part(run, "hi"),
        "tool_call_approval" => tool_call_approval(run),
        "run_finished" => run_finished(run),
        other => panic!("not an appendable type: {other}"),
    }
}

/// `body` with `principalId` set.
pub fn by(principal: &str, mut body: Value) -> Value {
    body["principalId"] = json!(principal);
    body
}

// --- frame helpers ------------------------------------------------------------------

/// The `seq`s of the `thread.event` frames for `thread`, in order.
pub fn event_seqs(frames: &[Value], thread: &str) -> Vec<u64> {
    frames
        .iter()
        .filter(|f| f["type"] == "thread.event" && f["threadId"] == thread)
        .map(|f| f["event"]["seq"].as_u64().expect("event seq"))
        .collect()
}

/// The frames of type `kind`.
pub fn of_type<'a>(frames: &'a [Value], kind: &str) -> Vec<&'a Value> {
    frames.iter().filter(|f| f["type"] == kind).collect()
}

/// The `thread.subscription_opened` frame.
pub fn opened(thread: &str, through_seq: u64) -> Value {
    json!({ "type": "thread.subscription_opened", "threadId": thread, "throughSeq": through_seq })
}

/// The `thread.subscription_closed` frame.
pub fn closed(thread: &str, reason: &str) -> Value {
    json!({ "type": "thread.subscription_closed", "threadId": thread, "reason": reason })
}

/// Panics unless `frame` is an error with `code`, scoped to `thread` (or
/// unscoped: no `threadId` key at all, when `thread` is `None`).
#[track_caller]
pub fn assert_error(frame: &Value, thread: Option<&str>, code: &str) {
    assert_eq!(frame["type"], "error", "not an error frame: {frame}");
    assert_eq!(frame["code"], code, "wrong code: {frame}");
    assert!(
        frame["message"].is_string(),
        "error without message: {frame}"
    );
    match thread {
        Some(t) => assert_eq!(frame["threadId"], t, "wrong scope: {frame}"),
        None => assert!(
            frame.get("threadId").is_none(),
            "error should be unscoped: {frame}"
        ),
    }
}

/// The forbidden message of SPEC §3.
pub fn forbidden_message(principal: &str, capability: &str, thread: &str) -> String {
    format!("Principal \"{principal}\" lacks \"{capability}\" on thread \"{thread}\".")
}
