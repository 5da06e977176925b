//! The fold against hand-checked AI SDK results (the JavaScript tests hold
//! it to the `ai` package itself over random chunk sequences).

use serde_json::{json, Value};

use super::*;

/// Folds `events` (bodies without `seq`) from seq 1.
fn fold(events: &[Value]) -> MessageFold {
    let mut fold = MessageFold::new();
    for (i, event) in events.iter().enumerate() {
        let seq = i as u64 + 1;
        let mut event = event.clone();
        event["seq"] = json!(seq);
        fold.apply(seq, &event.to_string()).unwrap();
    }
    fold
}

fn messages(events: &[Value]) -> Value {
    let body: Value = serde_json::from_str(&fold(events).to_json()).unwrap();
    assert_eq!(body["throughSeq"], json!(events.len()));
    body["messages"].clone()
}

fn active_runs(events: &[Value]) -> Value {
    let body: Value = serde_json::from_str(&fold(events).to_json()).unwrap();
    body["activeRuns"].clone()
}

fn part(run: &str, part: Value) -> Value {
    json!({"type": "message_part", "runId": run, "part": part, "version": "ai-sdk-v6"})
}

fn parts(run: &str, chunks: Vec<Value>) -> Vec<Value> {
    chunks.into_iter().map(|c| part(run, c)).collect()
}

fn approval(call: &str, approved: bool) -> Value {
    json!({"type": "tool_call_approval", "runId": "u", "toolCallId": call, "approved": approved})
}

#[test]
fn a_user_message_then_a_streamed_answer() {
    let mut events = vec![json!({"type": "run_started", "runId": "u1"})];
    events.extend(parts(
        "u1",
        vec![
            json!({"type": "start", "messageId": "m-user"}),
            json!({"type": ROLE_CHUNK, "data": "user", "transient": true}),
            json!({"type": "text-start", "id": "0"}),
            json!({"type": "text-delta", "id": "0", "delta": "Hello?"}),
            json!({"type": "text-end", "id": "0"}),
            json!({"type": "finish"}),
        ],
    ));
    events.push(json!({"type": "run_finished", "runId": "u1", "status": "completed"}));
    events.extend(parts(
        "a1",
        vec![
            json!({"type": "start", "messageId": "m-1", "messageMetadata": {"model": {"name": "x"}}}),
            json!({"type": "start-step"}),
            json!({"type": "reasoning-start", "id": "r"}),
            json!({"type": "reasoning-delta", "id": "r", "delta": "Think"}),
            json!({"type": "reasoning-end", "id": "r", "providerMetadata": {"p": {"sig": "s"}}}),
            json!({"type": "text-start", "id": "t"}),
            json!({"type": "text-delta", "id": "t", "delta": "Hi "}),
            json!({"type": "text-delta", "id": "t", "delta": "there"}),
            json!({"type": "finish-step"}),
            json!({"type": "finish", "finishReason": "stop", "messageMetadata": {"model": {"tokens": 3}}}),
        ],
    ));
    assert_eq!(
        messages(&events),
        json!([
            {"id": "m-user", "role": "user", "parts": [{"type": "text", "text": "Hello?", "state": "done"}]},
            {"id": "m-1", "role": "assistant", "metadata": {"model": {"name": "x", "tokens": 3}}, "parts": [
                {"type": "step-start"},
                {"type": "reasoning", "id": "r", "text": "Think", "state": "done", "providerMetadata": {"p": {"sig": "s"}}},
                {"type": "text", "text": "Hi there", "state": "streaming"},
            ]},
        ])
    );
}

#[test]
fn a_tool_call_approved_then_continued_by_a_second_run() {
    let mut events = parts(
        "a1",
        vec![
            json!({"type": "start", "messageId": "m-1"}),
            json!({"type": "start-step"}),
            json!({"type": "tool-input-start", "toolCallId": "c1", "toolName": "weather"}),
            json!({"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": "{\"city\":\"Par"}),
        ],
    );
    // Mid-stream, the input is the partial JSON parsed.
    assert_eq!(
        messages(&events)[0]["parts"][1],
        json!({"type": "tool-weather", "toolCallId": "c1", "state": "input-streaming",
               "input": {"city": "Par"}, "rawInput": "{\"city\":\"Par"})
    );
    events.extend(parts(
        "a1",
        vec![
            json!({"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": "is\"}"}),
            json!({"type": "tool-input-available", "toolCallId": "c1", "toolName": "weather", "input": {"city": "Paris"}}),
            json!({"type": "tool-approval-request", "approvalId": "ap-1", "toolCallId": "c1"}),
            json!({"type": "finish-step"}),
            json!({"type": "finish", "finishReason": "tool-calls"}),
        ],
    ));
    events.push(json!({"type": "run_finished", "runId": "a1", "status": "completed"}));
    events.push(approval("c1", true));
    // A second approval changes nothing: the part is no longer awaiting one.
    events.push(approval("c1", false));
    let answered = messages(&events);
    assert_eq!(
        answered[0]["parts"][1],
        json!({"type": "tool-weather", "toolCallId": "c1", "state": "approval-responded",
               "input": {"city": "Paris"}, "approval": {"id": "ap-1", "approved": true}})
    );
    assert_eq!(active_runs(&events), json!([]));
    events.extend(parts(
        "a2",
        vec![
            json!({"type": "start", "messageId": "m-1"}),
            json!({"type": "tool-output-available", "toolCallId": "c1", "output": {"temp": 21}}),
            json!({"type": "start-step"}),
            json!({"type": "text-start", "id": "t"}),
            json!({"type": "text-delta", "id": "t", "delta": "21°C"}),
            json!({"type": "text-end", "id": "t"}),
            json!({"type": "finish"}),
        ],
    ));
    let continued = events.len() - 6;
    assert_eq!(
        active_runs(&events),
        json!([{"runId": "a2", "messageId": "m-1", "fromSeq": continued}])
    );
    assert_eq!(
        messages(&events),
        json!([{"id": "m-1", "role": "assistant", "parts": [
            {"type": "step-start"},
            {"type": "tool-weather", "toolCallId": "c1", "state": "output-available",
             "input": {"city": "Paris"}, "output": {"temp": 21}, "approval": {"id": "ap-1", "approved": true}},
            {"type": "step-start"},
            {"type": "text", "text": "21°C", "state": "done"},
        ]}])
    );
}

#[test]
fn a_denied_tool_call_and_a_dynamic_tool() {
    let mut events = parts(
        "a1",
        vec![
            json!({"type": "tool-input-start", "toolCallId": "c1", "toolName": "rm", "dynamic": true, "title": "Remove"}),
            json!({"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": "[1, 2"}),
            json!({"type": "tool-approval-request", "approvalId": "ap", "toolCallId": "c1", "approvalDescriptor": null, "inputSchemaInput": null}),
        ],
    );
    events.push(json!({"type": "tool_call_approval", "runId": "u", "toolCallId": "c1", "approved": false, "reason": "no"}));
    events.extend(parts(
        "a1",
        vec![json!({"type": "tool-output-denied", "toolCallId": "c1"})],
    ));
    assert_eq!(
        messages(&events),
        json!([{"id": "a1", "role": "assistant", "parts": [
            {"type": "dynamic-tool", "toolName": "rm", "toolCallId": "c1", "state": "output-denied",
             "title": "Remove", "input": [1, 2], "rawInput": "[1, 2",
             "approval": {"id": "ap", "inputSchemaInput": null, "approved": false, "reason": "no"}},
        ]}])
    );
}

#[test]
fn data_parts_replace_by_id_and_transient_ones_are_not_kept() {
    let events = parts(
        "a1",
        vec![
            json!({"type": "data-progress", "id": "p", "data": {"pct": 10}}),
            json!({"type": "data-note", "data": "once", "transient": false}),
            json!({"type": "data-progress", "id": "p", "data": {"pct": 90}}),
            json!({"type": "data-toast", "data": "hi", "transient": true}),
        ],
    );
    assert_eq!(
        messages(&events),
        json!([{"id": "a1", "role": "assistant", "parts": [
            {"type": "data-progress", "id": "p", "data": {"pct": 90}},
            {"type": "data-note", "data": "once", "transient": false},
        ]}])
    );
}

#[test]
fn a_rejected_chunk_ends_its_run_and_unknown_chunks_are_ignored() {
    let events = parts(
        "a1",
        vec![
            json!({"type": "text-start", "id": "t"}),
            json!({"type": "some-future-chunk", "x": 1}),
            json!({"type": "text-delta", "id": "t", "delta": "kept"}),
            json!({"type": "text-delta", "id": "nope", "delta": "throws"}),
            json!({"type": "text-delta", "id": "t", "delta": " ignored"}),
        ],
    )
    .into_iter()
    .chain(parts(
        "a2",
        vec![
            json!({"type": "text-start", "id": "t"}),
            json!({"type": "text-delta", "id": "t", "delta": 5}),
            json!({"type": "text-delta", "id": "t", "delta": "ignored"}),
        ],
    ))
    .chain([json!({"type": "run_finished", "runId": "a1", "status": "failed"})])
    .chain(parts("a1", vec![json!({"type": "text-start", "id": "t2"})]))
    .collect::<Vec<_>>();
    assert_eq!(
        messages(&events),
        json!([
            {"id": "a1", "role": "assistant", "parts": [
                {"type": "text", "text": "kept", "state": "streaming"},
                {"type": "text", "text": "", "state": "streaming"},
            ]},
            {"id": "a2", "role": "assistant", "parts": [{"type": "text", "text": "", "state": "streaming"}]},
        ])
    );
}

#[test]
fn unwritten_messages_and_step_starts_wait_for_a_snapshot() {
    let mut events = parts(
        "a1",
        vec![
            json!({"type": "start"}),
            json!({"type": "start-step"}),
            json!({"type": "finish-step"}),
        ],
    );
    assert_eq!(messages(&events), json!([]));
    events.extend(parts(
        "a1",
        vec![
            json!({"type": "data-x", "data": 1}),
            json!({"type": "start-step"}),
        ],
    ));
    assert_eq!(
        messages(&events),
        json!([{"id": "a1", "role": "assistant", "parts": [{"type": "step-start"}, {"type": "data-x", "data": 1}]}])
    );
    // A second run continuing the message starts from its last snapshot.
    events.extend(parts(
        "a2",
        vec![
            json!({"type": "start", "messageId": "a1"}),
            json!({"type": "file", "url": "u", "mediaType": "m"}),
        ],
    ));
    assert_eq!(
        messages(&events),
        json!([{"id": "a1", "role": "assistant", "parts": [
            {"type": "step-start"}, {"type": "data-x", "data": 1}, {"type": "file", "mediaType": "m", "url": "u"},
        ]}])
    );
}

#[test]
fn a_start_with_another_message_id_moves_the_run_on() {
    let events = parts(
        "a1",
        vec![
            json!({"type": "start", "messageId": "m1"}),
            json!({"type": "text-start", "id": "t"}),
            json!({"type": "start", "messageId": "m2"}),
            json!({"type": "text-delta", "id": "t", "delta": "closed with m1"}),
        ],
    );
    assert_eq!(
        messages(&events),
        json!([
            {"id": "m1", "role": "assistant", "parts": [{"type": "text", "text": "", "state": "streaming"}]},
            {"id": "m2", "role": "assistant", "parts": []},
        ])
    );
}

#[test]
fn events_must_come_in_order() {
    let mut fold = MessageFold::new();
    assert_eq!(
        fold.apply(2, "{}"),
        Err(OutOfOrder {
            expected: 1,
            got: 2
        })
    );
    fold.apply(1, "not json").unwrap();
    assert_eq!(fold.through_seq(), 1);
    assert_eq!(
        fold.apply(1, "{}"),
        Err(OutOfOrder {
            expected: 2,
            got: 1
        })
    );
}

/// Any JSON value: the fields of hostile chunks.
fn any_json() -> impl proptest::strategy::Strategy<Value = Value> {
    use proptest::prelude::*;
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i32>().prop_map(Value::from),
        "[a-c{}\\[\\]\":,0-9 ]{0,6}".prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-z]{1,3}|id|toolCallId|delta", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest::proptest! {
    #[test]
    fn hostile_chunks_never_break_the_fold(
        chunks in proptest::collection::vec(
            (
                proptest::sample::select(vec![
                    "start", "text-start", "text-delta", "text-end", "reasoning-delta", "tool-input-start",
                    "tool-input-delta", "tool-input-available", "tool-input-error", "tool-approval-request",
                    "tool-output-available", "tool-output-error", "tool-output-denied", "data-x", ROLE_CHUNK,
                    "file", "source-url", "start-step", "finish-step", "finish", "message-metadata", "other",
                ]),
                proptest::collection::btree_map(
                    proptest::sample::select(vec![
                        "id", "delta", "toolCallId", "toolName", "inputTextDelta", "input", "output",
                        "messageId", "messageMetadata", "dynamic", "data", "approvalId", "url", "mediaType",
                        "providerMetadata", "errorText", "inputEncoding", "transient",
                    ]),
                    any_json(),
                    0..5,
                ),
                proptest::sample::select(vec!["r1", "r2"]),
                proptest::bool::ANY,
            ),
            0..40,
        )
    ) {
        let mut events = Vec::new();
        for (ty, fields, run, approve) in chunks {
            let mut chunk: serde_json::Map<String, Value> = fields.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
            chunk.insert("type".into(), json!(ty));
            events.push(part(run, Value::Object(chunk)));
            if approve {
                events.push(approval("c", true));
            }
        }
        let body: Value = serde_json::from_str(&fold(&events).to_json()).unwrap();
        proptest::prop_assert!(body["messages"].is_array());
    }
}
