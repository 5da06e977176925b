//! One response stream folded into its message: the AI SDK v6
//! `processUIMessageStream`, chunk by chunk, for text, reasoning, files,
//! sources, data parts, steps and metadata (tool chunks are in `tools`).

use serde_json::{Map, Value};

use crate::fold::message::{merge_metadata, Message, Role};
use crate::fold::tools::{self, PartialTool};
use crate::maps::HashMap;

/// The chunk type whose `data` sets the role of the message being folded.
pub const ROLE_CHUNK: &str = "data-bubble-role";

/// A chunk the SDK throws on (a delta or end for a part that is not open, a
/// tool chunk for a call it does not know): the stream ends there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Rejected;

/// A string field, `""` when absent.
pub(crate) fn text<'a>(map: &'a Map<String, Value>, key: &str) -> &'a str {
    map.get(key).and_then(Value::as_str).unwrap_or("")
}

/// Where the current step's parts begin: after the last `step-start`.
pub(crate) fn step_start(parts: &[Map<String, Value>]) -> usize {
    parts
        .iter()
        .rposition(|p| text(p, "type") == "step-start")
        .map_or(0, |i| i + 1)
}

/// The streaming state of one message (`StreamingUIMessageState` without
/// the message itself): the open text and reasoning parts and the tool
/// calls whose input is streaming.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct StreamState {
    text: HashMap<String, usize>,
    reasoning: HashMap<String, usize>,
    partial: HashMap<String, PartialTool>,
}

impl StreamState {
    /// A stream that continues `message` (`createStreamingUIMessageState`).
    pub(crate) fn over(message: &Message) -> StreamState {
        StreamState {
            text: HashMap::default(),
            reasoning: HashMap::default(),
            partial: tools::restore(&message.parts),
        }
    }

    /// Applies one valid chunk of type `ty` to `message`: `Ok(true)` when
    /// the SDK would write a snapshot of the message after it. `reset` is
    /// set for a `start` that began this stream on another message.
    pub(crate) fn apply(
        &mut self,
        message: &mut Message,
        ty: &str,
        chunk: &Map<String, Value>,
        reset: bool,
    ) -> Result<bool, Rejected> {
        let pm = || chunk.get("providerMetadata").cloned();
        let wrote = match ty {
            "text-start" | "reasoning-start" => {
                let mut part = Map::new();
                let reasoning = ty == "reasoning-start";
                let kind = if reasoning { "reasoning" } else { "text" };
                part.insert("type".into(), Value::String(kind.into()));
                if reasoning {
                    part.insert("id".into(), Value::String(text(chunk, "id").to_owned()));
                }
                part.insert("text".into(), Value::String(String::new()));
                if let Some(meta) = pm() {
                    part.insert("providerMetadata".into(), meta);
                }
                part.insert("state".into(), Value::String("streaming".into()));
                let open = if reasoning {
                    &mut self.reasoning
                } else {
                    &mut self.text
                };
                open.insert(text(chunk, "id").to_owned(), message.parts.len());
                message.parts.push(part);
                true
            }
            "text-delta" | "reasoning-delta" | "text-end" | "reasoning-end" => {
                let open = if ty.starts_with("text") {
                    &mut self.text
                } else {
                    &mut self.reasoning
                };
                let id = text(chunk, "id");
                let &i = open.get(id).ok_or(Rejected)?;
                let part = &mut message.parts[i];
                if ty.ends_with("-delta") {
                    if let Some(Value::String(s)) = part.get_mut("text") {
                        s.push_str(text(chunk, "delta"));
                    }
                } else {
                    part.insert("state".into(), Value::String("done".into()));
                    open.remove(id);
                }
                if let Some(meta) = pm() {
                    part.insert("providerMetadata".into(), meta);
                }
                true
            }
            "file" => {
                let mut part = Map::new();
                part.insert("type".into(), Value::String("file".into()));
                part.insert(
                    "mediaType".into(),
                    Value::String(text(chunk, "mediaType").to_owned()),
                );
                part.insert("url".into(), Value::String(text(chunk, "url").to_owned()));
                if let Some(meta) = pm() {
                    part.insert("providerMetadata".into(), meta);
                }
                message.parts.push(part);
                true
            }
            "source-url" | "source-document" => {
                let keys: &[&str] = if ty == "source-url" {
                    &["sourceId", "url", "title", "providerMetadata"]
                } else {
                    &[
                        "sourceId",
                        "mediaType",
                        "title",
                        "filename",
                        "providerMetadata",
                    ]
                };
                let mut part = Map::new();
                part.insert("type".into(), Value::String(ty.into()));
                for key in keys {
                    if let Some(value) = chunk.get(*key) {
                        part.insert((*key).into(), value.clone());
                    }
                }
                message.parts.push(part);
                true
            }
            "start-step" => {
                let mut part = Map::new();
                part.insert("type".into(), Value::String("step-start".into()));
                message.parts.push(part);
                message.hidden += 1;
                false
            }
            "finish-step" => {
                self.text.clear();
                self.reasoning.clear();
                false
            }
            "start" => {
                let metadata = merge(message, chunk);
                reset || chunk.contains_key("messageId") || metadata
            }
            "finish" | "message-metadata" => merge(message, chunk),
            data if data.starts_with("data-") => {
                if data == ROLE_CHUNK {
                    if let Some(role) = chunk.get("data").and_then(Role::parse) {
                        message.role = role;
                    }
                }
                if chunk.get("transient") == Some(&Value::Bool(true)) {
                    return Ok(false);
                }
                let id = chunk.get("id").and_then(Value::as_str);
                let existing = id.and_then(|id| {
                    message.parts.iter_mut().find(|p| {
                        text(p, "type") == data && p.get("id").and_then(Value::as_str) == Some(id)
                    })
                });
                match existing {
                    Some(part) => match chunk.get("data") {
                        Some(value) => {
                            part.insert("data".into(), value.clone());
                        }
                        None => {
                            part.remove("data");
                        }
                    },
                    None => message.parts.push(chunk.clone()),
                }
                true
            }
            _ => tools::apply(&mut self.partial, &mut message.parts, ty, chunk)?,
        };
        if wrote {
            message.hidden = 0;
        }
        Ok(wrote)
    }
}

/// `updateMessageMetadata`: merges a non-null `messageMetadata`; returns
/// whether there was one (the SDK then writes).
fn merge(message: &mut Message, chunk: &Map<String, Value>) -> bool {
    match chunk.get("messageMetadata") {
        Some(update) if !update.is_null() => {
            let base = message.metadata.take().filter(|m| !m.is_null());
            message.metadata = Some(merge_metadata(base, update));
            true
        }
        _ => false,
    }
}
