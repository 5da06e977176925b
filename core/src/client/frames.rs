//! The frames the client sends and the server frames it understands
//! (the same wire as `threads::ws::codec`, seen from the other end).

use serde_json::{json, Value};

use crate::ids::ThreadId;

/// `{ type: 'thread.subscribe', threadId, fromSeq }`
pub(crate) fn subscribe(thread: &ThreadId, from_seq: u64) -> String {
    json!({ "type": "thread.subscribe", "threadId": thread, "fromSeq": from_seq }).to_string()
}

/// `{ type: 'thread.unsubscribe', threadId }`
pub(crate) fn unsubscribe(thread: &ThreadId) -> String {
    json!({ "type": "thread.unsubscribe", "threadId": thread }).to_string()
}

/// A server frame the client acts on.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum ServerFrame {
    /// `thread.subscription_opened`
    Opened { thread: ThreadId, through_seq: u64 },
    /// `thread.event`
    Event {
        thread: ThreadId,
        seq: u64,
        event: Value,
    },
    /// `thread.subscription_closed`
    Closed { thread: ThreadId, reason: String },
    /// `error`, scoped to a thread or not.
    Error {
        thread: Option<ThreadId>,
        code: String,
        message: String,
    },
}

/// Parses a server frame; `None` for anything this client does not know
/// (a newer server's frame types are ignored, not fatal).
pub(crate) fn parse(text: &str) -> Option<ServerFrame> {
    let mut frame: Value = serde_json::from_str(text).ok()?;
    let thread = frame
        .get("threadId")
        .and_then(Value::as_str)
        .and_then(|raw| ThreadId::parse(raw).ok());
    let text_of = |frame: &Value, key: &str| {
        frame
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    match frame.get("type").and_then(Value::as_str)? {
        "thread.subscription_opened" => Some(ServerFrame::Opened {
            thread: thread?,
            through_seq: frame.get("throughSeq")?.as_u64()?,
        }),
        "thread.event" => {
            let event = frame.get_mut("event")?.take();
            let seq = event.get("seq")?.as_u64()?;
            Some(ServerFrame::Event {
                thread: thread?,
                seq,
                event,
            })
        }
        "thread.subscription_closed" => Some(ServerFrame::Closed {
            thread: thread?,
            reason: text_of(&frame, "reason"),
        }),
        "error" => Some(ServerFrame::Error {
            thread,
            code: text_of(&frame, "code"),
            message: text_of(&frame, "message"),
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seed_frames_parse() {
        let t = ThreadId::parse("thread-1").unwrap();
        assert_eq!(
            parse(
                r#"{ "type": "thread.subscription_opened", "threadId": "thread-1", "throughSeq": 42 }"#
            ),
            Some(ServerFrame::Opened {
                thread: t.clone(),
                through_seq: 42
            })
        );
        assert_eq!(
            parse(
                r#"{ "type": "thread.subscription_closed", "threadId": "thread-1", "reason": "not_found" }"#
            ),
            Some(ServerFrame::Closed {
                thread: t.clone(),
                reason: "not_found".into()
            })
        );
        assert_eq!(
            parse(
                r#"{"type":"error","code":"invalid_request","message":"Frame body must be a JSON object."}"#
            ),
            Some(ServerFrame::Error {
                thread: None,
                code: "invalid_request".into(),
                message: "Frame body must be a JSON object.".into()
            })
        );
        let event = parse(r#"{"type":"thread.event","threadId":"thread-1","event":{"seq":18}}"#);
        assert!(matches!(event, Some(ServerFrame::Event { seq: 18, .. })));
        assert_eq!(
            parse(r#"{"type":"thread.event","threadId":"thread-1","event":{}}"#),
            None
        );
        assert_eq!(parse(r#"{"type":"later.frame"}"#), None);
        assert_eq!(parse("not json"), None);
        assert_eq!(
            subscribe(&t, 7),
            r#"{"type":"thread.subscribe","threadId":"thread-1","fromSeq":7}"#
        );
    }
}
