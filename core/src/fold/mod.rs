//! A thread's AI SDK v6 `UIMessage`s, folded from its events.
//!
//! The fold reads a thread's events in seq order and keeps what an AI SDK
//! client following the thread would show: each run's `message_part`
//! chunks go through the SDK's `processUIMessageStream` rules (ported
//! chunk for chunk in [`stream`] and [`tools`]), and `tool_call_approval`
//! events answer tool approvals the way the SDK's
//! `addToolApprovalResponse` does. The rules, as `docs/http-api.md`
//! states them:
//!
//! - **Runs and messages.** Each run (`runId`) streams one message at a
//!   time. A run's first chunk picks it: the `messageId` of a `start`
//!   chunk, else the run id. A later `start` with another `messageId`
//!   moves the run on to that message. A message id already in the thread
//!   continues that message (as the SDK continues the last assistant
//!   message after a tool approval): its parts stay, the new chunks add to
//!   them. `run_finished` ends the run; runs may interleave.
//! - **Order and snapshots.** Messages are listed in the order the SDK
//!   first wrote a snapshot of them; a message the SDK never wrote (a run
//!   of `start-step` and `finish` only) is not listed, and a `step-start`
//!   part appears once a later chunk writes it, exactly as
//!   `readUIMessageStream` yields them.
//! - **Roles.** A message is `assistant` unless a chunk
//!   `{"type":"data-bubble-role","data":"user"|"system","transient":true}`
//!   of its run names another role (the chat transport sends one with
//!   every user message).
//! - **Rejected chunks.** A chunk of a known type that breaks the SDK's
//!   chunk schema, or that the SDK throws on (a `text-delta` for a part
//!   that is not open, a tool chunk for an unknown call), ends that run's
//!   fold: its message stays as it was, later chunks of the run are
//!   ignored until its `run_finished`. Chunks of unknown types are
//!   ignored, as the SDK ignores them.
//!
//! ```
//! use bubble_core::fold::MessageFold;
//!
//! let mut fold = MessageFold::new();
//! let events = [
//!     r#"{"seq":1,"type":"run_started","runId":"r1"}"#,
//!     r#"{"seq":2,"type":"message_part","runId":"r1","part":{"type":"text-start","id":"t"}}"#,
//!     r#"{"seq":3,"type":"message_part","runId":"r1","part":{"type":"text-delta","id":"t","delta":"Hi"}}"#,
//! ];
//! for (i, json) in events.iter().enumerate() {
//!     fold.apply(i as u64 + 1, json).unwrap();
//! }
//! assert_eq!(
//!     fold.to_json(),
//!     concat!(
//!         r#"{"messages":[{"id":"r1","role":"assistant","parts":[{"type":"text","text":"Hi","state":"streaming"}]}],"#,
//!         r#""throughSeq":3,"activeRuns":[{"runId":"r1","messageId":"r1","fromSeq":2}]}"#
//!     )
//! );
//! ```

use serde::Deserialize;
use serde_json::{Map, Value};

mod chunk;
mod message;
mod partial_json;
mod stream;
mod tools;

use crate::maps::HashMap;
use message::Message;
use stream::StreamState;
pub use stream::ROLE_CHUNK;

/// An event given out of order: the fold takes seq `expected` next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutOfOrder {
    /// The seq the fold takes next.
    pub expected: u64,
    /// The seq it was given.
    pub got: u64,
}

/// A run being folded.
#[derive(Debug, Clone, PartialEq)]
struct Run {
    /// The seq of its first `message_part`.
    from_seq: u64,
    /// The message it streams into (an index into the fold's messages).
    message: usize,
    stream: StreamState,
    /// A chunk was rejected: the rest of the run is ignored.
    broken: bool,
}

/// The fields of an event the fold reads.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Fields {
    #[serde(rename = "type")]
    ty: String,
    run_id: Option<String>,
    part: Option<Value>,
    tool_call_id: Option<String>,
    approved: Option<bool>,
    reason: Option<String>,
}

/// A thread's messages folded through some seq; feed it every event in
/// order with [`MessageFold::apply`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MessageFold {
    through_seq: u64,
    folded_bytes: usize,
    messages: Vec<Message>,
    /// Shown messages, in the order they were first written.
    order: Vec<usize>,
    by_id: HashMap<String, usize>,
    runs: HashMap<String, Run>,
}

impl MessageFold {
    /// An empty fold (through seq 0).
    pub fn new() -> MessageFold {
        MessageFold::default()
    }

    /// The last seq folded.
    pub fn through_seq(&self) -> u64 {
        self.through_seq
    }

    /// Bytes of JSON of the `message_part` and `tool_call_approval` events
    /// folded: what bounds the fold's size.
    pub fn folded_bytes(&self) -> usize {
        self.folded_bytes
    }

    /// Folds the event at `seq` (its persisted JSON), which must be the
    /// next one. Events of other types only advance the fold.
    pub fn apply(&mut self, seq: u64, event_json: &str) -> Result<(), OutOfOrder> {
        let expected = self.through_seq + 1;
        if seq != expected {
            return Err(OutOfOrder { expected, got: seq });
        }
        self.through_seq = seq;
        let Ok(fields) = serde_json::from_str::<Fields>(event_json) else {
            return Ok(());
        };
        match fields.ty.as_str() {
            "message_part" => {
                self.folded_bytes += event_json.len();
                if let (Some(run), Some(Value::Object(chunk))) = (fields.run_id, fields.part) {
                    self.chunk(seq, run, &chunk);
                }
            }
            "tool_call_approval" => {
                self.folded_bytes += event_json.len();
                if let (Some(call), Some(approved)) = (fields.tool_call_id, fields.approved) {
                    self.approve(&call, approved, fields.reason.as_deref());
                }
            }
            "run_finished" => {
                if let Some(run) = fields.run_id {
                    self.runs.remove(&run);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// `{"messages":[UIMessage…],"throughSeq":n,"activeRuns":[…]}`: the
    /// messages, the seq they are folded through, and the runs with chunks
    /// and no `run_finished` yet, each as `{"runId","messageId","fromSeq"}`
    /// (the message it streams into, the seq of its first chunk), in
    /// `fromSeq` order.
    pub fn to_json(&self) -> String {
        let mut out = String::from("{\"messages\":[");
        for (n, &i) in self.order.iter().enumerate() {
            if n > 0 {
                out.push(',');
            }
            self.messages[i].write_json(&mut out);
        }
        out.push_str("],\"throughSeq\":");
        out.push_str(&self.through_seq.to_string());
        let mut runs: Vec<(&String, &Run)> = self.runs.iter().collect();
        runs.sort_by_key(|(_, run)| run.from_seq);
        let runs: Vec<Value> = runs
            .into_iter()
            .map(|(id, run)| {
                serde_json::json!({
                    "runId": id,
                    "messageId": self.messages[run.message].id,
                    "fromSeq": run.from_seq,
                })
            })
            .collect();
        out.push_str(",\"activeRuns\":");
        out.push_str(&Value::Array(runs).to_string());
        out.push('}');
        out
    }

    /// The message `id` (continued: as its last snapshot left it), or a new
    /// one; and a stream state over it.
    fn open(&mut self, id: String) -> (usize, StreamState) {
        match self.by_id.get(&id) {
            Some(&i) => {
                let message = &mut self.messages[i];
                message.settle();
                (i, StreamState::over(message))
            }
            None => {
                let i = self.messages.len();
                self.messages.push(Message::new(id.clone()));
                self.by_id.insert(id, i);
                (i, StreamState::default())
            }
        }
    }

    fn chunk(&mut self, seq: u64, run_id: String, chunk: &Map<String, Value>) {
        let Some(ty) = chunk.get("type").and_then(Value::as_str) else {
            return;
        };
        let message_id = match (ty, chunk.get("messageId")) {
            ("start", Some(Value::String(id))) => Some(id.clone()),
            _ => None,
        };
        let run = match self.runs.get(&run_id) {
            Some(run) => run,
            None => {
                let (message, stream) =
                    self.open(message_id.clone().unwrap_or_else(|| run_id.clone()));
                let run = Run {
                    from_seq: seq,
                    message,
                    stream,
                    broken: false,
                };
                self.runs.entry(run_id.clone()).or_insert(run)
            }
        };
        if run.broken {
            return;
        }
        let moved = message_id.filter(|id| *id != self.messages[run.message].id);
        let valid = chunk::valid(ty, chunk);
        if let (Some(id), true) = (moved.clone(), valid) {
            let (message, stream) = self.open(id);
            if let Some(run) = self.runs.get_mut(&run_id) {
                run.message = message;
                run.stream = stream;
            }
        }
        let Some(run) = self.runs.get_mut(&run_id) else {
            return;
        };
        if !valid {
            run.broken = true;
            return;
        }
        if !chunk::known(ty) {
            return;
        }
        let message = &mut self.messages[run.message];
        match run.stream.apply(message, ty, chunk, moved.is_some()) {
            Ok(true) if !message.shown => {
                message.shown = true;
                self.order.push(run.message);
            }
            Ok(_) => {}
            Err(stream::Rejected) => run.broken = true,
        }
    }

    /// A `tool_call_approval`: the first listed message with a part of
    /// call `call` awaiting approval has its parts of that call answered.
    fn approve(&mut self, call: &str, approved: bool, reason: Option<&str>) {
        let found = self
            .order
            .iter()
            .copied()
            .find(|&i| tools::awaits_approval(&self.messages[i].parts, call));
        if let Some(i) = found {
            tools::respond(&mut self.messages[i].parts, call, approved, reason);
        }
    }
}

#[cfg(test)]
mod tests;
