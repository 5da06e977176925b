//! One folded `UIMessage`: its id, role, metadata and parts, and how it is
//! written out as JSON.

use serde_json::{Map, Value};

use crate::fold::tools::derived_input;

/// `UIMessage.role`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    System,
    User,
    Assistant,
}

impl Role {
    /// The role a role marker's `data` names.
    pub(crate) fn parse(value: &Value) -> Option<Role> {
        match value.as_str()? {
            "system" => Some(Role::System),
            "user" => Some(Role::User),
            "assistant" => Some(Role::Assistant),
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

/// A message as the AI SDK's streaming state holds it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Message {
    pub(crate) id: String,
    pub(crate) role: Role,
    pub(crate) metadata: Option<Value>,
    /// The parts, as JSON objects; a tool part whose input is still
    /// streaming holds `rawInput` only (see [`derived_input`]).
    pub(crate) parts: Vec<Map<String, Value>>,
    /// Trailing `step-start` parts added since the SDK last wrote a
    /// snapshot of the message: a snapshot does not show them yet.
    pub(crate) hidden: usize,
    /// A snapshot was written: the message is in the thread's list.
    pub(crate) shown: bool,
}

impl Message {
    /// A new, empty assistant message.
    pub(crate) fn new(id: String) -> Message {
        Message {
            id,
            role: Role::Assistant,
            metadata: None,
            parts: Vec::new(),
            hidden: 0,
            shown: false,
        }
    }

    /// Drops the parts no snapshot showed: a new stream continues the
    /// message as its last snapshot left it.
    pub(crate) fn settle(&mut self) {
        let shown = self.parts.len() - self.hidden;
        self.parts.truncate(shown);
        self.hidden = 0;
    }

    /// Appends the message's JSON (its last snapshot) to `out`.
    pub(crate) fn write_json(&self, out: &mut String) {
        out.push_str("{\"id\":");
        push_json(out, &Value::String(self.id.clone()));
        out.push_str(",\"role\":\"");
        out.push_str(self.role.as_str());
        out.push('"');
        if let Some(metadata) = &self.metadata {
            out.push_str(",\"metadata\":");
            push_json(out, metadata);
        }
        out.push_str(",\"parts\":[");
        let shown = &self.parts[..self.parts.len() - self.hidden];
        for (i, part) in shown.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            match derived_input(part) {
                Some(input) => {
                    let mut part = part.clone();
                    if let Some(input) = input {
                        part.insert("input".into(), input);
                    }
                    push_json(out, &Value::Object(part));
                }
                None => push_json(out, &Value::Object(part.clone())),
            }
        }
        out.push_str("]}");
    }
}

fn push_json(out: &mut String, value: &Value) {
    out.push_str(&serde_json::to_string(value).unwrap_or_else(|_| "null".to_owned()));
}

/// The SDK's `mergeObjects` for message metadata: objects merge key by key,
/// deeply (arrays and other values replace); where either side is not an
/// object, the new metadata replaces the old.
pub(crate) fn merge_metadata(base: Option<Value>, update: &Value) -> Value {
    match (base, update) {
        (Some(Value::Object(mut base)), Value::Object(update)) => {
            merge(&mut base, update);
            Value::Object(base)
        }
        _ => update.clone(),
    }
}

fn merge(base: &mut Map<String, Value>, update: &Map<String, Value>) {
    for (key, value) in update {
        if matches!(key.as_str(), "__proto__" | "constructor" | "prototype") {
            continue;
        }
        match (base.get_mut(key), value) {
            (Some(Value::Object(old)), Value::Object(new)) => merge(old, new),
            _ => {
                base.insert(key.clone(), value.clone());
            }
        }
    }
}
