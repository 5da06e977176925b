//! Tool parts: the SDK's `updateToolPart` and `updateDynamicToolPart`, and
//! the tool chunks that drive them (`tool-input-*`, `tool-approval-request`,
//! `tool-output-*`), field for field as `processUIMessageStream` sets them.
//!
//! While a tool call's input streams, the SDK re-parses the whole partial
//! JSON at every delta. The fold keeps only `rawInput` and derives `input`
//! from it when the part is read ([`derived_input`]), so a long input costs
//! one parse per read instead of one per delta.

use serde_json::{Map, Value};

use crate::fold::partial_json::parse_partial_json;
use crate::fold::stream::{step_start, text, Rejected};
use crate::maps::HashMap;

/// A tool call whose input is streaming (`partialToolCalls` in the SDK).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PartialTool {
    text: String,
    encoding: Option<Value>,
    tool_name: String,
    dynamic: bool,
    title: Option<Value>,
    tool_metadata: Option<Value>,
}

/// What the SDK puts in `input`.
enum Input {
    Absent,
    Value(Value),
    /// Parsed from the streamed text (`rawInput`).
    Partial,
}

/// The options of one `updateToolPart` call; `None` is `undefined`.
struct Update {
    call: String,
    name: String,
    state: &'static str,
    input: Input,
    raw_input: Option<Value>,
    encoding: Option<Value>,
    output: Option<Value>,
    error_text: Option<Value>,
    executed: Option<Value>,
    preliminary: Option<Value>,
    title: Option<Value>,
    tool_metadata: Option<Value>,
    provider_metadata: Option<Value>,
}

impl Update {
    fn new(call: &str, name: &str, state: &'static str) -> Update {
        Update {
            call: call.to_owned(),
            name: name.to_owned(),
            state,
            input: Input::Absent,
            raw_input: None,
            encoding: None,
            output: None,
            error_text: None,
            executed: None,
            preliminary: None,
            title: None,
            tool_metadata: None,
            provider_metadata: None,
        }
    }

    fn output_state(&self) -> bool {
        matches!(self.state, "output-available" | "output-error")
    }
}

fn field(chunk: &Map<String, Value>, key: &str) -> Option<Value> {
    chunk.get(key).cloned()
}

fn put(part: &mut Map<String, Value>, key: &str, value: Option<Value>) {
    match value {
        Some(value) => {
            part.insert(key.to_owned(), value);
        }
        None => {
            part.remove(key);
        }
    }
}

fn is_static(part: &Map<String, Value>) -> bool {
    text(part, "type").starts_with("tool-")
}

fn is_dynamic(part: &Map<String, Value>) -> bool {
    text(part, "type") == "dynamic-tool"
}

fn is_tool(part: &Map<String, Value>) -> bool {
    is_static(part) || is_dynamic(part)
}

fn calls(part: &Map<String, Value>, call: &str) -> bool {
    part.get("toolCallId").and_then(Value::as_str) == Some(call)
}

/// `getStaticToolName`: the type after `tool-`.
fn static_name(part: &Map<String, Value>) -> String {
    text(part, "type").get(5..).unwrap_or("").to_owned()
}

fn tool_name(part: &Map<String, Value>) -> String {
    if is_dynamic(part) {
        text(part, "toolName").to_owned()
    } else {
        static_name(part)
    }
}

/// The input of a part whose input is streaming: `Some(input)` (`None`
/// when the partial text does not parse) for such a part, else `None`.
pub(crate) fn derived_input(part: &Map<String, Value>) -> Option<Option<Value>> {
    if text(part, "state") != "input-streaming" || part.contains_key("input") {
        return None;
    }
    let raw = part.get("rawInput")?.as_str()?;
    Some(parse_input(raw, part.get("inputEncoding")))
}

fn parse_input(raw: &str, encoding: Option<&Value>) -> Option<Value> {
    if encoding.and_then(Value::as_str) == Some("text") {
        Some(Value::String(raw.to_owned()))
    } else {
        parse_partial_json(raw)
    }
}

/// `toolInvocation.input`, derived where it is.
fn input_of(part: &Map<String, Value>) -> Option<Value> {
    derived_input(part).unwrap_or_else(|| part.get("input").cloned())
}

/// Stores a derived input before the state leaves `input-streaming`.
fn materialize(part: &mut Map<String, Value>) {
    if let Some(Some(input)) = derived_input(part) {
        part.insert("input".into(), input);
    }
}

fn set_input(part: &mut Map<String, Value>, update: &Update, keeps_raw: bool) {
    match &update.input {
        Input::Absent => put(part, "input", None),
        Input::Value(value) => put(part, "input", Some(value.clone())),
        Input::Partial if keeps_raw => put(part, "input", None),
        Input::Partial => {
            let raw = update
                .raw_input
                .as_ref()
                .and_then(Value::as_str)
                .unwrap_or("");
            put(part, "input", parse_input(raw, update.encoding.as_ref()));
        }
    }
}

fn provider_metadata(part: &mut Map<String, Value>, update: &Update) {
    if let Some(meta) = update.provider_metadata.clone().filter(|m| !m.is_null()) {
        let key = if update.output_state() {
            "resultProviderMetadata"
        } else {
            "callProviderMetadata"
        };
        part.insert(key.into(), meta);
    }
}

/// `updateToolPart` (static) or `updateDynamicToolPart`.
fn update(parts: &mut Vec<Map<String, Value>>, u: Update, dynamic: bool, existing: Option<usize>) {
    let found = existing.or_else(|| {
        let from = step_start(parts);
        (from..parts.len()).find(|&i| {
            let p = &parts[i];
            calls(p, &u.call) && if dynamic { is_dynamic(p) } else { is_static(p) }
        })
    });
    if let Some(i) = found {
        let part = &mut parts[i];
        part.insert("state".into(), Value::String(u.state.into()));
        if dynamic {
            part.insert("toolName".into(), Value::String(u.name.clone()));
        } else {
            part.insert("type".into(), Value::String(format!("tool-{}", u.name)));
        }
        set_input(part, &u, u.raw_input.is_some());
        put(part, "output", u.output.clone());
        put(part, "errorText", u.error_text.clone());
        put(part, "rawInput", u.raw_input.clone());
        put(part, "inputEncoding", u.encoding.clone());
        put(part, "preliminary", u.preliminary.clone());
        if u.title.is_some() {
            put(part, "title", u.title.clone());
        }
        if u.tool_metadata.is_some() {
            put(part, "toolMetadata", u.tool_metadata.clone());
        }
        if u.executed.is_some() {
            put(part, "providerExecuted", u.executed.clone());
        }
        provider_metadata(part, &u);
        return;
    }
    let mut part = Map::new();
    if dynamic {
        part.insert("type".into(), Value::String("dynamic-tool".into()));
        part.insert("toolName".into(), Value::String(u.name.clone()));
    } else {
        part.insert("type".into(), Value::String(format!("tool-{}", u.name)));
    }
    part.insert("toolCallId".into(), Value::String(u.call.clone()));
    part.insert("state".into(), Value::String(u.state.into()));
    put(&mut part, "title", u.title.clone());
    put(&mut part, "toolMetadata", u.tool_metadata.clone());
    let keeps_raw = !dynamic && u.raw_input.is_some();
    set_input(&mut part, &u, keeps_raw);
    put(&mut part, "inputEncoding", u.encoding.clone());
    put(&mut part, "output", u.output.clone());
    if !dynamic {
        put(&mut part, "rawInput", u.raw_input.clone());
    }
    put(&mut part, "errorText", u.error_text.clone());
    put(&mut part, "providerExecuted", u.executed.clone());
    put(&mut part, "preliminary", u.preliminary.clone());
    provider_metadata(&mut part, &u);
    parts.push(part);
}

/// `getToolInvocation`: in the current step, else the last in the message.
fn invocation(parts: &[Map<String, Value>], call: &str) -> Result<usize, Rejected> {
    let from = step_start(parts);
    (from..parts.len())
        .find(|&i| is_tool(&parts[i]) && calls(&parts[i], call))
        .or_else(|| {
            (0..parts.len())
                .rev()
                .find(|&i| is_tool(&parts[i]) && calls(&parts[i], call))
        })
        .ok_or(Rejected)
}

/// The stream's partial tool calls, rebuilt from a message it continues
/// (`createStreamingUIMessageState`).
pub(crate) fn restore(parts: &[Map<String, Value>]) -> HashMap<String, PartialTool> {
    let mut partial = HashMap::default();
    for part in &parts[step_start(parts)..] {
        if !is_tool(part) || text(part, "state") != "input-streaming" {
            continue;
        }
        partial.insert(
            text(part, "toolCallId").to_owned(),
            PartialTool {
                text: text(part, "rawInput").to_owned(),
                encoding: part.get("inputEncoding").cloned(),
                tool_name: tool_name(part),
                dynamic: is_dynamic(part),
                title: part.get("title").cloned(),
                tool_metadata: part.get("toolMetadata").cloned(),
            },
        );
    }
    partial
}

/// Applies a tool chunk of type `ty`; `Ok(true)` (the SDK writes a snapshot
/// after every tool chunk), `Err` where the SDK throws.
pub(crate) fn apply(
    partial: &mut HashMap<String, PartialTool>,
    parts: &mut Vec<Map<String, Value>>,
    ty: &str,
    chunk: &Map<String, Value>,
) -> Result<bool, Rejected> {
    let call = text(chunk, "toolCallId");
    let chunk_dynamic = chunk.get("dynamic") == Some(&Value::Bool(true));
    match ty {
        "tool-input-start" => {
            partial.insert(
                call.to_owned(),
                PartialTool {
                    text: String::new(),
                    encoding: field(chunk, "inputEncoding"),
                    tool_name: text(chunk, "toolName").to_owned(),
                    dynamic: chunk_dynamic,
                    title: field(chunk, "title"),
                    tool_metadata: field(chunk, "toolMetadata"),
                },
            );
            let mut u = Update::new(call, text(chunk, "toolName"), "input-streaming");
            u.encoding = field(chunk, "inputEncoding");
            u.executed = field(chunk, "providerExecuted");
            u.title = field(chunk, "title");
            u.tool_metadata = field(chunk, "toolMetadata");
            u.provider_metadata = field(chunk, "providerMetadata");
            update(parts, u, chunk_dynamic, None);
        }
        "tool-input-delta" => {
            let p = partial.get_mut(call).ok_or(Rejected)?;
            p.text.push_str(text(chunk, "inputTextDelta"));
            let mut u = Update::new(call, &p.tool_name, "input-streaming");
            u.encoding = p.encoding.clone();
            u.input = Input::Partial;
            u.raw_input = Some(Value::String(p.text.clone()));
            u.title = p.title.clone();
            u.tool_metadata = p.tool_metadata.clone();
            let dynamic = p.dynamic;
            update(parts, u, dynamic, None);
        }
        "tool-input-available" => {
            let mut u = Update::new(call, text(chunk, "toolName"), "input-available");
            u.input = chunk
                .get("input")
                .cloned()
                .map_or(Input::Absent, Input::Value);
            u.executed = field(chunk, "providerExecuted");
            u.provider_metadata = field(chunk, "providerMetadata");
            u.title = field(chunk, "title");
            u.tool_metadata = field(chunk, "toolMetadata");
            update(parts, u, chunk_dynamic, None);
        }
        "tool-input-error" => {
            let from = step_start(parts);
            let existing = parts[from..].iter().find(|p| is_tool(p) && calls(p, call));
            let dynamic = existing.map_or(chunk_dynamic, is_dynamic);
            let mut u = Update::new(call, text(chunk, "toolName"), "output-error");
            let input = field(chunk, "input");
            if dynamic {
                u.input = input.map_or(Input::Absent, Input::Value);
            } else {
                u.raw_input = input;
            }
            u.error_text = field(chunk, "errorText");
            u.executed = field(chunk, "providerExecuted");
            u.provider_metadata = field(chunk, "providerMetadata");
            u.tool_metadata = field(chunk, "toolMetadata");
            update(parts, u, dynamic, None);
        }
        "tool-approval-request" => {
            let i = invocation(parts, call)?;
            let part = &mut parts[i];
            materialize(part);
            let mut approval = Map::new();
            approval.insert(
                "id".into(),
                Value::String(text(chunk, "approvalId").to_owned()),
            );
            if let Some(d) = chunk.get("approvalDescriptor").filter(|v| !v.is_null()) {
                approval.insert("descriptor".into(), d.clone());
            }
            if let Some(input) = chunk.get("inputSchemaInput") {
                approval.insert("inputSchemaInput".into(), input.clone());
            }
            if let Some(signature) = chunk.get("signature") {
                approval.insert("signature".into(), signature.clone());
            }
            part.insert("state".into(), Value::String("approval-requested".into()));
            part.insert("approval".into(), Value::Object(approval));
        }
        "tool-output-denied" => {
            let i = invocation(parts, call)?;
            materialize(&mut parts[i]);
            parts[i].insert("state".into(), Value::String("output-denied".into()));
        }
        "tool-output-available" | "tool-output-error" => {
            let i = invocation(parts, call)?;
            let inv = &parts[i];
            let dynamic = is_dynamic(inv);
            let available = ty == "tool-output-available";
            let state = if available {
                "output-available"
            } else {
                "output-error"
            };
            let mut u = Update::new(call, &tool_name(inv), state);
            u.input = input_of(inv).map_or(Input::Absent, Input::Value);
            if available {
                u.output = field(chunk, "output");
                u.preliminary = field(chunk, "preliminary");
            } else {
                u.error_text = field(chunk, "errorText");
                if !dynamic {
                    u.raw_input = inv.get("rawInput").cloned();
                }
            }
            u.executed = field(chunk, "providerExecuted");
            u.provider_metadata = field(chunk, "providerMetadata");
            u.title = inv.get("title").cloned();
            u.tool_metadata =
                field(chunk, "toolMetadata").or_else(|| inv.get("toolMetadata").cloned());
            update(parts, u, dynamic, Some(i));
        }
        _ => return Ok(false),
    }
    Ok(true)
}

/// A `tool_call_approval` decision on the parts of one message: each tool
/// part of call `call` awaiting approval becomes `approval-responded`, its
/// `approval` gaining `approved` and `reason` (the SDK's
/// `addToolApprovalResponse`).
pub(crate) fn respond(
    parts: &mut [Map<String, Value>],
    call: &str,
    approved: bool,
    reason: Option<&str>,
) {
    for part in parts.iter_mut() {
        if !is_tool(part) || !calls(part, call) || text(part, "state") != "approval-requested" {
            continue;
        }
        part.insert("state".into(), Value::String("approval-responded".into()));
        if let Some(Value::Object(approval)) = part.get_mut("approval") {
            approval.insert("approved".into(), Value::Bool(approved));
            put(
                approval,
                "reason",
                reason.map(|r| Value::String(r.to_owned())),
            );
        }
    }
}

/// Whether any part of `parts` awaits approval for `call`.
pub(crate) fn awaits_approval(parts: &[Map<String, Value>], call: &str) -> bool {
    parts
        .iter()
        .any(|p| is_tool(p) && calls(p, call) && text(p, "state") == "approval-requested")
}
