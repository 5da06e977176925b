//! `BubbleThread`, participants and grant rows, as the seeds write them.

use serde::{Deserialize, Serialize};

use crate::ids::{PrincipalId, ThreadId};
use crate::policy::Role;

/// A thread snapshot (`BubbleThread` of bubble-threads.txt).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BubbleThread {
    /// The thread's id.
    pub thread_id: ThreadId,
    /// The parent thread; absent (no key at all) on a top-level thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_thread_id: Option<ThreadId>,
    /// The optional human-readable title; absent when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The latest committed seq, 0 for an empty thread.
    pub head_seq: u64,
    /// RFC 3339 UTC with millisecond precision.
    pub created_at: String,
    /// The current participant rows.
    pub participants: Vec<Participant>,
}

/// A participant row: who is "in" the thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Participant {
    /// The participant.
    pub principal_id: PrincipalId,
    /// The role shown for the participant.
    pub role: Role,
    /// RFC 3339 UTC with millisecond precision.
    pub joined_at: String,
}

/// A grant row: what a principal may do on a thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GrantRow {
    /// The thread granted on.
    pub thread_id: ThreadId,
    /// The grantee.
    pub principal_id: PrincipalId,
    /// The granted role.
    pub role: Role,
}
