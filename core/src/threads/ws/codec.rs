//! `/v1/ws` frames: parsing client frames and building server frames
//! (bubble-websocket-protocol.txt).

use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::error::{BubbleError, ErrorCode};
use crate::ids::ThreadId;

/// A valid client frame.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ClientFrame {
    /// `{ type: 'thread.subscribe', threadId, fromSeq? }`
    Subscribe { thread: ThreadId, from_seq: u64 },
    /// `{ type: 'thread.unsubscribe', threadId }`
    Unsubscribe { thread: ThreadId },
    /// `{ type: 'thread.append', threadId, event }`
    Append {
        thread: ThreadId,
        event: Map<String, Value>,
    },
}

/// A refused client frame: the error, scoped to the frame's `threadId`
/// when it named one.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FrameError {
    pub(crate) scope: Option<String>,
    pub(crate) error: BubbleError,
}

fn invalid(scope: Option<&str>, message: impl Into<String>) -> FrameError {
    FrameError {
        scope: scope.map(str::to_owned),
        error: BubbleError::InvalidRequest(message.into()),
    }
}

/// Parses one text frame.
pub(crate) fn parse(text: &str) -> Result<ClientFrame, FrameError> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| invalid(None, format!("Frame is not valid JSON: {e}.")))?;
    let Value::Object(mut frame) = value else {
        return Err(invalid(None, "Frame body must be a JSON object."));
    };
    let kind = match frame.get("type") {
        Some(Value::String(kind)) => kind.clone(),
        Some(_) => return Err(invalid(None, "Frame field \"type\" must be a string.")),
        None => return Err(invalid(None, "Frame field \"type\" is required.")),
    };
    if !matches!(
        kind.as_str(),
        "thread.subscribe" | "thread.unsubscribe" | "thread.append"
    ) {
        return Err(invalid(None, format!("Unknown frame type \"{kind}\".")));
    }
    let thread = match frame.get("threadId") {
        Some(Value::String(raw)) => ThreadId::parse(raw).map_err(|error| FrameError {
            scope: Some(raw.clone()),
            error,
        })?,
        _ => return Err(invalid(None, "Frame field \"threadId\" must be a string.")),
    };
    let scope = Some(thread.as_str());
    match kind.as_str() {
        "thread.subscribe" => {
            let from_seq = match frame.get("fromSeq") {
                None => 1,
                Some(v) => v
                    .as_u64()
                    .filter(|n| *n >= 1)
                    .ok_or_else(|| invalid(scope, "Field \"fromSeq\" must be an integer >= 1."))?,
            };
            Ok(ClientFrame::Subscribe { thread, from_seq })
        }
        "thread.unsubscribe" => Ok(ClientFrame::Unsubscribe { thread }),
        _ => match frame.remove("event") {
            Some(Value::Object(event)) => Ok(ClientFrame::Append { thread, event }),
            _ => Err(invalid(scope, "Frame body must be a JSON object.")),
        },
    }
}

/// `{ type: 'error', threadId?, code, message }`
pub(crate) fn error(scope: Option<&str>, err: &BubbleError) -> Arc<str> {
    let frame = match scope {
        Some(thread) => {
            json!({ "type": "error", "threadId": thread, "code": err.code(), "message": err.to_string() })
        }
        None => json!({ "type": "error", "code": err.code(), "message": err.to_string() }),
    };
    Arc::from(frame.to_string())
}

/// The client frame `{ type: 'thread.subscribe', threadId, fromSeq }`, for
/// a subscription the engine resumes on a client's behalf.
pub(crate) fn subscribe(thread: &ThreadId, from_seq: u64) -> String {
    json!({ "type": "thread.subscribe", "threadId": thread, "fromSeq": from_seq }).to_string()
}

/// `{ type: 'thread.subscription_opened', threadId, throughSeq }`
pub(crate) fn opened(thread: &ThreadId, through_seq: u64) -> Arc<str> {
    let frame = json!({ "type": "thread.subscription_opened", "threadId": thread, "throughSeq": through_seq });
    Arc::from(frame.to_string())
}

/// `{ type: 'thread.subscription_closed', threadId, reason }`
pub(crate) fn closed(thread: &ThreadId, reason: ErrorCode) -> Arc<str> {
    let frame =
        json!({ "type": "thread.subscription_closed", "threadId": thread, "reason": reason });
    Arc::from(frame.to_string())
}

/// `{ type: 'thread.event', threadId, event }`, splicing the persisted
/// event's JSON without re-serializing it.
pub(crate) fn event(thread: &ThreadId, event_json: &str) -> Arc<str> {
    // A thread id is `[A-Za-z0-9._:-]` only: nothing in it needs escaping.
    const HEAD: &str = r#"{"type":"thread.event","threadId":""#;
    const EVENT: &str = r#"","event":"#;
    let thread = thread.as_str();
    let mut frame =
        String::with_capacity(HEAD.len() + thread.len() + EVENT.len() + event_json.len() + 1);
    frame.push_str(HEAD);
    frame.push_str(thread);
    frame.push_str(EVENT);
    frame.push_str(event_json);
    frame.push('}');
    Arc::from(frame)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tid(s: &str) -> ThreadId {
        ThreadId::parse(s).unwrap()
    }

    fn refused(text: &str) -> (Option<String>, ErrorCode, String) {
        let e = parse(text).unwrap_err();
        (e.scope, e.error.code(), e.error.to_string())
    }

    #[test]
    fn seed_client_frames() {
        assert_eq!(
            parse(r#"{ "type": "thread.subscribe", "threadId": "thread-1", "fromSeq": 18 }"#),
            Ok(ClientFrame::Subscribe {
                thread: tid("thread-1"),
                from_seq: 18
            })
        );
        assert_eq!(
            parse(r#"{ "type": "thread.subscribe", "threadId": "thread-1" }"#),
            Ok(ClientFrame::Subscribe {
                thread: tid("thread-1"),
                from_seq: 1
            })
        );
        assert_eq!(
            parse(r#"{ "type": "thread.unsubscribe", "threadId": "thread-1" }"#),
            Ok(ClientFrame::Unsubscribe {
                thread: tid("thread-1")
            })
        );
        let append = r#"{ "type": "thread.append", "threadId": "thread-1",
            "event": { "type": "message_part", "principalId": "bot-research",
                       "runId": "run-001", "part": { "type": "text-delta" },
                       "version": "ai-sdk-v6" } }"#;
        assert!(
            matches!(parse(append), Ok(ClientFrame::Append { event, .. }) if event["runId"] == "run-001")
        );
    }

    #[test]
    fn refusals_and_their_scope() {
        let not_object = refused("[1,2]");
        assert_eq!(
            not_object,
            (
                None,
                ErrorCode::InvalidRequest,
                "Frame body must be a JSON object.".into()
            )
        );
        assert_eq!(refused("{nope").0, None);
        assert_eq!(refused(r#"{"type":"thread.nope","threadId":"t"}"#).0, None);
        assert_eq!(refused(r#"{"threadId":"t"}"#).0, None);
        let (scope, code, _) =
            refused(r#"{"type":"thread.append","threadId":"thread-1","event":[]}"#);
        assert_eq!(
            (scope.as_deref(), code),
            (Some("thread-1"), ErrorCode::InvalidRequest)
        );
        for bad in ["0", "-1", "1.5", "\"1\"", "null"] {
            let text =
                format!(r#"{{"type":"thread.subscribe","threadId":"thread-1","fromSeq":{bad}}}"#);
            let (scope, code, _) = refused(&text);
            assert_eq!(
                (scope.as_deref(), code),
                (Some("thread-1"), ErrorCode::InvalidRequest),
                "{bad}"
            );
        }
    }

    #[test]
    fn seed_server_frames() {
        let t = tid("thread-1");
        assert_eq!(
            &*opened(&t, 42),
            r#"{"type":"thread.subscription_opened","threadId":"thread-1","throughSeq":42}"#
        );
        assert_eq!(
            &*closed(&t, ErrorCode::NotFound),
            r#"{"type":"thread.subscription_closed","threadId":"thread-1","reason":"not_found"}"#
        );
        assert_eq!(
            &*error(Some("thread-1"), &BubbleError::AlreadySubscribed(t.clone())),
            r#"{"type":"error","threadId":"thread-1","code":"conflict","message":"Connection is already subscribed to thread \"thread-1\"."}"#
        );
        assert_eq!(
            &*error(
                None,
                &BubbleError::InvalidRequest("Frame body must be a JSON object.".into())
            ),
            r#"{"type":"error","code":"invalid_request","message":"Frame body must be a JSON object."}"#
        );
        let frame = event(&t, r#"{"seq":18,"threadId":"thread-1"}"#);
        let parsed: Value = serde_json::from_str(&frame).unwrap();
        assert_eq!(parsed["type"], "thread.event");
        assert_eq!(parsed["event"]["seq"], 18);
    }
}
