//! The store's rules as pure functions over a thread's state: thread
//! creation, titles, seq assignment, idempotency keys and event validation.
//! Every backend's writes are the result of these decisions.

use std::fmt::Write as _;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::error::BubbleError;
use crate::ids::{PrincipalId, ThreadId};
use crate::json::{json_len, push_json_str};
use crate::model::{AppendableType, EventBody};

/// Longest accepted title, in characters.
pub(crate) const MAX_TITLE_CHARS: usize = 1024;

/// The event types only the server emits.
const SERVER_EMITTED: [&str; 3] = [
    "participant_joined",
    "participant_left",
    "thread_title_updated",
];

/// What `createThread` does for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CreateDecision {
    /// The thread exists with the requested parent: return it unchanged.
    Existing,
    /// Create the thread.
    New,
}

/// `createThread(thread_id, { parentThreadId: requested })` where the
/// thread currently has parent `existing` (`None`: no such thread; `Some(None)`:
/// a top-level thread) and `parent_exists` tells whether the requested parent
/// exists. Rejects the four cases of bubble-threads.txt.
pub(crate) fn decide_create(
    thread_id: &ThreadId,
    requested: Option<&ThreadId>,
    existing: Option<Option<&ThreadId>>,
    parent_exists: bool,
) -> Result<CreateDecision, BubbleError> {
    if requested == Some(thread_id) {
        return Err(BubbleError::InvalidRequest(format!(
            "Thread \"{thread_id}\" cannot be its own parent."
        )));
    }
    match (existing, requested) {
        (Some(current), _) if current == requested => Ok(CreateDecision::Existing),
        (Some(None), Some(_)) => Err(BubbleError::Conflict(format!(
            "Thread \"{thread_id}\" already exists as a top-level thread."
        ))),
        (Some(Some(parent)), _) => Err(BubbleError::Conflict(format!(
            "Thread \"{thread_id}\" already exists under parent \"{parent}\"."
        ))),
        (Some(None), None) => Ok(CreateDecision::Existing),
        (None, Some(parent)) if !parent_exists => Err(BubbleError::ThreadNotFound(parent.clone())),
        (None, _) => Ok(CreateDecision::New),
    }
}

/// Validates a title's length.
pub(crate) fn validate_title(title: &str) -> Result<(), BubbleError> {
    if title.chars().count() > MAX_TITLE_CHARS {
        return Err(BubbleError::InvalidRequest(format!(
            "Field \"title\" must be at most {MAX_TITLE_CHARS} characters."
        )));
    }
    // No store can be required to keep U+0000 in text (PostgreSQL cannot).
    if title.contains('\0') {
        return Err(BubbleError::InvalidRequest(
            "Field \"title\" must not contain U+0000.".into(),
        ));
    }
    Ok(())
}

/// `updateThread`: the new title when `requested` changes `current`
/// (`requested` is `None` when the key was omitted, `Some(None)` to clear).
pub(crate) fn title_change(
    current: Option<&str>,
    requested: Option<Option<&str>>,
) -> Option<Option<String>> {
    let wanted = requested?;
    (wanted != current).then(|| wanted.map(str::to_owned))
}

/// The seq the next append gets: gapless from 1.
pub(crate) fn next_seq(head_seq: u64) -> u64 {
    head_seq + 1
}

/// An idempotency key is 1–128 printable ASCII characters.
fn validate_idempotency_key(key: &str) -> Result<(), BubbleError> {
    let ok = (1..=128).contains(&key.len()) && key.bytes().all(|b| (0x20..=0x7e).contains(&b));
    if ok {
        Ok(())
    } else {
        Err(BubbleError::InvalidRequest(
            "Idempotency key must be 1-128 printable ASCII characters.".into(),
        ))
    }
}

/// An append's idempotency key: the event's `idempotencyKey` field
/// (already known to be a string) or the `Idempotency-Key` header, which
/// must agree when both are given; validated.
pub(crate) fn idempotency_key(
    field: Option<String>,
    header: Option<&str>,
) -> Result<Option<String>, BubbleError> {
    let key = match (field, header) {
        (Some(f), Some(h)) if f != h => {
            return Err(BubbleError::InvalidRequest(
                "The Idempotency-Key header and the event's idempotencyKey differ.".into(),
            ))
        }
        (Some(f), _) => Some(f),
        (None, h) => h.map(str::to_owned),
    };
    if let Some(key) = &key {
        validate_idempotency_key(key)?;
    }
    Ok(key)
}

/// An append's idempotency key, taken out of the event object (it is not
/// stored with the event): its `idempotencyKey` field, which must be a
/// string, merged with the header by [`idempotency_key`].
pub(crate) fn take_idempotency_key(
    event: &mut Map<String, Value>,
    header: Option<&str>,
) -> Result<Option<String>, BubbleError> {
    let field = match event.remove("idempotencyKey") {
        None => None,
        Some(Value::String(f)) => Some(f),
        Some(_) => {
            return Err(BubbleError::InvalidRequest(
                "Event field \"idempotencyKey\" must be a string.".into(),
            ))
        }
    };
    idempotency_key(field, header)
}

/// The appendable type of an event object; server-emitted and unknown types
/// are `invalid_request`.
pub(crate) fn appendable_type(event: &Map<String, Value>) -> Result<AppendableType, BubbleError> {
    let Some(Value::String(name)) = event.get("type") else {
        return Err(BubbleError::InvalidRequest(
            "Event field \"type\" must be a string.".into(),
        ));
    };
    if SERVER_EMITTED.contains(&name.as_str()) {
        return Err(BubbleError::InvalidRequest(format!(
            "Event type \"{name}\" is emitted by the server and cannot be appended."
        )));
    }
    AppendableType::ALL
        .into_iter()
        .find(|t| t.as_str() == name)
        .ok_or_else(|| BubbleError::InvalidRequest(format!("Unknown event type \"{name}\".")))
}

/// The fields an event of type `ty` may carry.
pub(crate) fn allowed_fields(ty: AppendableType) -> &'static [&'static str] {
    match ty {
        AppendableType::RunStarted => &["type", "principalId", "runId"],
        AppendableType::MessagePart => &["type", "principalId", "runId", "part", "version"],
        AppendableType::ToolCallApproval => &[
            "type",
            "principalId",
            "runId",
            "toolCallId",
            "approved",
            "reason",
        ],
        AppendableType::RunFinished => &["type", "principalId", "runId", "status"],
    }
}

/// Validates an appended event of type `ty` by `caller` and returns its
/// body. The size limit counts the event's compact JSON as received;
/// `principalId` must be the caller (filled in when omitted).
pub(crate) fn event_body(
    ty: AppendableType,
    mut event: Map<String, Value>,
    caller: &PrincipalId,
    max_bytes: usize,
) -> Result<EventBody, BubbleError> {
    let size = json_len(&event);
    if size > max_bytes {
        return Err(BubbleError::PayloadTooLarge(format!(
            "Event is {size} bytes of JSON; the limit is {max_bytes}."
        )));
    }
    if let Some(field) = event
        .keys()
        .find(|k| !allowed_fields(ty).contains(&k.as_str()))
    {
        return Err(BubbleError::InvalidRequest(format!(
            "Unknown field \"{field}\" on a \"{}\" event.",
            ty.as_str()
        )));
    }
    match event.get("principalId") {
        None => {
            event.insert(
                "principalId".into(),
                Value::String(caller.as_str().to_owned()),
            );
        }
        Some(Value::String(p)) if p == caller.as_str() => {}
        Some(Value::String(p)) => {
            return Err(BubbleError::PrincipalMismatch(format!(
                "Event principalId \"{p}\" does not match the caller \"{caller}\"."
            )))
        }
        Some(_) => {
            return Err(BubbleError::InvalidRequest(
                "Event field \"principalId\" must be a string.".into(),
            ))
        }
    }
    let body: EventBody = serde_json::from_value(Value::Object(event)).map_err(|e| {
        BubbleError::InvalidRequest(format!("Invalid \"{}\" event: {e}.", ty.as_str()))
    })?;
    check_body(&body)?;
    Ok(body)
}

/// The checks of an event's body beyond its fields' types: a run id is
/// not empty, a part is an object with a string `type`, the version is
/// `ai-sdk-v6`.
pub(crate) fn check_body(body: &EventBody) -> Result<(), BubbleError> {
    let invalid = |msg: &str| Err(BubbleError::InvalidRequest(msg.into()));
    match body {
        EventBody::RunStarted { run_id, .. }
        | EventBody::ToolCallApproval { run_id, .. }
        | EventBody::RunFinished { run_id, .. }
            if run_id.is_empty() =>
        {
            invalid("Event field \"runId\" must not be empty.")
        }
        EventBody::MessagePart {
            run_id,
            part,
            version,
            ..
        } => {
            if run_id.is_empty() {
                return invalid("Event field \"runId\" must not be empty.");
            }
            if !matches!(part.get("type"), Some(Value::String(_))) || !part.is_object() {
                return invalid(
                    "Event field \"part\" must be a JSON object with a string \"type\".",
                );
            }
            if version != "ai-sdk-v6" {
                return invalid("Event field \"version\" must be \"ai-sdk-v6\".");
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// The persisted event's JSON: `{"seq","threadId","createdAt","type",…}`,
/// serialized once and shared by the store, history pages and every frame.
/// The head is written straight into the buffer the body is serialized
/// into, whose opening brace becomes the comma after the head.
pub(crate) fn persisted_json(
    seq: u64,
    thread: &ThreadId,
    created_at: &str,
    body: &EventBody,
) -> Arc<str> {
    // `to_string` writes valid UTF-8 straight into a `String`; a body that
    // cannot be written has no fields to add.
    let fields = serde_json::to_string(body).unwrap_or_default();
    let mut json =
        String::with_capacity(48 + thread.as_str().len() + created_at.len() + fields.len());
    // Writing into a `String` cannot fail.
    let _ = write!(json, "{{\"seq\":{seq},\"threadId\":");
    push_json_str(&mut json, thread.as_str());
    json.push_str(",\"createdAt\":");
    push_json_str(&mut json, created_at);
    match fields.strip_prefix('{') {
        Some(rest) if rest.len() > 1 => {
            json.push(',');
            json.push_str(rest);
        }
        _ => json.push('}'),
    }
    Arc::from(json)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;
    use serde_json::json;

    fn tid(s: &str) -> ThreadId {
        ThreadId::parse(s).unwrap()
    }

    #[test]
    fn create_rules_of_the_seed() {
        let (t, root, other) = (tid("thread-42"), tid("thread-root"), tid("other"));
        let code = |r: Result<CreateDecision, BubbleError>| r.map_err(|e| e.code());
        assert_eq!(
            code(decide_create(&t, None, None, false)),
            Ok(CreateDecision::New)
        );
        assert_eq!(
            code(decide_create(&t, None, Some(None), false)),
            Ok(CreateDecision::Existing)
        );
        assert_eq!(
            code(decide_create(&t, Some(&root), Some(Some(&root)), true)),
            Ok(CreateDecision::Existing)
        );
        // Turning a top-level thread into a subthread.
        assert_eq!(
            code(decide_create(&t, Some(&root), Some(None), true)),
            Err(ErrorCode::Conflict)
        );
        // A subthread re-created as top-level, or moved to another parent.
        assert_eq!(
            code(decide_create(&t, None, Some(Some(&root)), true)),
            Err(ErrorCode::Conflict)
        );
        assert_eq!(
            code(decide_create(&t, Some(&other), Some(Some(&root)), true)),
            Err(ErrorCode::Conflict)
        );
        // A parent that does not exist, and a parent that is itself.
        assert_eq!(
            code(decide_create(&t, Some(&root), None, false)),
            Err(ErrorCode::NotFound)
        );
        assert_eq!(
            code(decide_create(&t, Some(&t), None, false)),
            Err(ErrorCode::InvalidRequest)
        );
    }

    #[test]
    fn title_changes_only_when_different() {
        assert_eq!(title_change(None, None), None);
        assert_eq!(title_change(None, Some(None)), None);
        assert_eq!(
            title_change(None, Some(Some("Q3"))),
            Some(Some("Q3".into()))
        );
        assert_eq!(title_change(Some("Q3"), Some(Some("Q3"))), None);
        assert_eq!(title_change(Some("Q3"), Some(None)), Some(None));
        assert!(validate_title(&"x".repeat(MAX_TITLE_CHARS)).is_ok());
        assert!(validate_title(&"x".repeat(MAX_TITLE_CHARS + 1)).is_err());
        assert!(validate_title("a\0b").is_err());
    }

    #[test]
    fn idempotency_keys() {
        assert!(validate_idempotency_key("k").is_ok());
        assert!(validate_idempotency_key(&"k".repeat(128)).is_ok());
        assert!(validate_idempotency_key(" ~").is_ok());
        assert!(validate_idempotency_key("").is_err());
        assert!(validate_idempotency_key(&"k".repeat(129)).is_err());
        assert!(validate_idempotency_key("tab\there").is_err());
        assert!(validate_idempotency_key("é").is_err());
        assert_eq!(next_seq(0), 1);
    }

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn event_types() {
        let ty = |v: Value| appendable_type(&obj(v)).map_err(|e| e.code());
        assert_eq!(
            ty(json!({"type": "message_part"})),
            Ok(AppendableType::MessagePart)
        );
        assert_eq!(
            ty(json!({"type": "participant_joined"})),
            Err(ErrorCode::InvalidRequest)
        );
        assert_eq!(ty(json!({"type": "nope"})), Err(ErrorCode::InvalidRequest));
        assert_eq!(ty(json!({"type": 1})), Err(ErrorCode::InvalidRequest));
        assert_eq!(ty(json!({})), Err(ErrorCode::InvalidRequest));
    }

    #[test]
    fn event_bodies() {
        let alice = PrincipalId::new("alice");
        let body = |v: Value| {
            let map = obj(v);
            let ty = appendable_type(&map).unwrap();
            event_body(ty, map, &alice, 200).map_err(|e| e.code())
        };
        let part = json!({"type": "message_part", "runId": "run-001",
            "part": {"type": "text-delta", "delta": "hi"}, "version": "ai-sdk-v6"});
        assert!(
            matches!(body(part), Ok(EventBody::MessagePart { principal_id, .. }) if principal_id == alice)
        );
        let bob = json!({"type": "run_started", "principalId": "bob", "runId": "r"});
        assert_eq!(body(bob), Err(ErrorCode::Forbidden));
        let bad_part =
            json!({"type": "message_part", "runId": "r", "part": "x", "version": "ai-sdk-v6"});
        assert_eq!(body(bad_part), Err(ErrorCode::InvalidRequest));
        let bad_version =
            json!({"type": "message_part", "runId": "r", "part": {"type": "t"}, "version": "v5"});
        assert_eq!(body(bad_version), Err(ErrorCode::InvalidRequest));
        let bad_status = json!({"type": "run_finished", "runId": "r", "status": "done"});
        assert_eq!(body(bad_status), Err(ErrorCode::InvalidRequest));
        let extra = json!({"type": "run_started", "runId": "r", "seq": 3});
        assert_eq!(body(extra), Err(ErrorCode::InvalidRequest));
        let big = json!({"type": "run_started", "runId": "r".repeat(200)});
        assert_eq!(body(big), Err(ErrorCode::PayloadTooLarge));
        let approval = json!({"type": "tool_call_approval", "runId": "r", "toolCallId": "c", "approved": false});
        assert!(body(approval).is_ok());
    }

    #[test]
    fn persisted_json_splices_the_body() {
        let body = EventBody::ThreadTitleUpdated {
            by_principal_id: PrincipalId::new("bob"),
            title: Some("Q3 planning".into()),
        };
        let json = persisted_json(3, &tid("thread-42"), "2026-11-30T09:44:10.123Z", &body);
        assert_eq!(
            &*json,
            r#"{"seq":3,"threadId":"thread-42","createdAt":"2026-11-30T09:44:10.123Z","type":"thread_title_updated","byPrincipalId":"bob","title":"Q3 planning"}"#
        );
    }
}
