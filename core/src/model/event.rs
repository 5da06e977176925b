//! Event bodies (appendable and server-emitted) and persisted events.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::ids::PrincipalId;
use crate::policy::Role;

/// The client-appendable event types, each with its `events.<type>` capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AppendableType {
    /// `run_started`
    RunStarted,
    /// `message_part`
    MessagePart,
    /// `tool_call_approval`
    ToolCallApproval,
    /// `run_finished`
    RunFinished,
}

impl AppendableType {
    /// All appendable types, in SPEC order.
    pub const ALL: [AppendableType; 4] = [
        AppendableType::RunStarted,
        AppendableType::MessagePart,
        AppendableType::ToolCallApproval,
        AppendableType::RunFinished,
    ];

    /// The `events.<type>` capability name.
    pub fn capability_name(self) -> &'static str {
        match self {
            AppendableType::RunStarted => "events.run_started",
            AppendableType::MessagePart => "events.message_part",
            AppendableType::ToolCallApproval => "events.tool_call_approval",
            AppendableType::RunFinished => "events.run_finished",
        }
    }

    /// The wire `type` string.
    pub fn as_str(self) -> &'static str {
        &self.capability_name()["events.".len()..]
    }
}

/// `run_finished.status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// The run completed.
    Completed,
    /// The run failed.
    Failed,
    /// The run was aborted.
    Aborted,
}

/// An event body, tagged by `type` (SPEC §2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(
    tag = "type",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum EventBody {
    /// A run begins (human or agent).
    RunStarted {
        /// The author.
        principal_id: PrincipalId,
        /// The run.
        run_id: String,
    },
    /// One AI SDK `UIMessageChunk`, stored verbatim.
    MessagePart {
        /// The author.
        principal_id: PrincipalId,
        /// The run.
        run_id: String,
        /// The chunk: a JSON object with a string `type`.
        part: serde_json::Value,
        /// `"ai-sdk-v6"`.
        version: String,
    },
    /// A decision on a tool call.
    ToolCallApproval {
        /// The author.
        principal_id: PrincipalId,
        /// The run.
        run_id: String,
        /// The tool call decided on.
        tool_call_id: String,
        /// The decision.
        approved: bool,
        /// Why, optionally.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// A run ends.
    RunFinished {
        /// The author.
        principal_id: PrincipalId,
        /// The run.
        run_id: String,
        /// How it ended.
        status: RunStatus,
    },
    /// Server-emitted: a participant joined.
    ParticipantJoined {
        /// Who joined.
        principal_id: PrincipalId,
        /// Their role.
        role: Role,
    },
    /// Server-emitted: a participant left or was removed.
    ParticipantLeft {
        /// Who left.
        principal_id: PrincipalId,
    },
    /// Server-emitted: the title changed (`null` when cleared).
    ThreadTitleUpdated {
        /// Who renamed.
        by_principal_id: PrincipalId,
        /// The new title.
        title: Option<String>,
    },
}

/// A persisted event: its seq and its serialized JSON
/// (`{"seq","threadId","createdAt","type",…}`), serialized once and shared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEvent {
    /// The event's seq in its thread (1, 2, … gapless).
    pub seq: u64,
    /// The persisted event as JSON text.
    pub json: Arc<str>,
}
