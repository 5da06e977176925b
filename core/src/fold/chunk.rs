//! The AI SDK v6 `uiMessageChunkSchema`, field by field: a chunk of a known
//! type must carry its required fields with their types (extra fields are
//! allowed, as the SDK's loose objects allow them). A chunk of a type the
//! SDK does not know passes, and the fold ignores it.

use serde_json::{Map, Value};

/// What a field must hold.
#[derive(Clone, Copy)]
enum Kind {
    Str,
    Bool,
    /// `Record<string, Record<string, JSONValue>>`.
    ProviderMetadata,
    /// `Record<string, JSONValue>`.
    Object,
    /// One of the SDK's finish reasons.
    FinishReason,
    /// `"json"` or `"text"`.
    InputEncoding,
}

/// `(field, kind, required)`; a field typed `unknown` in the SDK needs no row.
type Rule = (&'static str, Kind, bool);

const PROVIDER: Rule = ("providerMetadata", Kind::ProviderMetadata, false);
const TOOL_META: Rule = ("toolMetadata", Kind::Object, false);
const EXECUTED: Rule = ("providerExecuted", Kind::Bool, false);
const DYNAMIC: Rule = ("dynamic", Kind::Bool, false);
const CALL: Rule = ("toolCallId", Kind::Str, true);
const ID: Rule = ("id", Kind::Str, true);

const FINISH_REASONS: [&str; 6] = [
    "stop",
    "length",
    "content-filter",
    "tool-calls",
    "error",
    "other",
];

fn rules(ty: &str) -> Option<&'static [Rule]> {
    let rules: &'static [Rule] = match ty {
        "text-start" | "text-end" | "reasoning-start" | "reasoning-end" => &[ID, PROVIDER],
        "text-delta" | "reasoning-delta" => &[ID, ("delta", Kind::Str, true), PROVIDER],
        "error" => &[("errorText", Kind::Str, true)],
        "tool-input-start" => &[
            CALL,
            ("toolName", Kind::Str, true),
            ("inputEncoding", Kind::InputEncoding, false),
            EXECUTED,
            PROVIDER,
            TOOL_META,
            DYNAMIC,
            ("title", Kind::Str, false),
        ],
        "tool-input-delta" => &[CALL, ("inputTextDelta", Kind::Str, true)],
        "tool-input-available" => &[
            CALL,
            ("toolName", Kind::Str, true),
            EXECUTED,
            PROVIDER,
            TOOL_META,
            DYNAMIC,
            ("title", Kind::Str, false),
        ],
        "tool-input-error" => &[
            CALL,
            ("toolName", Kind::Str, true),
            EXECUTED,
            PROVIDER,
            TOOL_META,
            DYNAMIC,
            ("errorText", Kind::Str, true),
            ("title", Kind::Str, false),
        ],
        "tool-approval-request" => &[
            ("approvalId", Kind::Str, true),
            CALL,
            ("signature", Kind::Str, false),
        ],
        "tool-output-available" => &[
            CALL,
            EXECUTED,
            PROVIDER,
            TOOL_META,
            DYNAMIC,
            ("preliminary", Kind::Bool, false),
        ],
        "tool-output-error" => &[
            CALL,
            ("errorText", Kind::Str, true),
            EXECUTED,
            PROVIDER,
            TOOL_META,
            DYNAMIC,
        ],
        "tool-output-denied" => &[CALL],
        "source-url" => &[
            ("sourceId", Kind::Str, true),
            ("url", Kind::Str, true),
            ("title", Kind::Str, false),
            PROVIDER,
        ],
        "source-document" => &[
            ("sourceId", Kind::Str, true),
            ("mediaType", Kind::Str, true),
            ("title", Kind::Str, true),
            ("filename", Kind::Str, false),
            PROVIDER,
        ],
        "file" => &[
            ("url", Kind::Str, true),
            ("mediaType", Kind::Str, true),
            PROVIDER,
        ],
        "start-step" | "finish-step" | "message-metadata" => &[],
        "start" => &[("messageId", Kind::Str, false)],
        "finish" => &[("finishReason", Kind::FinishReason, false)],
        "abort" => &[("reason", Kind::Str, false)],
        data if data.starts_with("data-") => {
            &[("id", Kind::Str, false), ("transient", Kind::Bool, false)]
        }
        _ => return None,
    };
    Some(rules)
}

fn holds(kind: Kind, value: &Value) -> bool {
    match kind {
        Kind::Str => value.is_string(),
        Kind::Bool => value.is_boolean(),
        Kind::Object => value.is_object(),
        Kind::ProviderMetadata => value
            .as_object()
            .is_some_and(|m| m.values().all(Value::is_object)),
        Kind::FinishReason => value.as_str().is_some_and(|r| FINISH_REASONS.contains(&r)),
        Kind::InputEncoding => matches!(value.as_str(), Some("json" | "text")),
    }
}

/// Whether `chunk` (whose `type` is a string) fits the SDK's schema; a
/// type the SDK does not know fits.
pub(crate) fn valid(ty: &str, chunk: &Map<String, Value>) -> bool {
    let Some(rules) = rules(ty) else {
        return true;
    };
    rules
        .iter()
        .all(|(field, kind, required)| match chunk.get(*field) {
            Some(value) => holds(*kind, value),
            None => !required,
        })
}

/// Whether the SDK handles chunks of this type (others are ignored).
pub(crate) fn known(ty: &str) -> bool {
    rules(ty).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ok(v: Value) -> bool {
        let map = v.as_object().unwrap().clone();
        let ty = map["type"].as_str().unwrap().to_owned();
        valid(&ty, &map)
    }

    #[test]
    fn required_and_typed_fields() {
        assert!(ok(json!({"type": "text-delta", "id": "t", "delta": "x"})));
        assert!(!ok(json!({"type": "text-delta", "id": "t"})));
        assert!(!ok(json!({"type": "text-delta", "id": "t", "delta": 5})));
        assert!(!ok(
            json!({"type": "text-start", "id": "t", "providerMetadata": {"p": 1}})
        ));
        assert!(ok(
            json!({"type": "text-start", "id": "t", "providerMetadata": {"p": {"k": 1}}})
        ));
        assert!(!ok(
            json!({"type": "text-start", "id": "t", "providerMetadata": null})
        ));
        assert!(ok(json!({"type": "finish", "finishReason": "stop"})));
        assert!(!ok(json!({"type": "finish", "finishReason": "done"})));
        assert!(ok(
            json!({"type": "tool-input-available", "toolCallId": "c", "toolName": "n"})
        ));
        assert!(!ok(
            json!({"type": "tool-input-start", "toolCallId": "c", "toolName": "n", "inputEncoding": "xml"})
        ));
        assert!(ok(
            json!({"type": "data-weather", "data": null, "extra": 1})
        ));
        assert!(!ok(
            json!({"type": "data-weather", "data": 1, "transient": "yes"})
        ));
        assert!(ok(json!({"type": "some-future-chunk"})));
        assert!(!known("some-future-chunk"));
    }
}
