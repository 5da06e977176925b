//! Capabilities on a thread target and the roles that bundle them.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::model::AppendableType;

/// A capability on a thread target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Capability {
    /// `thread.read`
    ThreadRead,
    /// `thread.manage`
    ThreadManage,
    /// `grants.manage`
    GrantsManage,
    /// `participants.manage`
    ParticipantsManage,
    /// `subthreads.create`
    SubthreadsCreate,
    /// `events.subscribe`
    EventsSubscribe,
    /// `events.<type>` for an appendable type.
    Append(AppendableType),
}

impl Capability {
    /// The wire name, e.g. `"events.message_part"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Capability::ThreadRead => "thread.read",
            Capability::ThreadManage => "thread.manage",
            Capability::GrantsManage => "grants.manage",
            Capability::ParticipantsManage => "participants.manage",
            Capability::SubthreadsCreate => "subthreads.create",
            Capability::EventsSubscribe => "events.subscribe",
            Capability::Append(t) => t.capability_name(),
        }
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A role granted to a principal on a thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// Every capability.
    Owner,
    /// Every capability but `grants.manage`.
    ThreadManager,
    /// Read, subscribe, create subthreads, append every type.
    Member,
    /// Read and subscribe.
    Reader,
}

impl Role {
    /// The wire name, e.g. `"thread_manager"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Owner => "owner",
            Role::ThreadManager => "thread_manager",
            Role::Member => "member",
            Role::Reader => "reader",
        }
    }
}
