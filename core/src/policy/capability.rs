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
    /// Every capability, in SPEC §3 order.
    pub const ALL: [Capability; 10] = [
        Capability::ThreadRead,
        Capability::ThreadManage,
        Capability::GrantsManage,
        Capability::ParticipantsManage,
        Capability::SubthreadsCreate,
        Capability::EventsSubscribe,
        Capability::Append(AppendableType::RunStarted),
        Capability::Append(AppendableType::MessagePart),
        Capability::Append(AppendableType::ToolCallApproval),
        Capability::Append(AppendableType::RunFinished),
    ];

    fn bit(self) -> u16 {
        let index = match self {
            Capability::ThreadRead => 0,
            Capability::ThreadManage => 1,
            Capability::GrantsManage => 2,
            Capability::ParticipantsManage => 3,
            Capability::SubthreadsCreate => 4,
            Capability::EventsSubscribe => 5,
            Capability::Append(AppendableType::RunStarted) => 6,
            Capability::Append(AppendableType::MessagePart) => 7,
            Capability::Append(AppendableType::ToolCallApproval) => 8,
            Capability::Append(AppendableType::RunFinished) => 9,
        };
        1 << index
    }

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

/// A set of capabilities.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct CapabilitySet(u16);

impl CapabilitySet {
    /// No capability.
    pub const EMPTY: CapabilitySet = CapabilitySet(0);
    /// Every capability (what an admin holds).
    pub const ALL: CapabilitySet = CapabilitySet((1 << Capability::ALL.len()) - 1);
    /// What a grant on an ancestor confers on a descendant (SPEC §3).
    pub const INHERITABLE: CapabilitySet = CapabilitySet(0b10_0011);
    /// Every `events.<type>` append capability.
    pub const APPENDS: CapabilitySet = CapabilitySet(0b11_1100_0000);

    /// The set holding exactly `caps`.
    pub fn of(caps: &[Capability]) -> CapabilitySet {
        CapabilitySet(caps.iter().fold(0, |bits, c| bits | c.bit()))
    }

    /// Whether `cap` is in the set.
    pub fn contains(self, cap: Capability) -> bool {
        self.0 & cap.bit() != 0
    }

    /// Whether the set shares any capability with `other`.
    pub fn intersects(self, other: CapabilitySet) -> bool {
        self.0 & other.0 != 0
    }

    /// Both sets together.
    #[must_use]
    pub fn union(self, other: CapabilitySet) -> CapabilitySet {
        CapabilitySet(self.0 | other.0)
    }

    /// What the sets have in common.
    #[must_use]
    pub fn intersection(self, other: CapabilitySet) -> CapabilitySet {
        CapabilitySet(self.0 & other.0)
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
    /// Every role, from most to least capable.
    pub const ALL: [Role; 4] = [Role::Owner, Role::ThreadManager, Role::Member, Role::Reader];

    /// The role named `name` on the wire, if any.
    pub fn parse(name: &str) -> Option<Role> {
        Role::ALL.into_iter().find(|r| r.as_str() == name)
    }

    /// The capabilities the role bundles (SPEC §3 table).
    pub fn capabilities(self) -> CapabilitySet {
        match self {
            Role::Owner => CapabilitySet::ALL,
            Role::ThreadManager => {
                CapabilitySet(CapabilitySet::ALL.0 & !Capability::GrantsManage.bit())
            }
            Role::Member => CapabilitySet::of(&[
                Capability::ThreadRead,
                Capability::EventsSubscribe,
                Capability::SubthreadsCreate,
            ])
            .union(CapabilitySet::APPENDS),
            Role::Reader => {
                CapabilitySet::of(&[Capability::ThreadRead, Capability::EventsSubscribe])
            }
        }
    }

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
