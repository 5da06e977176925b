//! The wire model of threads: snapshots, participants, grants and events.

mod event;
mod thread;

pub use event::{AppendableType, EventBody, RunStatus, StoredEvent};
pub use thread::{BubbleThread, GrantRow, Participant};
