//! The direct parse of an appended event's JSON (the body of
//! `POST /v1/threads/:threadId/events`) into its typed body, without the
//! JSON tree the general path builds, checks and converts.
//!
//! It accepts only what the general path ([`rules::event_body`] over the
//! parsed object) accepts, with the same result: anything else (a missing
//! or unknown field, a `null`, a duplicate key, a principal that is not the
//! caller's, an event over the size limit…) gives `None`, and the caller
//! runs the general path, which gives the exact error. So every refusal
//! keeps its wire message, and the common append costs one parse.

use serde::{Deserialize, Deserializer};
use serde_json::Value;

use crate::ids::PrincipalId;
use crate::json::json_len;
use crate::model::{AppendableType, EventBody, RunStatus};
use crate::threads::rules;

/// An appended event, validated: what the append does once authorized.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct CheckedEvent {
    /// The event's type (its `events.<type>` capability).
    pub(super) ty: AppendableType,
    /// The idempotency key: the event's `idempotencyKey` or the header.
    pub(super) key: Option<String>,
    /// The body, with the caller as its principal.
    pub(super) body: EventBody,
}

/// Every field an appendable event may carry; each one present only when
/// its value is not `null` (a `null` fails the parse).
#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct Fields {
    #[serde(rename = "type")]
    ty: AppendableType,
    #[serde(default, deserialize_with = "present")]
    principal_id: Option<String>,
    #[serde(default, deserialize_with = "present")]
    run_id: Option<String>,
    #[serde(default, deserialize_with = "present")]
    part: Option<Value>,
    #[serde(default, deserialize_with = "present")]
    version: Option<String>,
    #[serde(default, deserialize_with = "present")]
    tool_call_id: Option<String>,
    #[serde(default, deserialize_with = "present")]
    approved: Option<bool>,
    #[serde(default, deserialize_with = "present")]
    reason: Option<String>,
    #[serde(default, deserialize_with = "present")]
    status: Option<RunStatus>,
    #[serde(default, deserialize_with = "present")]
    idempotency_key: Option<String>,
}

/// A field that is there: its value, which must not be `null` unless `T`
/// takes it.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

impl Fields {
    /// The names of the type-specific fields that are there.
    fn named(&self) -> [Option<&'static str>; 6] {
        [
            self.part.as_ref().map(|_| "part"),
            self.version.as_ref().map(|_| "version"),
            self.tool_call_id.as_ref().map(|_| "toolCallId"),
            self.approved.as_ref().map(|_| "approved"),
            self.reason.as_ref().map(|_| "reason"),
            self.status.as_ref().map(|_| "status"),
        ]
    }

    /// The body of this event's type, when it has every field that type
    /// requires and no other.
    fn body(self, principal_id: PrincipalId) -> Option<EventBody> {
        let allowed = rules::allowed_fields(self.ty);
        if !self
            .named()
            .into_iter()
            .flatten()
            .all(|f| allowed.contains(&f))
        {
            return None;
        }
        let run_id = self.run_id?;
        Some(match self.ty {
            AppendableType::RunStarted => EventBody::RunStarted {
                principal_id,
                run_id,
            },
            AppendableType::MessagePart => EventBody::MessagePart {
                principal_id,
                run_id,
                part: self.part?,
                version: self.version?,
            },
            AppendableType::ToolCallApproval => EventBody::ToolCallApproval {
                principal_id,
                run_id,
                tool_call_id: self.tool_call_id?,
                approved: self.approved?,
                reason: self.reason,
            },
            AppendableType::RunFinished => EventBody::RunFinished {
                principal_id,
                run_id,
                status: self.status?,
            },
        })
    }
}

/// `json` as an event appended by `caller` with the `Idempotency-Key`
/// header `header_key`, when the general path would accept it; `None`
/// otherwise (see the module's comment).
pub(super) fn checked_event(
    json: &[u8],
    caller: &PrincipalId,
    header_key: Option<&str>,
    max_bytes: usize,
) -> Option<CheckedEvent> {
    let mut fields: Fields = serde_json::from_slice(json).ok()?;
    let ty = fields.ty;
    let key = rules::idempotency_key(fields.idempotency_key.take(), header_key).ok()?;
    let named = match &fields.principal_id {
        Some(p) if p != caller.as_str() => return None,
        Some(_) => true,
        None => false,
    };
    let body = fields.body(caller.clone())?;
    rules::check_body(&body).ok()?;
    // The limit counts the event as received, without its idempotency
    // key: the body's JSON holds the same fields, plus the principal
    // when the event left it out (a field and its comma; `type` is
    // always there before it).
    let mut size = json_len(&body);
    if !named {
        size -= json_len(&"principalId") + 1 + json_len(caller) + 1;
    }
    (size <= max_bytes).then_some(CheckedEvent { ty, key, body })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::BubbleError;
    use proptest::prelude::*;
    use serde_json::Map;

    const ALICE: &str = "alice";

    /// The general path's outcome for `json`: the parsed object, the key
    /// merged with the header as the append does, then the body.
    fn general(
        json: &str,
        header_key: Option<&str>,
        max: usize,
    ) -> Result<CheckedEvent, BubbleError> {
        let mut event: Map<String, Value> = match serde_json::from_str(json) {
            Ok(Value::Object(map)) => map,
            _ => return Err(BubbleError::InvalidRequest("not an object".into())),
        };
        let ty = rules::appendable_type(&event)?;
        let key = rules::take_idempotency_key(&mut event, header_key)?;
        let body = rules::event_body(ty, event, &PrincipalId::new(ALICE), max)?;
        Ok(CheckedEvent { ty, key, body })
    }

    /// The direct parse of `json` appended by alice.
    fn direct(json: &str, header_key: Option<&str>, max: usize) -> Option<CheckedEvent> {
        checked_event(json.as_bytes(), &PrincipalId::new(ALICE), header_key, max)
    }

    /// Whether the direct parse agrees with the general path on `json`:
    /// the same event, or `None` where the general path refuses.
    fn agrees(json: &str, header_key: Option<&str>, max: usize) -> bool {
        match (
            direct(json, header_key, max),
            general(json, header_key, max),
        ) {
            (Some(d), Ok(g)) => d == g,
            (None, _) => true,
            (Some(_), Err(_)) => false,
        }
    }

    const PART: &str = r#"{"type":"message_part","runId":"r1","part":{"type":"text-delta","id":"t","delta":"hé \"q\" \u00e9"},"version":"ai-sdk-v6"}"#;

    #[test]
    fn the_common_events_take_the_direct_parse() {
        let accepted = [
            PART,
            r#"{"type":"run_started","runId":"r1"}"#,
            r#"{"type":"run_started","principalId":"alice","runId":"r1"}"#,
            r#"{"runId":"r1","type":"run_finished","status":"aborted"}"#,
            r#"{"type":"tool_call_approval","runId":"r1","toolCallId":"c","approved":true}"#,
            r#"{"type":"tool_call_approval","runId":"r1","toolCallId":"c","approved":false,"reason":"no"}"#,
            r#" { "type" : "run_started" , "runId" : "r1" , "idempotencyKey" : "k-1" } "#,
        ];
        for json in accepted {
            assert!(direct(json, None, 4096).is_some(), "{json}");
            assert!(agrees(json, None, 4096), "{json}");
        }
    }

    #[test]
    fn what_the_general_path_refuses_or_reads_otherwise_falls_back() {
        let cases = [
            "",
            "[1]",
            "{}",
            r#"{"type":"run_started"}"#,
            r#"{"type":"run_started","runId":""}"#,
            r#"{"type":"run_started","runId":null}"#,
            r#"{"type":"run_started","runId":"r1","part":{"type":"x"}}"#,
            r#"{"type":"run_started","runId":"r1","extra":1}"#,
            r#"{"type":"run_started","runId":"r1","runId":"r2"}"#,
            r#"{"type":"run_started","runId":"r1","principalId":"bob"}"#,
            r#"{"type":"run_started","runId":"r1","principalId":null}"#,
            r#"{"type":"participant_joined","runId":"r1"}"#,
            r#"{"type":"no_such_type","runId":"r1"}"#,
            r#"{"type":"message_part","runId":"r1","part":{"x":1},"version":"ai-sdk-v6"}"#,
            r#"{"type":"message_part","runId":"r1","part":{"type":"t"},"version":"v5"}"#,
            r#"{"type":"tool_call_approval","runId":"r1","toolCallId":"c","approved":true,"reason":null}"#,
            r#"{"type":"run_finished","runId":"r1","status":"paused"}"#,
            r#"{"type":"run_started","runId":"r1","idempotencyKey":""}"#,
            r#"{"type":"run_started","runId":"r1","idempotencyKey":7}"#,
            r#"{"type":"run_started","runId":"r1"} trailing"#,
        ];
        for json in cases {
            assert!(direct(json, None, 4096).is_none(), "{json}");
            assert!(agrees(json, None, 4096), "{json}");
        }
    }

    #[test]
    fn the_key_is_the_header_or_the_same_field() {
        let keyed = r#"{"type":"run_started","runId":"r1","idempotencyKey":"k"}"#;
        let plain = r#"{"type":"run_started","runId":"r1"}"#;
        for (json, header) in [(keyed, None), (keyed, Some("k")), (plain, Some("k"))] {
            let event = direct(json, header, 4096);
            assert_eq!(event.and_then(|e| e.key).as_deref(), Some("k"));
            assert!(agrees(json, header, 4096));
        }
        assert!(direct(keyed, Some("j"), 4096).is_none());
    }

    #[test]
    fn the_size_limit_counts_the_event_as_received() {
        // The limit sits exactly at each event's size, then one byte under
        // it: the two parses take and refuse the same events.
        for json in [
            PART,
            r#"{"type":"run_started","principalId":"alice","runId":"r1"}"#,
            r#"{"type":"run_started","runId":"r1","idempotencyKey":"a-key"}"#,
        ] {
            let size = received_size(json).expect("an object");
            assert!(direct(json, None, size).is_some(), "{json}");
            assert!(direct(json, None, size - 1).is_none(), "{json}");
            assert!(general(json, None, size).is_ok());
            assert!(general(json, None, size - 1).is_err());
        }
    }

    /// A value of any shape an event's field might be sent with.
    fn any_value() -> impl Strategy<Value = &'static str> {
        prop_oneof![
            Just(r#""participant_left""#),
            Just(r#""""#),
            Just(r#""r\u00e9 \"q\"""#),
            Just("null"),
            Just("true"),
            Just("1.50"),
            Just(r#"{"delta":"x"}"#),
            Just(r#"["a"]"#),
        ]
    }

    /// Values `name` takes, and some it does not.
    fn value_of(name: &'static str) -> BoxedStrategy<&'static str> {
        let values: &[&'static str] = match name {
            "type" => &[
                r#""run_started""#,
                r#""message_part""#,
                r#""tool_call_approval""#,
                r#""run_finished""#,
            ],
            "principalId" => &[r#""alice""#, r#""bob""#],
            "runId" | "toolCallId" | "reason" => &[r#""r1""#, r#""a \u00e9""#],
            "part" => &[r#"{"type":"text-delta","delta":"x"}"#, r#"{"type":1}"#],
            "version" => &[r#""ai-sdk-v6""#, r#""v5""#],
            "approved" => &["true", "false"],
            "status" => &[r#""completed""#, r#""aborted""#, r#""paused""#],
            "idempotencyKey" => &[r#""k""#, r#""j""#],
            _ => &["1"],
        };
        prop_oneof![3 => proptest::sample::select(values), 1 => any_value()].boxed()
    }

    /// A field of an event as JSON text.
    fn field() -> impl Strategy<Value = String> {
        proptest::sample::select(vec![
            "type",
            "principalId",
            "runId",
            "part",
            "version",
            "toolCallId",
            "approved",
            "reason",
            "status",
            "idempotencyKey",
            "extra",
        ])
        .prop_flat_map(|name| value_of(name).prop_map(move |v| format!("\"{name}\" : {v}")))
    }

    /// The size the limit counts for `json`, when it is an object.
    fn received_size(json: &str) -> Option<usize> {
        let mut map: Map<String, Value> = serde_json::from_str(json).ok()?;
        map.remove("idempotencyKey");
        Some(json_len(&map))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2048))]
        #[test]
        fn the_direct_parse_agrees_with_the_general_path(
            base in prop_oneof![
                Just(""),
                Just(r#""type":"run_started","runId":"r1""#),
                Just(r#""type":"run_finished","runId":"r1","status":"failed""#),
                Just(r#""type":"tool_call_approval","runId":"r1","toolCallId":"c","approved":true"#),
                Just(r#""type":"message_part","runId":"r","part":{"type":"t"},"version":"ai-sdk-v6""#),
            ],
            fields in proptest::collection::vec(field(), 0..4),
            header in prop_oneof![Just(None), Just(Some("k")), Just(Some("j"))],
        ) {
            let fields = std::iter::once(base.to_string()).filter(|b| !b.is_empty()).chain(fields);
            let json = format!("{{{}}}", fields.collect::<Vec<_>>().join(","));
            // At the limit, one byte either side of it, and far above it.
            let size = received_size(&json).unwrap_or(100);
            for max in [size - 1, size, size + 1, 4096] {
                prop_assert!(agrees(&json, header, max), "{} at {}", json, max);
            }
        }
    }
}
